"""An NCCL_DEBUG=INFO log: the NET/IB devices NCCL opened, each channel's transport (GDRDMA or not on
the network ones), and whether in-network reduction (CollNet, SHARP) was used. A job's log mixes NCCL
lines with the program's own output: only NCCL lines are read; a text with none is refused."""

from __future__ import annotations

import re

from gpunet.errors import ParseError
from gpunet.model.rdma import NcclChannel, NcclLog

TOOL = "NCCL_DEBUG=INFO log"
INFO = re.compile(r"NCCL INFO (.*)$")
VERSION = re.compile(r"NCCL version (\S+)")
USING = re.compile(r"^NET/IB : Using ((?:\[\d+\]\S+\s*)+)")
CHANNEL = re.compile(r"^Channel (\d+)(?:/\d+)? : (\d+)\[[^\]]*\] -> (\d+)\[[^\]]*\]"
                     r"(?: \[(?:send|receive)\])? via (\S+)")
COLLNET_USED = re.compile(r"via COLLNET/|^CollNet \d+(?:/\d+)? :|Connected all collnet|CollNet channels", re.I)
COLLNET_OFF = re.compile(r"(?:NCCL_COLLNET_ENABLE set by environment to 0|CollNet.*(?:not supported|disabled|"
                         r"failed|could not))", re.I)


def parse_nccl_debug_log(text: str) -> NcclLog:
    version, devices, channels, used, off = None, [], [], [], []
    lines = 0
    for line in text.splitlines():
        if found := VERSION.search(line):
            version = found[1]
        info = INFO.search(line)
        if info is None:
            continue
        lines += 1
        message = info[1].strip()
        if using := USING.match(message):
            devices += re.findall(r"\[\d+\](\S+)", using[1])
        elif channel := CHANNEL.match(message):
            channels += [_channel(channel)] if channel[4].startswith("NET/") else []
        if COLLNET_USED.search(message):
            used.append(message)
        elif COLLNET_OFF.search(message):
            off.append(message)
    if not lines and version is None:
        raise ParseError(TOOL, 1, "no 'NCCL INFO' line: not an NCCL_DEBUG=INFO log")
    return NcclLog(version=version, ib_devices=tuple(dict.fromkeys(devices)), net_channels=tuple(channels),
                   collnet=True if used else (False if off else None), collnet_lines=tuple((used or off)[:5]),
                   lines=lines)


def _channel(match: re.Match[str]) -> NcclChannel:
    transport = match[4]
    return NcclChannel(rank=int(match[2]), transport=transport, gdr=transport.split("/")[-1] == "GDRDMA")
