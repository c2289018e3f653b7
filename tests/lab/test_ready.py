"""When `lab up` calls a lab ready, from fake observations (pure: no namespaces are built): the
waiting loop, what each observation's output means, which pings stand for "routing converged",
and what `lab up` prints and records about it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpunet.cli.lab import readiness_line
from gpunet.cli.main import app
from gpunet.lab.blueprint import build_blueprint
from gpunet.lab.build import _state
from gpunet.lab.ready import (
    POLL_S,
    Condition,
    ConditionTiming,
    LabNotReady,
    LabView,
    Ping,
    Readiness,
    far_side_pings,
    lab_conditions,
    sshd_listens,
    wait_ready,
)
from gpunet.lab.state import read_state, write_state
from tests.lab.helpers import small_plan

runner = CliRunner()


class FakeClock:
    """Time that moves only when the loop sleeps or an observation takes time."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def settles_after(clock: FakeClock, seconds: float, name: str = "x") -> Callable[[], list[str]]:
    """An observation that names `name` as pending until `seconds` after the clock's start."""
    start = clock.now
    return lambda: [name] if clock.now - start < seconds else []


def counting(results: Sequence[list[str]]) -> tuple[Callable[[], list[str]], list[int]]:
    calls = [0]

    def look() -> list[str]:
        calls[0] += 1
        return results[min(calls[0], len(results)) - 1]
    return look, calls


# --- the waiting loop ------------------------------------------------------------------------------

def test_each_condition_is_timed_when_first_seen_holding() -> None:
    clock = FakeClock()
    timings = wait_ready([
        Condition("addresses", 25, lambda: []),
        Condition("lldp", 48, settles_after(clock, 1.0, "gnab-gpu1:ib0")),
        Condition("routes", 29, settles_after(clock, 0.5, "gpu1->gpu5")),
    ], deadline_s=60, clock=clock, sleep=clock.sleep)
    assert timings == {"addresses": ConditionTiming(ready_s=0, checked=25),
                       "lldp": ConditionTiming(ready_s=1.0, checked=48),
                       "routes": ConditionTiming(ready_s=0.5, checked=29)}
    assert clock.sleeps == [POLL_S] * 4  # polled until the slowest held, no longer


def test_a_condition_that_held_is_not_looked_at_again() -> None:
    clock = FakeClock()
    quick, quick_calls = counting([[]])
    slow, slow_calls = counting([["a"], ["a"], ["a"], []])
    wait_ready([Condition("sshd", 8, quick), Condition("routes", 4, slow)], 60, clock=clock, sleep=clock.sleep)
    assert (quick_calls[0], slow_calls[0]) == (1, 4)


def test_the_deadline_names_every_condition_still_pending_and_what_of_it() -> None:
    clock = FakeClock()
    silent = [f"gnab-gpu{i}:ib0" for i in range(1, 6)]
    with pytest.raises(LabNotReady) as caught:
        wait_ready([
            Condition("addresses", 25, lambda: []),
            Condition("lldp", 48, lambda: silent),
            Condition("sshd", 8, lambda: ["gpu3 (198.18.0.4:22)"]),
        ], deadline_s=2, clock=clock, sleep=clock.sleep)
    message = str(caught.value)
    assert message.startswith("not ready after 2 s: ")
    assert "lldp: 5 of 48 not ready (gnab-gpu1:ib0, gnab-gpu2:ib0, gnab-gpu3:ib0, 2 more)" in message
    assert "sshd: 1 of 8 not ready (gpu3 (198.18.0.4:22))" in message
    assert "addresses" not in message  # it held
    assert caught.value.pending == {"lldp": silent, "sshd": ["gpu3 (198.18.0.4:22)"]}
    assert 2 <= clock.now - 100 < 2 + 2 * POLL_S  # gave up at the deadline, not long after


def test_a_ready_lab_is_never_refused_even_with_no_time_to_wait() -> None:
    clock = FakeClock()
    assert wait_ready([Condition("sshd", 8, lambda: [])], deadline_s=0, clock=clock, sleep=clock.sleep) == {
        "sshd": ConditionTiming(ready_s=0, checked=8)}
    with pytest.raises(LabNotReady, match="not ready after 0 s: sshd: 1 of 8"):
        wait_ready([Condition("sshd", 8, lambda: ["gpu1 (x)"])], deadline_s=0, clock=clock, sleep=clock.sleep)


def test_a_condition_is_looked_at_in_the_round_its_needs_are_first_seen_holding() -> None:
    clock = FakeClock()
    bgp, bgp_calls = counting([["leaf1: 198.18.2.1 Active"], ["leaf1: 198.18.2.1 Active"], []])
    routes, routes_calls = counting([["gpu1->gpu5"], []])
    timings = wait_ready([Condition("bgp", 4, bgp), Condition("routes", 8, routes, needs=("bgp",))], 60,
                         clock=clock, sleep=clock.sleep)
    assert bgp_calls[0] == 3 and routes_calls[0] == 2  # routes first asked in the round BGP held
    assert timings == {"bgp": ConditionTiming(ready_s=2 * POLL_S, checked=4),
                       "routes": ConditionTiming(ready_s=3 * POLL_S, checked=8)}


def test_a_condition_waits_while_what_it_needs_is_pending_and_says_so() -> None:
    clock = FakeClock()
    routes, routes_calls = counting([[]])
    with pytest.raises(LabNotReady) as caught:
        wait_ready([Condition("routes", 8, routes, needs=("bgp",)), Condition("bgp", 4, lambda: ["leaf1: down"])],
                   1, clock=clock, sleep=clock.sleep)
    assert routes_calls[0] == 0
    assert caught.value.pending["routes"] == ["waiting for bgp"]


def test_time_spent_observing_counts_against_the_deadline() -> None:
    """A slow observation (commands on a loaded host) cannot stretch the wait past its deadline."""
    clock = FakeClock()

    def slow_look() -> list[str]:
        clock.now += 3
        return ["still"]
    with pytest.raises(LabNotReady):
        wait_ready([Condition("routes", 1, slow_look)], deadline_s=5, clock=clock, sleep=clock.sleep)
    assert clock.now - 100 <= 6 + POLL_S


# --- what the observations mean --------------------------------------------------------------------

def test_sshd_listens_on_port_22_at_the_management_address_or_every_address() -> None:
    assert sshd_listens({("198.18.64.2", 22), ("127.0.0.1", 631)}, "198.18.64.2")
    assert not sshd_listens({("198.18.64.2", 22)}, "198.18.64.3")  # another server's address
    assert not sshd_listens({("198.18.64.2", 2222)}, "198.18.64.2")
    assert not sshd_listens(set(), "198.18.64.2")  # not started yet
    assert sshd_listens({("0.0.0.0", 22)}, "198.18.64.2") and sshd_listens({("::", 22)}, "198.18.64.2")


# --- which pings stand for "routing converged" -----------------------------------------------------

def test_each_server_pings_half_the_plane_away_from_the_address_doctor_probes_from() -> None:
    plan = small_plan()
    servers = [n.name for n in plan.nodes]
    pings = far_side_pings(plan, servers)
    planes = {i.plane for n in plan.nodes for i in n.interfaces if i.address and i.plane != "oob"}
    for plane in planes:
        on_plane = [p for p in pings if p.plane == plane and p.peer != "gateway"]
        assert sorted(p.node for p in on_plane) == sorted(servers)  # one echo per server and plane
        assert all(p.peer != p.node for p in on_plane)
    first = next(p for p in pings if p.node == "gpu1" and p.plane == "compute")
    assert first.peer == "gpu5"  # 8 servers: 4 away, under the other leaf in the small lab
    node = plan.node("gpu1")
    assert node is not None
    assert first.source == str(next(i.address for i in node.interfaces if i.plane == "compute")).split("/")[0]


def test_the_management_gateway_is_pinged_from_every_server_when_the_plan_has_one() -> None:
    plan = small_plan()
    gateway = next(p.gateway for p in plan.planes if p.name == "management")
    to_gateway = [p for p in far_side_pings(plan, [n.name for n in plan.nodes]) if p.peer == "gateway"]
    if gateway:
        assert {p.target for p in to_gateway} == {gateway} and len(to_gateway) == len(plan.nodes)
    else:
        assert to_gateway == []


def test_pings_stay_among_the_servers_named() -> None:
    plan = small_plan()
    pings = far_side_pings(plan, ["gpu1", "gpu2"])
    assert {(p.node, p.peer) for p in pings if p.peer != "gateway"} == {("gpu1", "gpu2"), ("gpu2", "gpu1")}
    assert far_side_pings(plan, ["gpu1"]) == [p for p in far_side_pings(plan, ["gpu1"]) if p.peer == "gateway"]


# --- a lab's conditions through a fake runner ------------------------------------------------------

class FakeLab:
    """Answers the three looks as a lab that settles over a few looks would."""

    def __init__(self, looks_until_ready: int) -> None:
        self.looks_until_ready = looks_until_ready
        self.looked: list[tuple[str, str | None, str | None]] = []

    def _settled(self, kind: str, namespace: str | None, detail: str | None = None) -> bool:
        self.looked.append((kind, namespace, detail))
        return sum(1 for k, n, _ in self.looked if (k, n) == (kind, namespace)) > self.looks_until_ready

    def unsettled(self, namespace: str | None, only: str | None = None) -> list[str]:
        return [] if self._settled("addresses", namespace, only) else ["eth0 fe80::1/64 tentative"]

    def listening(self, namespace: str) -> set[tuple[str, int]]:
        return {("198.18.64.2", 22)} if self._settled("sshd", namespace) else set()

    def answered(self, namespace: str, ping: Ping) -> bool:
        return self._settled("routes", namespace, f"{ping.source}->{ping.target}")


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=4) as executor:
        yield executor


def view(lldp: dict[str, set[str]] | None = None) -> LabView:
    ping = Ping("gpu1", "compute", "198.18.65.1", "198.18.65.5", "gpu5")
    return LabView(namespaces=["gnab-gpu1", "gnab-leaf1"], host_if="gnabh",
                   sshd={"gpu1": ("gnab-gpu1", "198.18.64.2")}, lldp_ports=lldp or {}, pings=[("gnab-gpu1", ping)])


def test_a_settling_lab_becomes_ready_and_each_condition_counts_what_it_looked_at(pool: ThreadPoolExecutor) -> None:
    lab = FakeLab(looks_until_ready=2)
    clock = FakeClock()
    timings = wait_ready(lab_conditions(view(), lab, pool, None), 60, clock=clock, sleep=clock.sleep)
    assert {name: t.checked for name, t in timings.items()} == {"addresses": 3, "sshd": 1, "routes": 1}
    assert all(t.ready_s == 2 * POLL_S for t in timings.values())
    assert ("routes", "gnab-gpu1", "198.18.65.1->198.18.65.5") in lab.looked  # from the server's namespace
    assert ("addresses", None, "gnabh") in lab.looked  # the host's side of the lab too


def test_a_lab_that_never_settles_is_named_by_what_is_missing(pool: ThreadPoolExecutor) -> None:
    clock = FakeClock()
    with pytest.raises(LabNotReady) as caught:
        wait_ready(lab_conditions(view(), FakeLab(looks_until_ready=10**6), pool, None), 1, clock=clock,
                   sleep=clock.sleep)
    assert caught.value.pending == {
        "addresses": ["gnab-gpu1 eth0 fe80::1/64 tentative", "gnab-leaf1 eth0 fe80::1/64 tentative",
                      "host eth0 fe80::1/64 tentative"],
        "sshd": ["gpu1 (198.18.64.2:22)"],
        "routes": ["gpu1->gpu5 on compute (198.18.65.1->198.18.65.5)"]}


def test_lldp_is_a_condition_only_where_lldpd_runs_and_asks_only_about_silent_ports(pool: ThreadPoolExecutor
                                                                                     ) -> None:
    asked: list[dict[str, set[str]]] = []
    answers = [["gnab-gpu1:ib0", "gnab-leaf1:p1"], ["gnab-leaf1:p1"], []]

    def silent(ports: Mapping[str, set[str]]) -> list[str]:
        asked.append({ns: set(i) for ns, i in ports.items()})
        return answers[len(asked) - 1]
    ports = {"gnab-gpu1": {"ib0", "ib1"}, "gnab-leaf1": {"p1", "p2"}}
    clock = FakeClock()
    conditions = lab_conditions(view(ports), FakeLab(0), pool, silent)
    timings = wait_ready(conditions, 60, clock=clock, sleep=clock.sleep)
    assert timings["lldp"] == ConditionTiming(ready_s=2 * POLL_S, checked=4)
    assert asked == [ports, {"gnab-gpu1": {"ib0"}, "gnab-leaf1": {"p1"}}, {"gnab-leaf1": {"p1"}}]
    assert "lldp" not in {c.name for c in lab_conditions(view(ports), FakeLab(0), pool, None)}


# --- what lab up records and prints ---------------------------------------------------------------

READINESS = Readiness(built_s=1.234, ready_s=2.5, conditions={
    "addresses": ConditionTiming(ready_s=0.1, checked=25), "sshd": ConditionTiming(ready_s=0.1, checked=8),
    "lldp": ConditionTiming(ready_s=2.5, checked=500), "routes": ConditionTiming(ready_s=0.4, checked=29)})


def test_the_timing_line_says_how_long_readiness_took_and_per_condition() -> None:
    assert readiness_line(READINESS) == (
        "ready 2.50 s after building (1.23 s): addresses 0.10 s (25 namespaces), sshd 0.10 s (8 servers and switches), "
        "lldp 2.50 s (500 ports), routes 0.40 s (29 pings)")


def test_readiness_is_kept_in_the_state_and_shown_by_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUNET_LAB_ROOT", str(tmp_path))
    state = _state(build_blueprint(small_plan(), "q", 0), 0, "digest", 1.0, "up", lldp=True)
    write_state(state.model_copy(update={"readiness": READINESS}))
    read = read_state("q")
    assert read is not None and read.readiness == READINESS
    shown = runner.invoke(app, ["lab", "status", "--lab", "q", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["readiness"]["ready_s"] == 2.5  # --lab: the one object
    assert json.loads(shown.stdout)["readiness"]["conditions"]["lldp"] == {"ready_s": 2.5, "checked": 500}
    old_spelling = subprocess.run([sys.executable, "-m", "gpunet", "lab", "status", "--id", "q", "--json"],
                                  capture_output=True, text=True, check=False, timeout=60)
    assert json.loads(old_spelling.stdout)["lab_id"] == "q"  # --id (deprecated) too: the one object
    human = runner.invoke(app, ["lab", "status", "--lab", "q"], terminal_width=300)
    assert "ready 2.50 s after building (1.23 s): addresses 0.10 s" in human.stdout


def test_a_state_written_before_readiness_was_recorded_still_reads(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUNET_LAB_ROOT", str(tmp_path))
    write_state(_state(build_blueprint(small_plan(), "q", 0), 0, "digest", 1.0, "up", lldp=False))
    path = tmp_path / "q" / "state.json"
    body = json.loads(path.read_text())
    body.pop("readiness", None)
    path.write_text(json.dumps(body))
    read = read_state("q")
    assert read is not None and read.readiness is None


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "3601"])
def test_a_ready_timeout_out_of_range_is_bad_input(value: str) -> None:
    result = runner.invoke(app, ["lab", "up", "--lab", "q", "--ready-timeout", value])
    assert result.exit_code == 2 and "--ready-timeout" in result.output, result.output


def test_lab_up_has_no_default_lab_id() -> None:
    """No silent shared lab: every lab command names its lab (README, Options)."""
    for command in (["lab", "up"], ["lab", "down"], ["lab", "heal"]):
        result = runner.invoke(app, [*command, "--json"])
        assert result.exit_code == 2 and "Missing option '--lab'" in result.output, result.output


def test_a_lab_not_ready_by_the_deadline_exits_3_naming_what(monkeypatch: pytest.MonkeyPatch) -> None:
    """Could not judge (exit 3), not bad input: the lab is built, something in it did not settle."""
    def not_ready(*args: object, **kwargs: object) -> None:
        raise LabNotReady("lab q is built but not ready after 60 s: lldp: 2 of 48 not ready (gnq-gpu1:ib0, "
                          "gnq-gpu2:ib0)", {"lldp": ["gnq-gpu1:ib0", "gnq-gpu2:ib0"]})
    monkeypatch.setattr("gpunet.api.lab.build.lab_up", not_ready)
    result = runner.invoke(app, ["lab", "up", "--lab", "q", "--json"])
    assert result.exit_code == 3
    assert "not ready after 60 s: lldp: 2 of 48 not ready (gnq-gpu1:ib0" in json.loads(result.stdout)["problems"][0][
        "message"]
