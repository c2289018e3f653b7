"""Reading what the fabric reports: LLDP neighbour tables from nodes (the fleet runner, each
device's own runner from gpunet.reach, or a folder of saved outputs, one file per device) and the
InfiniBand topology (a saved ibnetdiscover file, or ibnetdiscover run where reach says). A node
that cannot be read is said, and its cables count as unchecked, never as missing."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import ParseError, UsageError
from gpunet.fabric.ibnetdiscover import IbTopology, parse_ibnetdiscover
from gpunet.files.inputs import read_text
from gpunet.fleet import ClusterShellRunner
from gpunet.model.types import HOSTNAME
from gpunet.probe.lldp import LldpNeighbor, parse_lldpcli_json
from gpunet.runner import CommandRunner, run_local

LLDPCLI = ("lldpcli", "-f", "json", "show", "neighbors")
Tables = dict[str, tuple[LldpNeighbor, ...]]
DeviceRun = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]  # argv, timeout
MAX_NEIGHBOUR_BYTES = 16 * 2**20  # lldpcli's JSON of a 128-port switch with every TLV is under 1 MiB
MAX_IBNETDISCOVER_BYTES = 1 << 30  # 12 500 servers (100k GPUs): about 25 MB; 125 000 (1M GPUs): 256 MB


def lldp_from_outputs(outputs: Mapping[str, str]) -> tuple[Tables, list[str]]:
    """Outputs by device; one that does not parse is said and left out (its cables unchecked)."""
    tables: Tables = {}
    notes = []
    for device, text in outputs.items():
        try:
            tables[device] = parse_lldpcli_json(text)
        except ParseError as exc:
            notes.append(f"{device}: LLDP output not understood ({exc}); its cables are unchecked")
    return tables, notes


def lldp_from_dir(directory: Path) -> Tables:
    """One file per device, named after it (gpu001.json); a file that does not parse, or is no
    regular file (a FIFO, a link to /dev/zero, a directory), is bad input."""
    files = sorted(p for p in directory.iterdir() if not p.name.startswith(".")) if directory.is_dir() else []
    if not files:
        raise UsageError(f"{directory}: no neighbour files (one per device, named after it: gpu001.json)")
    tables: Tables = {}
    for path in files:
        device = path.name.split(".")[0]
        if not HOSTNAME.fullmatch(device):
            raise UsageError(f"{path}: the file name must be the device's name (gpu001.json)")
        try:
            tables[device] = parse_lldpcli_json(read_text(path, MAX_NEIGHBOUR_BYTES, "neighbour table"))
        except ParseError as exc:
            raise UsageError(f"{path}: line {exc.line}: {str(exc).split(': ', 2)[-1]}") from None
    return tables


def lldp_from_fleet(runner: ClusterShellRunner, nodes: NodeSet) -> tuple[Tables, list[str]]:
    result = runner.run(LLDPCLI, nodes)
    failed = [f"{name}: lldpcli {o.error or f'exited {o.rc}'}: {(o.stderr or '').strip()[:120]}"
              for name, o in result.outcomes.items() if o.rc != 0]
    tables, notes = lldp_from_outputs({name: o.stdout for name, o in result.outcomes.items() if o.rc == 0})
    return tables, [*(f"{line}; its cables are unchecked" for line in failed), *notes]


def lldp_from_devices(devices: Mapping[str, DeviceRun]) -> tuple[Tables, list[str]]:
    """Every device's lldpd (a lab's servers and switches, each run where it lives), read in parallel."""

    def read(device: str) -> tuple[str, subprocess.CompletedProcess[str]]:
        return device, devices[device](list(LLDPCLI), 30)

    with ThreadPoolExecutor(max_workers=8) as pool:
        done = dict(pool.map(read, sorted(devices)))
    failed = [f"{d}: lldpcli exited {p.returncode}: {p.stderr.strip()[:120]}; its cables are unchecked"
              for d, p in done.items() if p.returncode != 0]
    tables, notes = lldp_from_outputs({d: p.stdout for d, p in done.items() if p.returncode == 0})
    return tables, [*failed, *notes]


def ib_from_file(path: Path) -> IbTopology:
    try:
        return parse_ibnetdiscover(read_text(path, MAX_IBNETDISCOVER_BYTES, "saved ibnetdiscover output"))
    except ParseError as exc:
        raise UsageError(f"{path}: line {exc.line}: {str(exc).split(': ', 2)[-1]}") from None


def ib_here(run: CommandRunner = run_local) -> IbTopology:
    """ibnetdiscover on this host (attached to the fabric)."""
    done = run(["ibnetdiscover"], check=False, timeout=600)
    if done.returncode != 0:
        raise UsageError(f"ibnetdiscover exited {done.returncode}: {done.stderr.strip()[:200]}")
    return parse_ibnetdiscover(done.stdout)
