"""fleet capture's bounds and the flow between two nodes from the Plan (the capture itself runs in
tests/fleet/test_fleet_lab.py)."""

from __future__ import annotations

import pytest
from ClusterShell.NodeSet import NodeSet

from gpunet.errors import UsageError
from gpunet.fleet.capture import capture_plan, check_capture
from tests.render.rendered import example_plan


@pytest.mark.parametrize(("count", "seconds", "why"), [
    (None, None, "unbounded"), (0, None, "--count"), (None, 0.0, "--duration"), (None, float("inf"), "--duration"),
    (None, 3601.0, "--duration"), (10**9, 5.0, "--count")])
def test_an_unbounded_or_absurd_capture_is_refused(count: int | None, seconds: float | None, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        check_capture(count, seconds, 600, ["eth0"], "")


def test_a_count_alone_still_ends_at_the_time_limit() -> None:
    assert check_capture(100, None, 600, ["eth0"], "") == 600
    assert check_capture(None, 2.5, 600, ["eth0"], "") == 2.5


@pytest.mark.parametrize(("interfaces", "bpf"), [([], ""), (["eth0;reboot"], ""), (["eth0"], "tcp\nport 22")])
def test_interfaces_and_filters_are_plain(interfaces: list[str], bpf: str) -> None:
    with pytest.raises(UsageError):
        check_capture(10, None, 600, interfaces, bpf)


def test_the_flow_between_two_nodes_comes_from_the_plan() -> None:
    plan = example_plan("small-ethernet")
    interfaces, bpf, seconds = capture_plan(NodeSet("node[01-02]"), plan, iface=[], plane="storage",
                                            between="node01,node02", bpf="tcp", count=100, duration=None, limit=30)
    first, second = ([i for i in n.interfaces if i.plane == "storage" and i.address]
                     for n in plan.nodes if n.name in ("node01", "node02"))
    assert interfaces == {"node01": [first[0].layer3], "node02": [second[0].layer3]} and seconds == 30
    a, b = first[0].address.split("/")[0], second[0].address.split("/")[0]  # type: ignore[union-attr]
    assert bpf == f"((host {a}) and (host {b})) and (tcp)"


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"between": "node01,node02", "plane": None}, "--between needs --plane"),
    ({"between": "node01,nobody", "plane": "storage"}, "not a node"),
    ({"between": None, "plane": "nosuchplane"}, "no addressed interface")])
def test_a_flow_or_plane_the_plan_cannot_answer_is_bad_input(kwargs: dict[str, str | None], why: str) -> None:
    with pytest.raises(UsageError, match=why):
        capture_plan(NodeSet("node[01-02]"), example_plan("small-ethernet"), iface=[], bpf="", count=1,
                     duration=None, limit=10, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("bpf", ["-w/etc/cron.d/x", " -Z nobody", "-zsh"])
def test_a_filter_that_reads_as_a_tcpdump_option_is_refused(bpf: str) -> None:
    with pytest.raises(UsageError, match="not a tcpdump option"):
        check_capture(100, None, 600, ["eth0"], bpf)
