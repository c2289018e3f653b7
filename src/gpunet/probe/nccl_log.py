"""An NCCL_DEBUG=INFO log: the NET/IB devices NCCL opened, each channel's transport (GDRDMA or not on
the network ones), and whether in-network reduction (CollNet, SHARP) was used. A job's log mixes NCCL
lines with the program's own output: only NCCL lines are read; a text with none is refused."""

from __future__ import annotations

import re

from gpunet.errors import ParseError
from gpunet.files.inputs import integer
from gpunet.model.rdma import NcclChannel, NcclLog

TOOL = "NCCL_DEBUG=INFO log"
# host:pid:tid [rank] NCCL INFO ..., as NCCL writes it; launchers put their own tag before it (mpirun
# --tag-output's [1,0]<stdout>:, srun -l's 0:, Ray's (RayWorkerWrapper pid=...)). A line quoted with
# `>` (a paste in an issue or a mail) is a copy of a log, not the log.
INFO = re.compile(r"\S+:\d+:\d+ \[\d+\] NCCL INFO (.*)$")
QUOTED = re.compile(r"^\s*>")
VERSION = re.compile(r"NCCL version (\S+)")
IB_HCA = re.compile(r"^NCCL_IB_HCA set (?:by environment )?to (\S+)")
USING = re.compile(r"^NET/IB : Using ((?:\[\d+\]\S+\s*)+)")
CHANNEL = re.compile(r"^Channel (\d+)(?:/\d+)? : (\d+)\[[^\]]*\] -> (\d+)\[[^\]]*\]"
                     r"(?: \[(?:send|receive)\])? via (\S+)")
COLLNET_USED = re.compile(r"via COLLNET/|^CollNet \d+(?:/\d+)? :|Connected all collnet|CollNet channels", re.I)
COLLNET_OFF = re.compile(r"(?:NCCL_COLLNET_ENABLE set by environment to 0|CollNet.*(?:not supported|disabled|"
                         r"failed|could not))", re.I)


def parse_nccl_debug_log(text: str) -> NcclLog:
    found: dict[str, list[str]] = {"version": [], "ib_hca": [], "devices": [], "used": [], "off": []}
    channels: list[NcclChannel] = []
    lines = 0
    for line in text.splitlines():
        if QUOTED.match(line):
            continue
        if version := VERSION.search(line):  # older NCCL prints it bare, without the INFO prefix
            found["version"].append(version[1])
        if info := INFO.search(line):
            lines += 1
            channels += _message(info[1].strip(), found)
    if not lines:
        raise ParseError(TOOL, 1, "no 'NCCL INFO' line: not an NCCL_DEBUG=INFO log")
    used, off = found["used"], found["off"]
    return NcclLog(version=next(iter(found["version"]), None), ib_hca=next(iter(found["ib_hca"]), None),
                   ib_devices=tuple(dict.fromkeys(found["devices"])), net_channels=tuple(channels),
                   collnet=True if used else (False if off else None), collnet_lines=tuple((used or off)[:5]),
                   lines=lines)


def _message(message: str, found: dict[str, list[str]]) -> list[NcclChannel]:
    """Note what one INFO message says; a network channel line is returned."""
    if COLLNET_USED.search(message):
        found["used"].append(message)
    elif COLLNET_OFF.search(message):
        found["off"].append(message)
    if hca := IB_HCA.match(message):
        found["ib_hca"].append(hca[1])
    elif using := USING.match(message):
        found["devices"] += re.findall(r"\[\d+\](\S+)", using[1])
    elif (channel := CHANNEL.match(message)) and channel[4].startswith("NET/"):
        return [_channel(channel)]
    return []


def _channel(match: re.Match[str]) -> NcclChannel:
    transport = match[4]
    return NcclChannel(rank=integer(match[2], TOOL), transport=transport, gdr=transport.split("/")[-1] == "GDRDMA")
