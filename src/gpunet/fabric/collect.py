"""Reading what the fabric reports: LLDP neighbour tables from nodes (the fleet runner, each
device's own runner from gpunet.reach, or a folder of saved outputs, one file per device) and the
InfiniBand topology (a saved ibnetdiscover file, or ibnetdiscover run where reach says). A node
that cannot be read is said, and its cables count as unchecked, never as missing."""

from __future__ import annotations

import marshal
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import ParseError, UsageError
from gpunet.fabric.ibnetdiscover import IbTopology, Rows, parse_ibnetdiscover, topology_of
from gpunet.fabric.saved_ibnetdiscover import saved_rows
from gpunet.files.inputs import read_text
from gpunet.fleet import ClusterShellRunner
from gpunet.model.types import HOSTNAME
from gpunet.probe.lldp import LldpNeighbor, parse_lldpcli_json
from gpunet.runner import CommandRunner, run_local

LLDPCLI = ("lldpcli", "-f", "json", "show", "neighbors")
Tables = dict[str, tuple[LldpNeighbor, ...]]
DeviceRun = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]  # argv, timeout
MAX_NEIGHBOUR_BYTES = 16 * 2**20  # lldpcli's JSON of a 128-port switch with every TLV is under 1 MiB
# A saved file this large is parsed in a process of its own (ib_file_reader): a second Python starts
# in 0.1-0.3 s, and a 16 MB file (about 7,500 servers' HCAs) takes longer than that to parse.
BACKGROUND_FROM_BYTES = 16 << 20
# The child: this gpunet's folder last on its path (found where this process found it, shadowing
# nothing), then the file's parse (fabric/saved_ibnetdiscover.main). Both arrive as arguments.
CHILD = ("import sys; sys.path.append(sys.argv.pop(1)); from gpunet.fabric.saved_ibnetdiscover import main; "
         "sys.exit(main(sys.argv[1:]))")


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
    return topology_of(saved_rows(path))


@contextmanager
def ib_file_reader(path: Path) -> Iterator[Callable[[], IbTopology]]:
    """A saved ibnetdiscover file's topology, to be asked for later (the call waits for it): one of
    BACKGROUND_FROM_BYTES or more is read and parsed in a Python process of its own from the start
    (fabric/saved_ibnetdiscover.main: a fresh interpreter that imports only the parser, whatever the
    caller's own script does), on the other core, while the caller reads the plan (at 1M GPUs: a
    256 MB file parsed in 9 s beside the 19 s of a 1 GB plan.json). The child is ended on the way
    out, error or Ctrl-C, and ends itself if this process dies. A smaller file, or one where no
    second Python can be started, is read when asked, here."""
    child, held = _start_child(path) if _large(path) and sys.executable else (None, -1)
    if child is None:
        yield lambda: ib_from_file(path)
        return
    with child:  # its pipes closed and the process waited for on the way out
        try:
            yield lambda: topology_of(_answer(child, path))
        finally:
            child.kill()  # our own child, by its PID: nothing if it has answered, else stopped mid-parse
            os.close(held)


def _start_child(path: Path) -> tuple[subprocess.Popen[bytes] | None, int]:
    """The child, and this process's end of the pipe that tells it this process is alive (it reads
    end of file once this end is closed, by us or by this process's death); None where it could not
    be started (out of processes or descriptors)."""
    parent_alive, held = os.pipe()
    try:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(Path(__file__).resolve().parents[2]),
                                  str(parent_alive), str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, pass_fds=(parent_alive,))
    except OSError:
        os.close(held)
        return None, -1
    finally:
        os.close(parent_alive)
    return child, held


def _large(path: Path) -> bool:
    try:
        info = path.stat()
    except OSError:
        return False  # said by the reader, in its words
    return stat.S_ISREG(info.st_mode) and info.st_size >= BACKGROUND_FROM_BYTES


def _answer(child: subprocess.Popen[bytes], path: Path) -> Rows:
    out, err = child.communicate()
    try:
        answer = marshal.loads(out) if child.returncode == 0 else None
    except (EOFError, ValueError, TypeError):
        answer = None
    if not isinstance(answer, tuple) or not answer:
        said = (err.decode(errors="replace").strip().splitlines() or [f"exit {child.returncode}"])[-1]
        raise UsageError(f"{path}: reading the saved ibnetdiscover output ended without an answer ({said[:200]})")
    if answer[0] == "refused":
        raise UsageError(str(answer[1]))
    return Rows(answer[1], answer[2])


def ib_here(run: CommandRunner = run_local) -> IbTopology:
    """ibnetdiscover on this host (attached to the fabric)."""
    done = run(["ibnetdiscover"], check=False, timeout=600)
    if done.returncode != 0:
        raise UsageError(f"ibnetdiscover exited {done.returncode}: {done.stderr.strip()[:200]}")
    return parse_ibnetdiscover(done.stdout)
