"""FRR in the lab without root: which daemons a rendered frr.conf needs, which routing a lab gets,
and when a switch counts as converged, judged on FRR 8.4's own recorded outputs."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpunet.design import design
from gpunet.errors import LabUsageError
from gpunet.lab import frr
from gpunet.lab.frr import choose_routing, daemons_for, frr_order, unconverged, vtysh_argv
from gpunet.model.switching import sessions
from gpunet.probe.frr import parse_frr_route_json
from gpunet.render.switch.frr import render_frr
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from tests.checks.frr_record import plan as recorded_plan

RECORDED = Path(__file__).parent.parent / "fixtures" / "switch_check" / "lab-frr-8.4.4-two-leaves-two-spines"


def recorded(switch: str, name: str) -> str:
    return (RECORDED / switch / name).read_text()


def widths(route_json: str) -> Callable[[], dict[str, int]]:
    """The switch's table as the lab reads it (prefix -> next hops forwarded by), from the FIB next
    hops of zebra's selected routes: what zebra installs in the kernel."""
    return lambda: {r.prefix: r.width for r in parse_frr_route_json(route_json) if r.selected}


def test_a_leaf_needs_staticd_for_its_host_routes_and_a_spine_does_not() -> None:
    plan = recorded_plan()
    leaf, spine = plan.switches_by_name["comp-leaf001"], plan.switches_by_name["comp-spine001"]
    assert daemons_for(render_frr(plan, leaf)) == ["zebra", "staticd", "bgpd"]
    assert daemons_for(render_frr(plan, spine)) == ["zebra", "bgpd"]
    assert daemons_for("router bgp 65000\n neighbor FABRIC bfd\n") == ["zebra", "bfdd", "bgpd"]


def test_frr_is_the_default_where_installed_and_static_is_said_with_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frr, "frr_missing", lambda: None)
    assert choose_routing(None)[0] == "frr" and choose_routing("static")[0] == "static"
    monkeypatch.setattr(frr, "frr_missing", lambda: "/usr/lib/frr/bgpd not installed (Debian package frr)")
    routing, note = choose_routing(None)
    assert routing == "static" and "bgpd not installed" in note
    with pytest.raises(LabUsageError, match="--routing frr: /usr/lib/frr/bgpd not installed"):
        choose_routing("frr")


def test_vtysh_reaches_the_switchs_own_sockets_under_the_lab_directory() -> None:
    argv = vtysh_argv(Path("/run/gpunet/labs/ab"), "gnab-leaf1", "-c", "show bgp summary json")
    assert argv == ["vtysh", "--vty_socket", "/run/gpunet/labs/ab/frr/gnab-leaf1", "-c", "show bgp summary json"]


@pytest.mark.parametrize("switch", ["comp-spine001", "comp-spine002"])
def test_a_converged_spine_leaves_nothing_pending(switch: str) -> None:
    plan = recorded_plan()
    bgp, routes = recorded(switch, "show_bgp_summary_json.txt"), recorded(switch, "show_ip_route_json.txt")
    assert unconverged(plan, plan.switches_by_name[switch], bgp, widths(routes)) == []


def test_a_leaf_without_its_own_host_routes_is_pending() -> None:
    """The recording's daemons read frr.conf themselves, and staticd stopped at the `exit` after
    `router bgp`: its leaves hold no route to their own hosts (why the lab loads frr.conf through
    vtysh). Converged means those routes too."""
    plan = recorded_plan()
    leaf = plan.switches_by_name["comp-leaf001"]
    pending = unconverged(plan, leaf, recorded(leaf.name, "show_bgp_summary_json.txt"),
                          widths(recorded(leaf.name, "show_ip_route_json.txt")))
    assert pending and all(p.startswith("comp-leaf001: no route to its host 198.19.0.") for p in pending)


def test_a_session_not_established_is_pending_by_its_peer() -> None:
    plan = recorded_plan()
    data = json.loads(recorded("comp-leaf001", "show_bgp_summary_json.txt"))
    peer = next(iter(data["ipv4Unicast"]["peers"]))
    data["ipv4Unicast"]["peers"][peer]["state"] = "Active"
    pending = unconverged(plan, plan.switches_by_name["comp-leaf001"], json.dumps(data), widths("{}"))
    assert len(pending) == 1 and peer in pending[0] and "Active" in pending[0]


def test_a_prefix_short_of_next_hops_is_pending_by_its_leaf() -> None:
    plan = recorded_plan()
    routes = json.loads(recorded("comp-leaf001", "show_ip_route_json.txt"))
    remote = plan.switches_by_name["comp-leaf002"]
    routes[f"{remote.loopback}/32"][0]["nexthops"] = routes[f"{remote.loopback}/32"][0]["nexthops"][:1]
    pending = unconverged(plan, plan.switches_by_name["comp-leaf001"],
                          recorded("comp-leaf001", "show_bgp_summary_json.txt"), widths(json.dumps(routes)))
    narrow = [p for p in pending if "routes to" in p]
    assert narrow == ["comp-leaf001: routes to comp-leaf002 1 of 5 prefixes under 4 next hops"]


def test_unreadable_output_is_pending_not_converged() -> None:
    plan = recorded_plan()
    assert unconverged(plan, plan.switches_by_name["comp-leaf001"], "", widths("")) == [
        "comp-leaf001: bgp summary not readable yet"]
    bgp = recorded("comp-leaf001", "show_bgp_summary_json.txt")
    assert unconverged(plan, plan.switches_by_name["comp-leaf001"], bgp, widths("")) == [
        "comp-leaf001: routes not readable yet (show ip route json: line 1: not JSON: Expecting value)"]


def test_pending_is_one_entry_per_switch_and_converged_switches_are_not_asked_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What `lab up` names at its deadline: per switch not converged, the sessions that keep it."""
    plan = recorded_plan()
    down = json.loads(recorded("comp-spine001", "show_bgp_summary_json.txt"))
    for peer in down["ipv4Unicast"]["peers"].values():
        peer["state"] = "Connect"
    summaries = {"comp-spine001": json.dumps(down),
                 "comp-spine002": recorded("comp-spine002", "show_bgp_summary_json.txt")}

    def vty_show(lab_dir: Path, ns: str, daemon: str, command: str) -> str:
        del lab_dir
        assert (daemon, command) == ("bgpd", "show bgp summary json")
        return summaries[ns.removeprefix("gnt-")]

    monkeypatch.setattr(frr, "vty_show", vty_show)
    monkeypatch.setattr(frr, "route_widths", lambda ns: widths(recorded(ns.removeprefix("gnt-"),
                                                                        "show_ip_route_json.txt"))())
    switches = {"gnt-comp-spine001": "comp-spine001", "gnt-comp-spine002": "comp-spine002"}
    with ThreadPoolExecutor(max_workers=2) as pool:
        pending = frr.converged_pending(plan, switches, Path("/nowhere"), pool)
    assert len(pending) == 1 and pending[0].startswith("comp-spine001: ") and pending[0].count("Connect") == len(
        sessions(plan, plan.switches_by_name["comp-spine001"]))
    assert switches == {"gnt-comp-spine001": "comp-spine001"}  # spine002 converged: not looked at again


class _Daemon:
    """A unix socket answering one vty command as an FRR 8.4 daemon does (seen on a lab switch:
    the output, three NULs, a status byte; `% [ZEBRA] Unknown command: ...` with status 2)."""

    def __init__(self, path: Path, answer: bytes) -> None:
        self.asked = b""
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(1)
        self.thread = threading.Thread(target=self._answer, args=(answer,), daemon=True)
        self.thread.start()

    def _answer(self, answer: bytes) -> None:
        client, _ = self.server.accept()
        with client, contextlib.suppress(OSError):  # a reader that stops past its bound closes on us
            while not self.asked.endswith(b"\0"):
                self.asked += client.recv(4096)
            client.sendall(answer)

    def close(self) -> None:
        self.thread.join(timeout=10)
        self.server.close()


@pytest.fixture
def switch_sockets() -> Iterator[Path]:
    """A lab directory short enough for unix socket paths (108 bytes), removed after."""
    where = Path(tempfile.mkdtemp(prefix="gnvty", dir="/tmp"))
    (where / "frr" / "gnt-leaf1").mkdir(parents=True)
    yield where
    shutil.rmtree(where)


@pytest.mark.parametrize(("answer", "read"), [
    (b'{"ipv4Unicast":{}}\n' + b"\0\0\0\0", '{"ipv4Unicast":{}}\n'),
    (b"% [ZEBRA] Unknown command: show nonsense\n\0\0\0\x02", ""),  # refused: no output to parse
    (b'{"ipv4Unicast":', ""),  # closed before the terminator
    (b"x" * (frr.VTY_MAX_BYTES + 10), ""),  # past the bound
])
def test_a_show_command_goes_over_the_daemons_vty_socket(switch_sockets: Path, answer: bytes, read: str) -> None:
    daemon = _Daemon(switch_sockets / "frr" / "gnt-leaf1" / "bgpd.vty", answer)
    try:
        assert frr.vty_show(switch_sockets, "gnt-leaf1", "bgpd", "show bgp summary json") == read
        assert daemon.asked == b"show bgp summary json\0"  # the command as vtysh sends it
    finally:
        daemon.close()


def test_a_daemon_not_there_yet_is_no_answer(switch_sockets: Path) -> None:
    assert frr.vty_show(switch_sockets, "gnt-leaf1", "zebra", "show ip route json") == ""


@pytest.mark.parametrize("example", ["small-ethernet", "multi-unit-large"])
def test_routers_start_upper_tiers_first_and_each_planes_first_leaf_early(example: str) -> None:
    """frr_order: cores, then spines, then leaves; within a tier the planes take turns (the n-th
    switch of every plane before any plane's n+1-th), each plane's own order kept."""
    spec, _ = parse_spec(example_text(example))
    switches = design(spec).switches
    ordered = frr_order(switches)
    assert sorted(s.name for s in ordered) == sorted(s.name for s in switches)
    tiers = [frr.TIER_ORDER.index(s.tier) for s in ordered]
    assert tiers == sorted(tiers) and len(set(tiers)) == len({s.tier for s in switches})
    rank: dict[str, int] = {}
    for group in {(s.plane, s.tier) for s in switches}:
        members = [s.name for s in switches if (s.plane, s.tier) == group]
        assert [s.name for s in ordered if (s.plane, s.tier) == group] == members
        rank |= {name: i for i, name in enumerate(members)}
    for tier in {s.tier for s in switches}:
        ranks = [rank[s.name] for s in ordered if s.tier == tier]
        assert ranks == sorted(ranks), f"{tier}: a plane's next switch before another plane's current one"
