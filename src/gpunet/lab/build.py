"""lab up / down / status / exec: carry out a Blueprint, record it, and undo it."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial

from gpunet.errors import LabError, LabUsageError
from gpunet.lab import congestion
from gpunet.lab.access import COUNTERS_NOTE, node_argv, node_argv_for
from gpunet.lab.addressing import LAB_RANGE
from gpunet.lab.blueprint import Blueprint, Namespace, build_blueprint
from gpunet.lab.frr import await_frr, choose_routing, converged_pending, kill_frr, start_frr
from gpunet.lab.inside import pin_hostname
from gpunet.lab.lldp_lab import cabled_ports, lldp_note, lldp_started, silent_in, start_lab_lldpd
from gpunet.lab.lldpd import lldpd_available
from gpunet.lab.neighbours import LAB_LIMITS, raise_limits, restore_limits
from gpunet.lab.netns import (
    existing_namespaces,
    ip_batch,
    kill_pids,
    pids_in_namespaces,
    set_sysctls,
    tbf_line,
    tc_batch,
    unmount,
)
from gpunet.lab.ready import (
    DEFAULT_DEADLINE_S,
    PARALLEL,
    Condition,
    ConditionName,
    ConditionTiming,
    InNamespaces,
    LabNotReady,
    LabView,
    Readiness,
    far_side_pings,
    lab_conditions,
    wait_ready,
)
from gpunet.lab.slice import slice_plan
from gpunet.lab.sshd import start_sshd, write_ssh_files
from gpunet.lab.state import (
    ETC_NETNS,
    LAB_PLAN,
    LabState,
    Routing,
    all_states,
    check_id,
    free_slot,
    lab_dir,
    lab_lock,
    labs_lock,
    labs_root,
    read_state,
    slots_held,
    write_state,
)
from gpunet.model.io import plan_digest
from gpunet.model.plan import Plan
from gpunet.model.tuning import tcp_congestion
from gpunet.runner import CommandRunner, run_local

Progress = Callable[[str, int, int], None]  # (step, done, total)
STEP_WORKERS = 4  # per-namespace commands at once while a lab is built


def _silent(step: str, done: int, total: int) -> None:
    del step, done, total


def lab_up(
    plan: Plan, lab_id: str, *, max_nodes: int = 16, scale: float = 1.0,
    run: CommandRunner = run_local, progress: Progress = _silent, ready_timeout_s: float = DEFAULT_DEADLINE_S,
    routing: Routing | None = None, lldp: bool = False,
) -> LabState:
    """Build the (sliced) plan in namespaces and return once it is ready to be judged (lab/ready.py),
    or raise LabNotReady when `ready_timeout_s` passes first; idempotent for the same plan and id.
    `routing`: FRR in the switches of eBGP planes, or static routes; None: FRR where it is installed.
    `lldp`: lldpd in every namespace now, every cable end heard before this returns (else the first
    LLDP reader starts it: lab/lldp_lab.py)."""
    check_id(lab_id)
    check_sizes(max_nodes, scale)
    check_deadline(ready_timeout_s)
    _require_root()
    with lab_lock(lab_id):
        return _up(plan, lab_id, max_nodes=max_nodes, scale=scale, run=run, progress=progress,
                   deadline_s=ready_timeout_s, routing=routing, lldp=lldp and lldpd_available())


MAX_SCALE = 1000.0  # Mbit/s per plan Gbit/s: 400G at 400 Gbit/s is past what veths carry anyway


def check_sizes(max_nodes: int, scale: float) -> None:
    """Refused before anything is recorded: a NaN scale would be written as null and make the
    state file unreadable to `lab down`."""
    if max_nodes < 2:
        raise LabUsageError(f"--max-nodes {max_nodes}: a lab needs at least 2 servers")
    if not (math.isfinite(scale) and 0 < scale <= MAX_SCALE):
        raise LabUsageError(f"--scale {scale}: give Mbit/s per plan Gbit/s, above 0 and at most {MAX_SCALE:g}")


MAX_DEADLINE_S = 3600.0


def check_deadline(seconds: float) -> None:
    if not (math.isfinite(seconds) and 0 <= seconds <= MAX_DEADLINE_S):
        raise LabUsageError(f"--ready-timeout {seconds}: give seconds from 0 to {MAX_DEADLINE_S:g}")


def _require_root() -> None:
    if os.geteuid() != 0:
        raise LabError("the lab creates network namespaces: run it as root (sudo gpunet lab ...)")


def _up(
    plan: Plan, lab_id: str, *, max_nodes: int, scale: float, run: CommandRunner, progress: Progress,
    deadline_s: float, routing: Routing | None, lldp: bool,
) -> LabState:
    sliced = slice_plan(plan, max_nodes)
    digest = plan_digest(sliced)
    current = read_state(lab_id)
    if current is not None and current.status == "up":
        if current.plan_digest != digest:
            raise LabError(f"lab {lab_id} is up with another plan; `gpunet lab down --id {lab_id}` first")
        if routing is not None and current.routing != routing:
            raise LabError(f"lab {lab_id} is up with {current.routing} routing; `gpunet lab down --id {lab_id}` first")
        return lldp_started(current, deadline_s) if lldp else current
    if current is not None:
        _down(lab_id, run)  # a half-built lab from a crash: start clean
    chosen, routing_note = choose_routing(routing)
    with labs_lock():  # a slot no other lab holds, taken by writing the state
        slot = free_slot(lab_id)
        blueprint = build_blueprint(sliced, lab_id, slot, scale, chosen)
        blueprint.notes.append(routing_note if blueprint.frr_confs or chosen == "static" else NO_BGP_NOTE)
        _refuse_foreign(blueprint, run)
        _forget_stale_names(lab_id)
        state = _state(blueprint, slot, digest, scale, "building", lldp=lldp)
        write_state(state)  # before anything exists, so `down` can always find what to remove
    (lab_dir(lab_id) / LAB_PLAN).write_text(blueprint.lab_plan.model_dump_json(indent=1))
    readiness = _create(blueprint, run, progress, deadline_s, lldp)
    state = state.model_copy(update={"status": "up", "readiness": readiness})
    write_state(state)
    return state


def _refuse_foreign(bp: Blueprint, run: CommandRunner) -> None:
    """Never adopt what gpunet did not make: a namespace or link of the same name, or a host
    route for the lab range while no lab is up, stops `up` before anything is recorded."""
    clash = sorted({n.name for n in bp.namespaces} & existing_namespaces())
    clash += [f"link {link}" for link in (bp.host_if, *(v.a_if for v in bp.host_links))
              if run(["ip", "link", "show", link], check=False).returncode == 0]
    if clash:
        raise LabError(f"{', '.join(clash[:5])} already exist and are not this lab's; remove them or use another --id")
    route = run(["ip", "route", "show", "exact", str(LAB_RANGE)], check=False).stdout.strip()
    if route and not slots_held(but=bp.lab_id):
        raise LabError(f"the host already has a route for {LAB_RANGE} ({route}) that no gpunet lab made; "
                       "gpunet will not replace it")


def _forget_stale_names(lab_id: str) -> None:
    """/etc/netns entries of this lab id whose namespace is gone (a reboot wipes /run, not /etc)."""
    live = existing_namespaces()
    for entry in ETC_NETNS.glob(f"gn{lab_id}-*"):
        if entry.name not in live:
            shutil.rmtree(entry, ignore_errors=True)


def _state(bp: Blueprint, slot: int, digest: str, scale: float, status: str, *, lldp: bool) -> LabState:
    return LabState(
        lab_id=bp.lab_id, slot=slot, status=status, plan_digest=digest, block=str(bp.block),
        host_if=bp.host_if, host_address=str(bp.host_address), mgmt_subnet=str(bp.mgmt_subnet),
        namespaces={n.name: n.kind for n in bp.namespaces},
        servers={n.device: n.name for n in bp.namespaces if n.kind == "server"},
        mgmt_addresses=bp.mgmt_addresses, address_map=bp.address_map,
        veths=tuple(bp.veths), notes=(*bp.notes, lldp_note(lldp), COUNTERS_NOTE, NEIGHBOURS_NOTE, CONGESTION_NOTE),
        scale_mbit_per_gbit=scale,
        routes={n.name: tuple(c for c in n.commands if c.startswith("route ")) for n in bp.namespaces},
        addresses={n.name: tuple(c for c in n.commands if c.startswith("addr add ")) for n in bp.namespaces},
        routing=bp.routing, switch_mgmt=bp.switch_mgmt, host_links=tuple(v.a_if for v in bp.host_links),
        lldp=lldp,
    )


NO_BGP_NOTE = ("routing: FRR is installed but no switch runs it: no plane of this plan is routed with eBGP "
               "(InfiniBand planes keep static routes, single-switch planes are bridges)")

NEIGHBOURS_NOTE = (f"while a lab is up the host's neighbour table, which every namespace shares, holds up to "
                   f"{LAB_LIMITS['gc_thresh3']} entries (net.ipv4.neigh.default.gc_thresh3; the last lab down "
                   "puts back the host's own limits)")

CONGESTION_NOTE = ("while a lab is up its servers may set the Plan's TCP congestion control as a node does (the "
                   "host's net.ipv4.tcp_allowed_congestion_control gains it; the last lab down puts back the "
                   "host's list)")


def _create(bp: Blueprint, run: CommandRunner, progress: Progress, deadline_s: float, lldp: bool) -> Readiness:
    """Everything the blueprint names, then the wait until it is ready; how long each took.

    The order is for a routed lab's time: FRR starts once the cables are shaped (a tc change waits
    for the kernel's routing lock, which starting zebras take over and over: shaping a 64-server lab
    took 0.15 s alone and up to 2.8 s beside them) and before sshd and the rest, with the host to
    itself: starting its daemons is most of a routed lab's CPU, and BGP's own timers (a second Idle
    once configured, the update group's coalescing) only begin after it, while sshd, names and
    lldpd are done in those seconds of waiting. (Started in the background beside sshd, the last
    switch got its frr.conf up to 2 s later.)"""
    started = time.monotonic()
    steps: list[tuple[str, Callable[[], None]]] = [
        ("namespaces", lambda: ip_batch(run, (f"netns add {n.name}" for n in bp.namespaces))),
        ("sysctls", lambda: _each(bp, lambda n: set_sysctls(n.name, n.sysctls))),
        ("cables", lambda: ip_batch(run, (_veth_line(v.a_ns, v.a_if, v.b_ns, v.b_if)
                                          for v in (*bp.veths, *bp.mgmt_ports, *bp.host_links)))),
        ("addresses and routes", lambda: _each(bp, lambda n: ip_batch(run, n.commands, n.name))),
        ("proxy ARP", lambda: _proxy_arp_now(bp)),
        ("shaping", lambda: _shape(bp, run)),
        ("FRR", lambda: start_frr(lab_dir(bp.lab_id), bp.frr_confs)),
        ("host route", lambda: _host_side(bp, run)),  # under labs_lock: what the labs share
        ("names", lambda: _names(bp)),
        ("sshd", lambda: _sshd(bp, run)),
        ("lldpd", lambda: start_lab_lldpd(bp.lab_id, {n.name: n.kind for n in bp.namespaces}) if lldp else None),
    ]
    for done, (name, step) in enumerate(steps):
        progress(name, done, len(steps) + 1)
        step()
    built_s = time.monotonic() - started
    progress("waiting until ready", len(steps), len(steps) + 1)
    conditions = _wait_ready(bp, deadline_s, lldp)
    progress("up", len(steps) + 1, len(steps) + 1)
    return Readiness(built_s=round(built_s, 3), ready_s=round(time.monotonic() - started - built_s, 3),
                     conditions=conditions)


def _wait_ready(bp: Blueprint, deadline_s: float, lldp: bool) -> dict[ConditionName, ConditionTiming]:
    """Addresses settled, sshd listening, LLDP heard on every cable end (with lldp) and a
    ping per server and plane answered; a clear error naming what is not, once the deadline passes."""
    servers = {n.device: n.name for n in bp.namespaces if n.kind == "server"}
    view = LabView(
        namespaces=[n.name for n in bp.namespaces], host_if=bp.host_if,
        sshd={node: (ns, bp.mgmt_addresses[node]) for node, ns in servers.items() if node in bp.mgmt_addresses}
        | {ns.device: (ns.name, bp.switch_mgmt[ns.device]) for ns in bp.namespaces
           if ns.kind != "server" and ns.device in bp.switch_mgmt},
        lldp_ports=cabled_ports(bp.veths) if lldp else {},
        pings=[(servers[p.node], p) for p in far_side_pings(bp.lab_plan, list(servers))],
    )
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        lldp_silent = silent_in(bp.lab_id, {n.name: n.kind for n in bp.namespaces}, pool)
        try:
            return wait_ready(_with_bgp(lab_conditions(view, InNamespaces(), pool, lldp_silent), bp, pool), deadline_s)
        except LabNotReady as exc:
            raise LabNotReady(
                f"lab {bp.lab_id} is built but {exc}. It is left as it is (status: building) to look at; "
                f"`gpunet lab down --lab {bp.lab_id}` removes it, `lab up` again rebuilds it", exc.pending) from None


def _with_bgp(conditions: list[Condition], bp: Blueprint, pool: ThreadPoolExecutor) -> list[Condition]:
    """Where switches run FRR: every planned session Established and every leaf's routes over the
    planned ECMP width, before the pings (which only then find every path)."""
    if not bp.frr_confs:
        return conditions
    prefix = f"gn{bp.lab_id}-"
    pending = {ns: ns.removeprefix(prefix) for ns in bp.frr_confs}
    bgp = Condition("bgp", len(pending), lambda: converged_pending(bp.lab_plan, pending, lab_dir(bp.lab_id), pool))
    return [*conditions[:-1], bgp, replace(conditions[-1], needs=("bgp",))]


def _proxy_arp_now(bp: Blueprint) -> None:
    """Routers answer proxy ARP at once, as a switch does (Linux waits up to 0.8 s by default;
    only per-port in a network namespace, so after the cables exist)."""
    ports: dict[str, list[str]] = defaultdict(list)
    for v in bp.veths:
        ports[v.b_ns].append(v.b_if)
        ports[v.a_ns].append(v.a_if)
    at_once = {ns: {f"net.ipv4.neigh.{port}.proxy_delay": "0" for port in ports[ns]} for ns in ports}
    _in_parallel(partial(set_sysctls, ns.name, at_once.get(ns.name, {}))
                 for ns in bp.namespaces if ns.kind == "router")


def _in_parallel(jobs: Iterable[Callable[[], None]]) -> None:
    """Independent per-namespace commands a few at a time: each is mostly a process start and a
    netlink round trip, so a 64-server lab's hundred of them no longer wait on one another; the
    first error is raised."""
    with ThreadPoolExecutor(max_workers=STEP_WORKERS) as pool:
        for _ in pool.map(lambda job: job(), jobs):
            pass


def _each(bp: Blueprint, action: Callable[[Namespace], None]) -> None:
    """`action` in every namespace, a few at a time (each touches its own namespace only)."""
    _in_parallel(partial(action, namespace) for namespace in bp.namespaces)


def _veth_line(a_ns: str, a_if: str, b_ns: str, b_if: str) -> str:
    where_a = f" netns {a_ns}" if a_ns else ""
    return f"link add name {a_if}{where_a} type veth peer name {b_if} netns {b_ns}"


def _shape(bp: Blueprint, run: CommandRunner) -> None:
    per_ns: dict[str, list[str]] = defaultdict(list)
    for v in bp.veths:
        if v.mbit > 0:
            per_ns[v.a_ns].append(tbf_line(v.a_if, v.mbit, v.mtu))
            per_ns[v.b_ns].append(tbf_line(v.b_if, v.mbit, v.mtu))
    _in_parallel(partial(tc_batch, run, lines, ns) for ns, lines in per_ns.items())


def _host_side(bp: Blueprint, run: CommandRunner) -> None:
    """One veth to the management plane, and nothing else of 198.18.0.0/15 reachable (the
    first lab up adds the unreachable route, the last one down removes it); room in the host's
    neighbour table for every lab's entries (lab/neighbours.py); the Plan's TCP congestion control
    allowed in the servers' namespaces (lab/congestion.py)."""
    lines = [f"addr add {bp.host_address} dev {bp.host_if}", f"link set dev {bp.host_if} up"]
    for link, address in bp.host_link_addresses.items():  # its ports on the switches' management plane
        lines += [f"addr add {address} dev {link}", f"link set dev {link} up"]
    with labs_lock():
        if not run(["ip", "route", "show", "exact", str(LAB_RANGE)], check=False).stdout.strip():
            lines.append(f"route add unreachable {LAB_RANGE}")
        ip_batch(run, lines)
        raise_limits(labs_root())
        congestion.permit(labs_root(), {tcp_congestion(p).value for p in bp.lab_plan.planes})
    # Servers route out via the host's veth (their gateway): the host forwards none of it.
    for link in (bp.host_if, *bp.host_link_addresses):
        run(["sysctl", "-q", "-w", f"net.ipv4.conf.{link}.forwarding=0", f"net.ipv6.conf.{link}.disable_ipv6=1"],
            check=False)


def _names(bp: Blueprint) -> None:
    """Hostname per server (a persistent UTS namespace) and /etc/hosts (via /etc/netns)."""
    uts = lab_dir(bp.lab_id) / "uts"
    uts.mkdir(exist_ok=True)

    def name(ns: Namespace) -> None:
        (uts / ns.name).touch()
        pin_hostname(uts / ns.name, ns.device)
        (ETC_NETNS / ns.name).mkdir(parents=True, exist_ok=True)
        (ETC_NETNS / ns.name / "hosts").write_text(bp.hosts_file)

    _in_parallel(partial(name, ns) for ns in bp.namespaces if ns.kind == "server")


def _sshd(bp: Blueprint, run: CommandRunner) -> None:
    write_ssh_files(lab_dir(bp.lab_id), run)
    _in_parallel(partial(start_sshd, lab_dir(bp.lab_id), ns.device, bp.mgmt_addresses[ns.device],
                         etc=ETC_NETNS / ns.name, prefix=node_argv_for(bp.lab_id, ns.name, []), run=run)
                 for ns in bp.namespaces if ns.kind == "server" and ns.device in bp.mgmt_addresses)
    # the switches' too, at their management address, as a switch OS runs one on its eth0
    _in_parallel(partial(start_sshd, lab_dir(bp.lab_id), ns.device, bp.switch_mgmt[ns.device],
                         etc=ETC_NETNS / ns.name, prefix=["ip", "netns", "exec", ns.name], run=run, own_tree=False)
                 for ns in bp.namespaces if ns.kind != "server" and ns.device in bp.switch_mgmt)


def lab_exec(lab_id: str, node: str, command: Sequence[str], run: CommandRunner = run_local,
             timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return run(node_argv(lab_id, node, command), check=False, timeout=timeout)


def _require(lab_id: str) -> LabState:
    state = read_state(lab_id)
    if state is None:
        raise LabUsageError(f"no lab {lab_id!r}; `gpunet lab up` builds one")
    return state


def lab_status(lab_id: str | None = None) -> list[LabState]:
    if lab_id is None:
        return all_states()
    return [_require(lab_id)]


def lab_down(lab_id: str, run: CommandRunner = run_local) -> list[str]:
    """Remove everything the state file names; safe to repeat and after a crash. Returns the
    namespaces removed."""
    check_id(lab_id)
    _require_root()
    with lab_lock(lab_id):
        return _down(lab_id, run)


def _down(lab_id: str, run: CommandRunner) -> list[str]:
    state = read_state(lab_id)
    if state is None:
        return []
    names = set(state.namespaces)
    routers = kill_frr(lab_dir(lab_id), names)  # by its pid files
    # sshd, lldpd and anything `lab exec` left running, while the routers' daemons wind down
    kill_pids([p for p in pids_in_namespaces(names) if p not in set(routers)], names)
    await_frr(routers, names)
    present = sorted(names & existing_namespaces())
    ip_batch(run, (f"netns del {n}" for n in present), force=True)
    ip_batch(run, [f"link del {link}" for link in (state.host_if, *state.host_links)], force=True)
    _remove_names(state, run)
    left = sorted(names & existing_namespaces())
    left += [f"link {link}" for link in (state.host_if, *state.host_links)
             if run(["ip", "link", "show", link], check=False).returncode == 0]
    if left:  # keep the state file: a later `down` must still know what to remove
        raise LabError(f"lab {lab_id}: could not remove {', '.join(left[:5])}; the state is kept, retry `lab down`")
    with labs_lock():  # its slot freed and, if it was the last lab, what the labs share removed, at once
        if not slots_held(but=lab_id):
            ip_batch(run, [f"route del unreachable {LAB_RANGE}"], force=True)
            restore_limits(labs_root())
            congestion.restore(labs_root())
        shutil.rmtree(lab_dir(lab_id), ignore_errors=True)
    return present


def _remove_names(state: LabState, run: CommandRunner) -> None:
    uts = lab_dir(state.lab_id) / "uts"
    for ns in state.namespaces:
        if (uts / ns).exists():
            unmount(uts / ns)
        shutil.rmtree(ETC_NETNS / ns, ignore_errors=True)
