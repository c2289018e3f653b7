"""A simulated InfiniBand fabric from the Plan: ibsim (Debian ibsim-utils) holding the topology,
opensm routing it, and the unmodified infiniband-diags tools (ibnetdiscover, iblinkinfo,
ibqueryerrors, perfquery, ibtracert) talking to it through ibsim-run (LD_PRELOAD of libumad2sim).

Faults go through ibsim's console, as its authors intended: Unlink (unplug), Link (a cable in
another port, two cables swapped), PerformanceSet (port counters). A lane or speed fault cannot be
set on a live link in ibsim: the simulator restarts with that cable's rate in the topology and the
console faults are applied again."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from gpunet.errors import LabError
from gpunet.lab.ibsim_state import IbFault, IbsimState, console_lines, read_sim, sim_dir, write_sim
from gpunet.lab.ibsim_topology import SimFabric, node_id, render_topology, servers_on, sim_fabric
from gpunet.model.base import Frozen
from gpunet.model.io import read_plan
from gpunet.model.plan import Plan

TOOLS = {"ibsim": "ibsim-utils", "ibsim-run": "ibsim-utils", "opensm": "opensm", "ibnetdiscover": "infiniband-diags"}
SUBNET_UP = "SUBNET UP"
SM_TIMEOUT_S = 90.0


def missing_tools() -> list[str]:
    return [f"{tool} (Debian package {package})" for tool, package in TOOLS.items() if shutil.which(tool) is None]


def ibsim_up(plan: Plan, sim_id: str, *, plane: str | None = None, routing: str = "ftree,minhop") -> IbsimState:
    """Start the simulator and opensm on the plan's InfiniBand plane; waits for SUBNET UP."""
    missing = missing_tools()
    if missing:
        raise LabError(f"the InfiniBand simulator needs {', '.join(missing)}")
    if read_sim(sim_id) is not None:
        raise LabError(f"ibsim {sim_id} is up; `gpunet ibsim down --id {sim_id}` first")
    fabric = sim_fabric(plan, plane)
    directory = sim_dir(sim_id)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    (directory / "plan.json").write_text(fabric.plan.model_dump_json())
    state = IbsimState(sim_id=sim_id, plane=fabric.plane, routing=routing, notes=fabric.notes,
                       sm_node=_first_ca(fabric), servers=servers_on(fabric.plan, fabric.plane))
    write_sim(state)  # first: `down` can always find what to stop
    try:
        return _start(fabric, state)
    except LabError:
        ibsim_down(sim_id)
        raise


def _first_ca(fabric: SimFabric) -> str:
    link = next(link for link in fabric.links if link.tier == "node_leaf")
    return node_id(fabric.plan, link.a.device, link.a.port)[0]


def _start(fabric: SimFabric, state: IbsimState) -> IbsimState:
    directory = sim_dir(state.sim_id)
    topology = directory / "topology.net"
    topology.write_text(render_topology(fabric, state.rate_overrides(fabric.plan)))
    console = directory / "console"
    if not console.exists():
        os.mkfifo(console, 0o600)
    state = state.model_copy(update={"ibsim_pid": _spawn(["ibsim", "-s", str(topology)], directory / "ibsim.log",
                                                         env=state.env(), stdin=console)})
    write_sim(state)
    _wait_for(directory / "ibsim.log", "Network simulator ready", 30, "ibsim did not start")
    for fault in state.faults:
        send(state, console_lines(fabric.plan, fault))
    log = directory / "opensm.log"
    opensm = ["ibsim-run", "opensm", "-d2", "-f", str(log), "--dump_files_dir", str(directory), "-R", state.routing,
              "-s", "5"]
    state = state.model_copy(update={"opensm_pid": _spawn(opensm, directory / "opensm.out", env=state.env(
        attach=state.sm_node, cache=directory / "cache"))})
    write_sim(state)
    _wait_for(log, SUBNET_UP, SM_TIMEOUT_S, "opensm did not bring the subnet up")
    return state


def _spawn(argv: Sequence[str], log: Path, *, env: dict[str, str], stdin: Path | None = None) -> int:
    """A process of its own session in the log's directory (where libumad2sim leaves its sysfs)."""
    read_fd = os.open(stdin, os.O_RDWR) if stdin else None  # read-write: the console never sees end-of-file
    with log.open("ab") as out:
        process = subprocess.Popen(list(argv), stdin=read_fd if read_fd is not None else subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.STDOUT, env=os.environ | env,
                                   start_new_session=True, cwd=log.parent)
    if read_fd is not None:
        os.close(read_fd)
    return process.pid


def _wait_for(log: Path, text: str, timeout_s: float, failure: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        time.sleep(0.1)
    tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
    raise LabError(f"{failure} within {timeout_s:g} s (see {log}: {' | '.join(tail)[:300]})")


def send(state: IbsimState, lines: Sequence[str]) -> str:
    """Console commands, answered in ibsim's log; an answer of "# ..." (ibsim's errors) raises."""
    log = sim_dir(state.sim_id) / "ibsim.log"
    start = log.stat().st_size
    marker = f"# gpunet {time.monotonic_ns()}"
    fd = os.open(sim_dir(state.sim_id) / "console", os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, ("\n".join([*lines, marker]) + "\n").encode())
    finally:
        os.close(fd)
    deadline = time.monotonic() + 10
    answer = ""
    while marker not in answer and time.monotonic() < deadline:
        time.sleep(0.02)
        with log.open("rb") as handle:
            handle.seek(start)
            answer = handle.read().decode(errors="replace")
    errors = [line for line in answer.replace("sim> ", "\n").splitlines()
              if (line.startswith("# ") and not line.startswith("# gpunet")) or "unknown - skipped" in line]
    if marker not in answer or errors:
        raise LabError(f"ibsim refused {lines[0]!r}: {(errors or ['no answer'])[0]}")
    return answer


def ibsim_down(sim_id: str) -> bool:
    """Stop the simulator and opensm (by PID) and remove the directory; False if none was up."""
    state = read_sim(sim_id)
    if state is None:
        return False
    for pid in (state.opensm_pid, state.ibsim_pid):
        if pid:
            _kill(pid)
    shutil.rmtree(sim_dir(sim_id), ignore_errors=True)
    return True


def _kill(pid: int) -> None:
    """SIGKILL one process we started, if it is still ibsim or opensm (a PID is pinned first),
    and reap it when it is our child (a zombie no one reaps outlives a test run)."""
    if _command(pid) not in ("ibsim", "opensm"):
        return
    if _alive(pid):
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        finally:
            os.close(fd)
    _reap(pid)


def _reap(pid: int, timeout_s: float = 3.0) -> None:
    """Wait for the process to be gone; collect it if it is our child (its leader turns zombie
    before its threads have exited, and a zombie nobody collects outlives a test run)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # not our child: another gpunet process started it
            if not _alive(pid):
                return
        time.sleep(0.02)


def _stat(pid: int) -> tuple[str, str]:
    """(command name, state) from /proc/PID/stat, readable for a zombie too; ("", "") if gone."""
    try:
        head, _, tail = Path(f"/proc/{pid}/stat").read_text().rpartition(")")
    except OSError:
        return "", ""
    return head.partition("(")[2], tail.split()[0]


def _command(pid: int) -> str:
    return _stat(pid)[0]


def _alive(pid: int) -> bool:
    return _stat(pid)[1] not in ("", "Z", "X")


def sim_plan(sim_id: str) -> Plan:
    if read_sim(sim_id) is None:
        raise LabError(f"no ibsim {sim_id!r}; `gpunet ibsim up` starts one")
    return read_plan(sim_dir(sim_id) / "plan.json")


def run_tool(sim_id: str, argv: Sequence[str], *, attach: str | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """An infiniband-diags command against the simulated fabric, attached at a CA (the SM's by
    default, or the first CA no fault unplugged)."""
    state = read_sim(sim_id)
    if state is None:
        raise LabError(f"no ibsim {sim_id!r}; `gpunet ibsim up` starts one")
    env = os.environ | state.env(attach=attach or state.attach_point())
    # libumad2sim writes a fake sysfs under ./sys-<pid> of the working directory: the simulator's own.
    for _ in range(2):
        done = subprocess.run(["ibsim-run", *argv], capture_output=True, text=True, env=env, timeout=timeout,
                              check=False, cwd=sim_dir(sim_id))
        # ibsim's umad2sim preload now and then crashes the tool (SIGSEGV under load): once more
        if done.returncode >= 0:
            break
    return done


def apply_fault(sim_id: str, fault: IbFault) -> IbsimState:
    state = read_sim(sim_id)
    if state is None:
        raise LabError(f"no ibsim {sim_id!r}; `gpunet ibsim up` starts one")
    plan = sim_plan(sim_id)
    lines = console_lines(plan, fault)  # raises LabUsageError on a bad end, before anything changes
    updated = state.model_copy(update={"faults": (*state.faults, fault)})
    if fault.kind == "rate":
        return _restart(plan, updated)
    send(state, lines)
    write_sim(updated)
    return updated


def heal(sim_id: str) -> IbsimState:
    """Every fault undone: the simulator restarts from the plan's topology."""
    state = read_sim(sim_id)
    if state is None:
        raise LabError(f"no ibsim {sim_id!r}; `gpunet ibsim up` starts one")
    return _restart(sim_plan(sim_id), state.model_copy(update={"faults": ()}))


def _restart(plan: Plan, state: IbsimState) -> IbsimState:
    for pid in (state.opensm_pid, state.ibsim_pid):
        if pid:
            _kill(pid)
    for log in ("ibsim.log", "opensm.log"):
        (sim_dir(state.sim_id) / log).unlink(missing_ok=True)
    fabric = SimFabric(plan, state.plane, state.notes)
    return _start(fabric, state.model_copy(update={"ibsim_pid": None, "opensm_pid": None}))


ROUTED = re.compile(r"osm_ucast_mgr_process: (\w+) tables configured")
FTREE_ERROR = re.compile(r"ERR (AB[0-9A-F]{2}): (.*)\n((?:[ \t]+\S.*\n?)*)")  # ftree's codes, with indented detail
FTREE_GENERIC = "AB0D"  # "Fabric topology hasn't been identified as FatTree": the why comes before it


class RoutingUsed(Frozen):
    """Which engine opensm routed with, of those it was given (-R), and why ftree was refused."""

    engine: str | None  # None: no sweep has configured tables yet
    asked: str  # the -R list opensm was started with, in order
    ftree_refused: str | None = None

    def __str__(self) -> str:
        used = self.engine or "none yet"
        return f"{used} (ftree refused: {self.ftree_refused})" if self.ftree_refused else used


def routing_of_log(text: str, asked: str) -> RoutingUsed:
    """The engine of the last `osm_ucast_mgr_process: ENGINE tables configured` line of opensm's
    log, and ftree's own reason (its ERR ABxx before the generic AB0D) when it fell back."""
    engines = ROUTED.findall(text)
    engine = engines[-1] if engines else None
    refused = [(code, " ".join(f"{message} {detail}".split())) for code, message, detail in FTREE_ERROR.findall(text)]
    if not refused or engine == "ftree":
        return RoutingUsed(engine=engine, asked=asked)
    why = next((m for code, m in reversed(refused) if code != FTREE_GENERIC), refused[-1][1])
    return RoutingUsed(engine=engine, asked=asked, ftree_refused=why)


def routing_report(state: IbsimState) -> RoutingUsed:
    log = sim_dir(state.sim_id) / "opensm.log"
    return routing_of_log(log.read_text(errors="replace") if log.exists() else "", state.routing)


def routing_used(state: IbsimState) -> str:
    """The engine opensm's last sweep routed with, and why ftree was refused if it was."""
    return str(routing_report(state))
