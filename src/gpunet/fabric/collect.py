"""Reading what the fabric reports: LLDP neighbour tables from nodes (the fleet runner, each
device's own runner from gpunet.reach, or a folder of saved outputs, one file per device) and the
InfiniBand topology (a saved ibnetdiscover file, or ibnetdiscover run where reach says). A node
that cannot be read is said, and its cables count as unchecked, never as missing."""

from __future__ import annotations

import signal
import stat
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import cast

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import ParseError, UsageError
from gpunet.fabric.ibnetdiscover import IbTopology, Rows, parse_ibnetdiscover, parse_rows, topology_of
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
# A saved file this large is parsed in a process of its own (ib_file_reader): a second Python starts
# in 0.1-0.3 s, and a 16 MB file (about 7,500 servers' HCAs) takes longer than that to parse.
BACKGROUND_FROM_BYTES = 16 << 20


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
    return topology_of(_saved_rows(path))


def _saved_rows(path: Path) -> Rows:
    try:
        return parse_rows(read_text(path, MAX_IBNETDISCOVER_BYTES, "saved ibnetdiscover output"))
    except ParseError as exc:
        raise UsageError(f"{path}: line {exc.line}: {str(exc).split(': ', 2)[-1]}") from None


@contextmanager
def ib_file_reader(path: Path) -> Iterator[Callable[[], IbTopology]]:
    """A saved ibnetdiscover file's topology, to be asked for later (the call waits for it): one of
    BACKGROUND_FROM_BYTES or more is read and parsed in a process of its own from the start, on the
    other core, while the caller reads the plan (at 1M GPUs: a 256 MB file parsed in 9 s beside the
    19 s of a 1 GB plan.json). The child is a fresh interpreter (spawn: nothing of this process's
    state, threads or locks is copied), ignores Ctrl-C (this process handles it and ends the child),
    and is ended on the way out, error or not. A smaller file is read when asked, here."""
    if not _large(path):
        yield lambda: ib_from_file(path)
        return
    context = get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(target=_parse_in_child, args=(path, sending), daemon=True, name="gpunet-ibnetdiscover")
    child.start()
    sending.close()  # the child's end only: a child that dies leaves recv() at end of file
    try:
        yield lambda: topology_of(_received(receiving, child, path))
    finally:
        receiving.close()
        child.terminate()  # our own child, by its PID: an idle one after its answer, else stopped mid-parse
        child.join()


def _large(path: Path) -> bool:
    try:
        info = path.stat()
    except OSError:
        return False  # said by the reader, in its words
    return stat.S_ISREG(info.st_mode) and info.st_size >= BACKGROUND_FROM_BYTES


def _parse_in_child(path: Path, sending: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        answer: tuple[str, object] = ("rows", _saved_rows(path))
    except UsageError as exc:
        answer = ("refused", str(exc))
    sending.send(answer)
    sending.close()


def _received(receiving: Connection, child: BaseProcess, path: Path) -> Rows:
    try:
        kind, value = receiving.recv()
    except EOFError:
        child.join()
        raise UsageError(f"{path}: reading the saved ibnetdiscover output ended without an answer (its process "
                         f"exited {child.exitcode})") from None
    if kind == "refused":
        raise UsageError(str(value))
    return cast(Rows, value)


def ib_here(run: CommandRunner = run_local) -> IbTopology:
    """ibnetdiscover on this host (attached to the fabric)."""
    done = run(["ibnetdiscover"], check=False, timeout=600)
    if done.returncode != 0:
        raise UsageError(f"ibnetdiscover exited {done.returncode}: {done.stderr.strip()[:200]}")
    return parse_ibnetdiscover(done.stdout)
