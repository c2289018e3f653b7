"""FRR in the lab's routed switches: each switch namespace of an eBGP plane runs zebra and bgpd (and
staticd for the host routes, bfdd where the plane asks for BFD) from the frr.conf gpunet renders for
that switch, as FRR documents one daemon set per network namespace.

Everything a switch's daemons use sits in the lab's own directory, `<lab_dir>/frr/<namespace>/`:
the frr.conf, the pid files, the vty sockets (vtysh reaches them with `--vty_socket`), the zebra
socket and one log per daemon; nothing under /etc/frr or /var/run/frr. The daemons drop to the
user frr as Debian's FRR does (it refuses root unless root is in the frrvty group), so that
directory is frr's, and the lab directory above it (and the labs' root) let the group frr pass
through, never list (mode 0710).

`lab down` stops what it started by the PIDs in those pid files, each checked to be an FRR daemon
in one of the lab's namespaces before it is signalled: SIGKILL (the namespaces go next, so zebra
taking its routes out first is wasted), and the crash-log folder each daemon keeps under
/var/tmp/frr removed. A switch restarted in place (a healed miswire) gets SIGTERM first, so its
daemons clean up after themselves."""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpunet.errors import LabError, LabUsageError, ParseError
from gpunet.lab.inside import NETNS_DIR, route_widths
from gpunet.lab.netns import kill_pids
from gpunet.lab.state import Routing
from gpunet.model.plan import Plan, Switch
from gpunet.model.switching import Session, ecmp_next_hops, host_routes, plane_of, sessions
from gpunet.probe.frr import BgpPeer, parse_bgp_summary_json

FRR_BIN = Path("/usr/lib/frr")
REQUIRED = ("zebra", "bgpd")
DAEMONS = ("zebra", "staticd", "bfdd", "bgpd")  # zebra first: the others connect to its socket
FRR_USER = "frr"
SUBDIR = "frr"
BARE = "bare.conf"  # what each daemon reads itself: nothing
START_WORKERS = 16  # switches started at once: enough to keep two cores busy while each waits on its daemons
TIER_ORDER = ("core", "spine", "leaf")
START_TIMEOUT_S = 15.0  # every daemon's pid file and zebra's socket; seconds, not minutes, even on 2 busy cores
STOP_WAIT_S = 3.0
CRASH_LOGS = Path("/var/tmp/frr")  # FRR 8's per-daemon folder, <daemon>.<pid>
CRASH_LOG_DIR = re.compile(rf"{re.escape(str(CRASH_LOGS))}/({'|'.join(DAEMONS)})\.[0-9]{{1,10}}")
MAX_FDS = 4096  # descriptors of a daemon looked at: an FRR daemon holds tens
RECONVERGE_S = 30.0  # a session over a cable back up: FRR retries every 5 s (the rendered connect-retry)
VTY_END = b"\0\0\0"  # a daemon ends each answer on its vty socket with three NULs and a status byte
VTY_OK = 0
VTY_MAX_BYTES = 64 << 20  # one answer, read at most: a 64-server lab's route table is tens of kB
VTY_TIMEOUT_S = 10.0


def frr_missing() -> str | None:
    """Why the lab cannot run FRR here (None: it can)."""
    absent = [str(FRR_BIN / d) for d in REQUIRED if not (FRR_BIN / d).is_file()]
    if absent:
        return f"{', '.join(absent)} not installed (Debian package frr)"
    if shutil.which("vtysh") is None:
        return "vtysh not installed (Debian package frr)"
    try:
        pwd.getpwnam(FRR_USER)
        grp.getgrnam(FRR_USER)
    except KeyError:
        return f"no user and group {FRR_USER} (FRR's daemons run as it)"
    return None


def choose_routing(asked: Routing | None) -> tuple[Routing, str]:
    """The routing a lab gets and the note that says which and why: FRR where it is installed unless
    static routes are asked for; asking for FRR where it is missing is refused."""
    missing = frr_missing()
    if asked == "static":
        return "static", "routing: static ECMP routes on every routed switch (--routing static)"
    if missing is None:
        return "frr", ("routing: FRR (zebra + bgpd, eBGP per RFC 7938) in every switch of an eBGP plane, from its "
                       "rendered frr.conf (`gpunet render --target frr`); `gpunet doctor --switches --lab ID` "
                       "checks them")
    if asked == "frr":
        raise LabUsageError(f"--routing frr: {missing}; use --routing static")
    return "static", f"routing: static ECMP routes, not FRR: {missing}"


def daemons_for(conf: str) -> list[str]:
    """The daemons a rendered frr.conf needs: staticd only for `ip route` lines, bfdd only for BFD."""
    lines = [line.strip() for line in conf.splitlines()]
    needed = {"zebra", "bgpd"}
    if any(line.startswith("ip route ") for line in lines):
        needed.add("staticd")
    if any(line.startswith("neighbor ") and line.endswith(" bfd") for line in lines):
        needed.add("bfdd")
    return [d for d in DAEMONS if d in needed]


def switch_dir(lab_dir: Path, namespace: str) -> Path:
    return lab_dir / SUBDIR / namespace


def vtysh_argv(lab_dir: Path, namespace: str, *command: str) -> list[str]:
    """vtysh talking to the daemons of one lab switch (run inside its namespace or not: a unix socket)."""
    return ["vtysh", "--vty_socket", str(switch_dir(lab_dir, namespace)), *command]


def daemon_argv(directory: Path, namespace: str, daemon: str) -> list[str]:
    """A daemon started bare (an empty file of its own): the integrated frr.conf reaches it through
    vtysh. In the switch's network namespace only (`nsenter --net`), not `ip netns exec`, which
    gives each process a mount namespace of its own (for the namespace's /sys and /etc/netns files,
    which FRR does not read: it reads /proc/sys/net, which is the namespace's anyway): every mount
    the lab makes afterwards (a namespace, a server's hostname) is then copied into each of them,
    and the 312 daemons of a 256-server lab made its namespaces, shaping and sshd several times slower."""
    return ["nsenter", f"--net={NETNS_DIR / namespace}", str(FRR_BIN / daemon), "-d", "-f", str(directory / BARE),
            "-i", str(directory / f"{daemon}.pid"), "--vty_socket", str(directory),
            "-z", str(directory / "zserv.api"), "--log", f"file:{directory / daemon}.log"]


def start_frr(lab_dir: Path, confs: Mapping[str, str]) -> None:
    """Write each switch's frr.conf, start its daemons (zebra, then, once it has its socket, the
    rest) and hand them the file through vtysh, which gives each line to the daemon it belongs to,
    as FRR loads an integrated frr.conf (a daemon reading the whole file itself stops at the first
    `exit` of a section it does not know: staticd left every `ip route` after `router bgp` out).

    Switch by switch, START_WORKERS at a time, in the order given (`frr_order`: upper tiers first), each
    configured as soon as its own daemons are up, rather than every zebra, then every bgpd, then
    every vtysh: BGP's clock starts at a switch's configuration (a session leaves Idle about 1 s
    later; a spine's update group then waits 1 s plus 50 ms a peer, from its first session, before
    its first update, and every session up by then shares that update), so spines configured first
    and leaves as they come have the fabric converged about a start timer and an update group's
    wait after the last leaf, where waiting for every switch of one step before the next left each
    spine's first session, and so its wait, to after the last switch. LabError naming the switches
    whose daemons did not start or refused a line."""
    if not confs:
        return
    _let_frr_through(lab_dir)
    dirs = {ns: _switch_folder(lab_dir, ns, conf) for ns, conf in confs.items()}
    with ThreadPoolExecutor(max_workers=START_WORKERS) as pool:
        problems = [p for p in pool.map(lambda ns: _start_switch(ns, dirs[ns], daemons_for(confs[ns])), dirs) if p]
    if problems:
        raise LabError(f"FRR: {'; '.join(problems[:3])}{f' and {len(problems) - 3} more' if len(problems) > 3 else ''}"
                       f"; logs in {lab_dir / SUBDIR}")


def frr_order(switches: Iterable[Switch]) -> list[Switch]:
    """The order start_frr takes switches in: cores, spines, then leaves, the planes taken in turn
    within a tier (each plane's first leaf early: its spines' update groups wait from their first
    session)."""
    taken: Counter[tuple[str, str]] = Counter()
    ranked = []
    for switch in switches:
        ranked.append((TIER_ORDER.index(switch.tier), taken[switch.plane, switch.tier], switch))
        taken[switch.plane, switch.tier] += 1
    return [switch for _, _, switch in sorted(ranked, key=lambda r: r[:2])]


def _start_switch(namespace: str, directory: Path, daemons: list[str]) -> str | None:
    """One switch's daemons started and its frr.conf loaded; what went wrong, or None."""
    rest = [d for d in daemons if d != "zebra"]
    return (_start(namespace, directory, ["zebra"])
            or _appeared(namespace, [directory / "zserv.api"], "zebra's socket")
            or _start(namespace, directory, rest)
            or _appeared(namespace, [directory / f"{daemon}.pid" for daemon in daemons], "pid files")
            or _load_config(namespace, directory))


def _start(namespace: str, directory: Path, daemons: list[str]) -> str | None:
    """Start the daemons side by side (each forks into the background once it is up); their start-up
    errors go to their logs. One that cannot be run, or has not forked within START_TIMEOUT_S, is
    said; the process we started is then killed (a daemon it forked after all is lab down's to stop,
    by the pid file it writes)."""
    failed = []
    processes = []
    for daemon in daemons:
        try:
            processes.append((daemon, subprocess.Popen(daemon_argv(directory, namespace, daemon),
                                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                       stderr=subprocess.PIPE, text=True)))
        except OSError as exc:
            failed.append(f"{daemon} in {namespace} could not be run ({exc.strerror or exc})")
    for daemon, process in processes:
        try:
            _, err = process.communicate(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            failed.append(f"{daemon} in {namespace} did not start within {START_TIMEOUT_S:g} s")
            continue
        if process.returncode != 0:
            failed.append(f"{daemon} in {namespace} did not start "
                          f"({(err.strip().splitlines() or ['exit ' + str(process.returncode)])[-1]})")
    return "; ".join(failed) or None


def _appeared(namespace: str, files: list[Path], what: str) -> str | None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not all(f.exists() for f in files):
        if time.monotonic() >= deadline:
            return f"{namespace} did not write its {what} within {START_TIMEOUT_S:g} s"
        time.sleep(0.01)
    return None


def _load_config(namespace: str, directory: Path) -> str | None:
    try:
        done = subprocess.run(vtysh_argv(directory.parent.parent, namespace, "-f", str(directory / "frr.conf")),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=START_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:  # run() has killed it
        return f"{namespace}: vtysh -f did not finish within {START_TIMEOUT_S:g} s"
    except OSError as exc:
        return f"{namespace}: vtysh could not be run ({exc.strerror or exc})"
    if done.returncode == 0:
        return None
    said = done.stdout.strip().splitlines()
    return f"{namespace} refused the rendered frr.conf: {(said or ['vtysh exit ' + str(done.returncode)])[-1]}"


def _let_frr_through(lab_dir: Path) -> None:
    """This lab's directory and its FRR folder: root's, group frr may pass through (0710). The labs'
    root is passable by anyone (0711: names cannot be listed, a lab's own directory stays closed),
    so a user without root is still told that a lab does not exist rather than refused."""
    root = lab_dir.parent
    root.mkdir(mode=0o711, exist_ok=True)
    root.chmod(root.stat().st_mode & 0o7777 | 0o011)
    gid = grp.getgrnam(FRR_USER).gr_gid
    for folder in (lab_dir, lab_dir / SUBDIR):
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chown(folder, 0, gid)
        folder.chmod(0o710)


def _switch_folder(lab_dir: Path, namespace: str, conf: str) -> Path:
    directory = switch_dir(lab_dir, namespace)
    directory.mkdir(mode=0o700, exist_ok=True)
    (directory / "frr.conf").write_text(conf)
    (directory / BARE).write_text("")
    for path in (directory, directory / "frr.conf", directory / BARE):
        shutil.chown(path, FRR_USER, FRR_USER)
    return directory


def restart_frr(lab_dir: Path, namespaces: set[str]) -> None:
    """The daemons of these switches stopped and started again from the frr.conf `lab up` wrote
    there: a switch whose cable to another switch went down and came back (a healed cable) starts
    afresh, as one power-cycled after re-patching would. FRR 8.4 does not route over such a port as planned
    again: a port that went down loses its next hop in the kernel's ECMP group and zebra, once it is
    back, makes the next hop again but not the group (its `show nexthop-group rib` says installed,
    with 22 next hops; the kernel's group forwards by 21: seen on every heal of a storage uplink);
    and after a miswire (a port moved into another namespace and back, which no real switch sees)
    its nexthop tracking can keep the neighbours on the other ports 'inaccessible' (one ECMP path
    of eight, in about one heal in three)."""
    running = {ns: switch_dir(lab_dir, ns) / "frr.conf" for ns in namespaces}
    confs = {ns: conf.read_text() for ns, conf in running.items() if conf.is_file()}
    if not confs:
        return
    stop_frr(lab_dir, set(confs))
    for ns in confs:  # the start waits for these to appear: the old ones must not answer for it
        for left in (*switch_dir(lab_dir, ns).glob("*.pid"), switch_dir(lab_dir, ns) / "zserv.api"):
            left.unlink(missing_ok=True)
    start_frr(lab_dir, confs)


def stop_frr(lab_dir: Path, namespaces: set[str]) -> None:
    """Stop every daemon started for the lab, by the PIDs in its pid files, each first checked to be
    an FRR daemon in one of `namespaces`: SIGTERM (a daemon cleans up after itself), then SIGKILL
    for any still there."""
    folders = [crash_log_folder(pid, daemon) for pid, daemon in _own_daemons(lab_dir / SUBDIR, namespaces)]
    await_frr(term_frr(lab_dir, namespaces), namespaces)
    _remove(folders)  # a daemon that needed SIGKILL left its own


def term_frr(lab_dir: Path, namespaces: set[str]) -> list[int]:
    """SIGTERM to every daemon of these switches (see stop_frr); their PIDs, for `await_frr`."""
    pids = [pid for pid, _ in _own_daemons(lab_dir / SUBDIR, namespaces)]
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    return pids


def kill_frr(lab_dir: Path, namespaces: set[str]) -> list[int]:
    """SIGKILL to every daemon of switches whose namespaces go next (lab down): a graceful stop
    has zebra take every route out of a kernel table about to vanish, seconds for a 256-server
    lab. The crash-log folder each daemon keeps (/var/tmp/frr/<daemon>.<pid>, which a stopped
    daemon removes itself) goes too. Their PIDs, for `await_frr`."""
    found = list(_own_daemons(lab_dir / SUBDIR, namespaces))
    folders = [crash_log_folder(pid, daemon) for pid, daemon in found]  # read while they are alive
    for pid, _ in found:
        _signal(pid, signal.SIGKILL)
    _remove(folders)
    return [pid for pid, _ in found]


def crash_log_folder(pid: int, daemon: str) -> Path | None:
    """The daemon's crash-log folder, from the descriptor it holds open on it: named by the PID it
    had before `-d` forked it into the background, never the one in its pid file (a folder named
    by that one is not there: lab down had left every daemon's behind, thousands a day)."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")[:MAX_FDS]]
    except OSError:  # gone, or a descriptor closed while read: nothing of its own to remove
        return None
    return next((Path(link) for link in links if (m := CRASH_LOG_DIR.fullmatch(link)) and m[1] == daemon), None)


def _remove(folders: list[Path | None]) -> None:
    for folder in folders:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def await_frr(pids: list[int], namespaces: set[str]) -> None:
    """Until the daemons `term_frr` signalled are gone; SIGKILL for any still there after STOP_WAIT_S."""
    deadline = time.monotonic() + STOP_WAIT_S
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
        time.sleep(0.05)
    kill_pids(pids, namespaces)


def _own_daemons(root: Path, namespaces: set[str]) -> Iterable[tuple[int, str]]:
    if not root.is_dir():
        return
    inodes = {(NETNS_DIR / ns).stat().st_ino for ns in namespaces if (NETNS_DIR / ns).exists()}
    for pid_file in root.glob("*/*.pid"):
        if pid_file.parent.name not in namespaces or pid_file.stem not in DAEMONS:
            continue
        try:
            pid = int(pid_file.read_text().strip())
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            inode = Path(f"/proc/{pid}/ns/net").stat().st_ino
        except (OSError, ValueError):
            continue  # gone already, or not a number: nothing of ours to stop
        if comm == pid_file.stem and inode in inodes:
            yield pid, comm


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        signal.pidfd_send_signal(fd, sig)
    except ProcessLookupError:
        pass
    finally:
        os.close(fd)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return False


# --- converged: every planned session Established, every leaf's routes over every planned hop ------

def unconverged(plan: Plan, switch: Switch, bgp_json: str, widths: Callable[[], Mapping[str, int]]) -> list[str]:
    """What keeps one switch from being converged, as "switch: ..." (empty once it is): planned
    sessions not Established, its own hosts' routes, and other leaves' prefixes with fewer next
    hops than planned. `widths` (prefix -> next hops forwarded by; read only once every session is
    up) is the switch's kernel table in the lab (inside.route_widths: what zebra installed, which is
    what forwards). Unreadable answers count as not converged (looked at again)."""
    try:
        summary = parse_bgp_summary_json(bgp_json)
    except ParseError:
        return [f"{switch.name}: bgp summary not readable yet"]
    peers = {p.key: p for p in summary.peers}
    down = [f"{switch.name}: {_key(plan, switch, s)} ({s.port.far_device}) {_state(peers, plan, switch, s)}"
            for s in sessions(plan, switch) if not _established(peers, plan, switch, s)]
    if down:
        return down
    try:
        routes = widths()
    except (LabError, ParseError, OSError) as exc:
        return [f"{switch.name}: routes not readable yet ({exc})"]
    own = [f"{switch.name}: no route to its host {r.address}" for r in host_routes(plan, switch)
           if routes.get(f"{r.address}/32", 0) == 0]
    return own + [f"{switch.name}: routes to {leaf} {short}" for leaf, short in _narrow(plan, switch, routes).items()]


def _key(plan: Plan, switch: Switch, session: Session) -> str:
    routing = plane_of(plan, switch).routing
    if routing is not None and routing.peering == "unnumbered":
        return f"swp{session.port.port}"
    return session.peer_address or f"swp{session.port.port}"


def _established(peers: Mapping[str, BgpPeer], plan: Plan, switch: Switch, session: Session) -> bool:
    peer = peers.get(_key(plan, switch, session))
    return peer is not None and peer.established


def _state(peers: Mapping[str, BgpPeer], plan: Plan, switch: Switch, session: Session) -> str:
    peer = peers.get(_key(plan, switch, session))
    return peer.state if peer is not None else "no session"


def _narrow(plan: Plan, switch: Switch, widths: Mapping[str, int]) -> dict[str, str]:
    """Per other leaf whose prefixes lack next hops: how many prefixes fall short."""
    short = {}
    for leaf_name, hops in ecmp_next_hops(plan, switch).items():
        leaf = plan.switches_by_name[leaf_name]
        prefixes = [f"{leaf.loopback}/32", *(f"{r.address}/32" for r in host_routes(plan, leaf))]
        width = len(hops)
        narrow = [p for p in prefixes if widths.get(p, 0) < width]
        if narrow:
            short[leaf_name] = f"{len(narrow)} of {len(prefixes)} prefixes under {width} next hops"
    return short


def converged_pending(plan: Plan, switches: dict[str, str], lab_dir: Path, pool: ThreadPoolExecutor) -> list[str]:
    """One look at every switch (namespace -> switch name) still pending: one entry per switch not
    converged, naming what keeps it; those converged are dropped from `switches` (a converged
    fabric stays so while nobody breaks it)."""
    names = list(switches)

    def look(ns: str) -> list[str]:
        summary = vty_show(lab_dir, ns, "bgpd", "show bgp summary json")
        return unconverged(plan, plan.switches_by_name[switches[ns]], summary, lambda: route_widths(ns))

    found = dict(zip(names, pool.map(look, names), strict=True))
    for ns, pending in found.items():
        if not pending:
            del switches[ns]
    return [_one_line(switches[ns], pending) for ns, pending in sorted(found.items()) if pending]


def _one_line(switch: str, pending: list[str]) -> str:
    """One entry per switch (the condition counts switches): "leaf1: 198.18.5.1 (spine1) Active, ..."."""
    return f"{switch}: {', '.join(p.removeprefix(f'{switch}: ') for p in pending)}"


def wait_converged(plan: Plan, switches: Mapping[str, str], lab_dir: Path, timeout_s: float = RECONVERGE_S) -> None:
    """Poll the switches (namespace -> switch name) until each is converged; LabError naming what
    is not once `timeout_s` passes."""
    pending = dict(switches)
    deadline = time.monotonic() + timeout_s
    with ThreadPoolExecutor(max_workers=8) as pool:
        left = converged_pending(plan, pending, lab_dir, pool)
        while left and time.monotonic() < deadline:
            time.sleep(0.25)
            left = converged_pending(plan, pending, lab_dir, pool)
    if left:
        raise LabError(f"BGP has not converged again after {timeout_s:g} s: {'; '.join(left[:3])}"
                       f"{f' and {len(left) - 3} more' if len(left) > 3 else ''}")


def frr_switches(lab_dir: Path, lab_id: str) -> dict[str, str]:
    """The lab's switches that run FRR: namespace -> switch name (from the folders `lab up` made)."""
    root = lab_dir / SUBDIR
    prefix = f"gn{lab_id}-"
    return {d.name: d.name.removeprefix(prefix) for d in sorted(root.iterdir())
            if d.is_dir() and d.name.startswith(prefix)} if root.is_dir() else {}


def vty_show(lab_dir: Path, ns: str, daemon: str, command: str) -> str:
    """One `show` command to one daemon of a lab switch over its vty socket, as vtysh sends it (the
    command and a NUL; the answer ends in three NULs and a status byte): no vtysh process per look,
    which cost `lab up` of 64 servers seconds polling 24 routers. "" where the daemon is not there
    yet, refuses the command, or answers past the size or time bounds (not converged: asked again)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as vty:
            vty.settimeout(VTY_TIMEOUT_S)
            vty.connect(str(switch_dir(lab_dir, ns) / f"{daemon}.vty"))
            vty.sendall(command.encode() + b"\0")
            answer = _vty_answer(vty)
    except OSError:
        return ""
    if answer is None or answer[-1] != VTY_OK:
        return ""
    return answer[:-len(VTY_END) - 1].decode(errors="replace")


def _vty_answer(vty: socket.socket) -> bytes | None:
    """The bytes up to and with the terminator and status; None if the daemon closed first or
    sent more than VTY_MAX_BYTES."""
    answer = bytearray()
    while not (len(answer) > len(VTY_END) and answer[-len(VTY_END) - 1:-1] == VTY_END):
        chunk = vty.recv(1 << 16)
        if not chunk or len(answer) + len(chunk) > VTY_MAX_BYTES:
            return None
        answer += chunk
    return bytes(answer)
