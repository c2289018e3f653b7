"""Reading what the fabric reports: LLDP neighbour tables from nodes (fleet runner, a lab, or a
folder of saved outputs, one file per device) and the InfiniBand topology (a saved ibnetdiscover
file, ibnetdiscover run here, or the simulator). A node that cannot be read is said, and its
cables count as unchecked, never as missing."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import ParseError, UsageError
from gpunet.fabric.ibnetdiscover import IbTopology, parse_ibnetdiscover
from gpunet.fabric.lldp import LldpNeighbor, parse_lldpcli_json
from gpunet.fleet import ClusterShellRunner
from gpunet.inputs import read_text
from gpunet.lab.build import node_argv_for
from gpunet.lab.lldpd import lldpcli_argv
from gpunet.lab.state import LabState
from gpunet.model.types import HOSTNAME
from gpunet.runner import CommandRunner, run_local

LLDPCLI = ("lldpcli", "-f", "json", "show", "neighbors")
Tables = dict[str, tuple[LldpNeighbor, ...]]
MAX_NEIGHBOUR_BYTES = 16 * 2**20  # lldpcli's JSON of a 128-port switch with every TLV is under 1 MiB
MAX_IBNETDISCOVER_BYTES = 64 * 2**20  # a 12 500-server fabric's ibnetdiscover is about 25 MB


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


def lldp_from_lab(state: LabState, run: CommandRunner = run_local) -> tuple[Tables, list[str]]:
    """Every server's and switch's lldpd in the lab, read in parallel."""
    devices = {ns.removeprefix(f"gn{state.lab_id}-"): ns for ns in state.namespaces}

    def read(device: str) -> tuple[str, subprocess.CompletedProcess[str]]:
        ns = devices[device]
        prefix = node_argv_for(state.lab_id, ns, []) if device in state.servers else ["ip", "netns", "exec", ns]
        return device, run([*prefix, *lldpcli_argv(*LLDPCLI[1:])], check=False, timeout=30)

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
