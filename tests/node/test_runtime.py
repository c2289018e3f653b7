"""The lab's stand-in for `netplan apply` (gpunet.node.runtime): the `ip -batch` lines it writes for
links, the main and per-NIC tables' routes and the policy rules, every word checked first; the
snapshot it takes from `ip -j` output and puts back on revert; and, as root, the whole round trip
in a network namespace of the test's own."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpunet.node import runtime
from gpunet.node.contract import IpState, Rule
from gpunet.node.files import Refused

# `ip -j` output of a namespace with a per-NIC table (as netplan's routing-policy sets one), a rule
# with a selector the stand-in does not own (fwmark), a blackhole and the kernel's own routes.
ADDR = [{"ifname": "lo", "mtu": 65536, "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
        {"ifname": "ib0", "mtu": 4092, "addr_info": [{"family": "inet", "local": "198.18.2.1", "prefixlen": 24}]}]
ROUTES = [
    {"dst": "198.18.2.0/24", "dev": "ib0", "table": "100", "scope": "link", "prefsrc": "198.18.2.1", "flags": []},
    {"type": "blackhole", "dst": "198.18.252.0/24", "table": "100", "flags": []},
    {"dst": "198.18.2.0/24", "dev": "ib0", "table": "101", "protocol": "static", "scope": "link",
     "prefsrc": "198.18.2.1", "metric": 5, "flags": []},
    {"dst": "default", "gateway": "198.18.0.1", "dev": "eno1", "flags": []},
    {"dst": "198.18.2.0/24", "dev": "ib0", "protocol": "kernel", "scope": "link", "prefsrc": "198.18.2.1", "flags": []},
    {"type": "local", "dst": "198.18.2.1", "dev": "ib0", "table": "local", "protocol": "kernel", "scope": "host",
     "prefsrc": "198.18.2.1", "flags": []},
]
RULES = [{"priority": 0, "src": "all", "table": "local"},
         {"priority": 499, "src": "all", "fwmark": "0x3", "table": "102"},
         {"priority": 500, "src": "198.18.2.0", "srclen": 28, "dst": "198.18.3.0", "dstlen": 24, "table": "101"},
         {"priority": 32765, "src": "198.18.2.1", "table": "100"},
         {"priority": 32766, "src": "all", "table": "main"},
         {"priority": 32767, "src": "all", "table": "default"}]


def test_a_snapshot_keeps_the_routes_of_every_table_and_the_rules_apply_owns() -> None:
    state = runtime.state_of(ADDR, ROUTES, RULES, {"ib0"})
    assert state["links"] == {"ib0": {"mtu": 4092, "addresses": ["198.18.2.1/24"]}}
    assert [(r["to"], r["table"], r["type"]) for r in state["routes"]] == [
        ("198.18.2.0/24", 100, None), ("198.18.252.0/24", 100, "blackhole"), ("198.18.2.0/24", 101, None),
        ("default", None, None)]  # the kernel's own routes and the local table are the kernel's to set
    # the kernel's three default rules and the fwmark rule are left as they are
    assert state["rules"] == [{"src": "198.18.2.0/28", "dst": "198.18.3.0/24", "priority": 500, "table": 101},
                              {"src": "198.18.2.1", "dst": None, "priority": 32765, "table": 100}]


def test_the_snapshot_is_put_back_line_for_line() -> None:
    state = runtime.state_of(ADDR, ROUTES, RULES, {"ib0"})
    lines = runtime.ip_batch_lines(state, runtime.owned_rules(RULES))
    assert lines == [
        "link set dev ib0 mtu 4092", "addr flush dev ib0", "addr add 198.18.2.1/24 dev ib0",
        "route flush table all proto boot", "route flush table all proto static",
        "route replace 198.18.2.0/24 dev ib0 table 100 scope link src 198.18.2.1 proto boot",
        "route replace blackhole 198.18.252.0/24 table 100 proto boot",
        "route replace 198.18.2.0/24 dev ib0 table 101 scope link src 198.18.2.1 metric 5 proto static",
        "route replace default via 198.18.0.1 dev eno1 proto boot",
        # the rules in place now go first, then the state's own, each with its priority
        "rule del priority 500 from 198.18.2.0/28 to 198.18.3.0/24 table 101",
        "rule del priority 32765 from 198.18.2.1/32 table 100",
        "rule add priority 500 from 198.18.2.0/28 to 198.18.3.0/24 table 101",
        "rule add priority 32765 from 198.18.2.1/32 table 100"]


def test_a_rule_without_a_priority_takes_the_kernels_and_a_repeated_one_is_added_once() -> None:
    rule: Rule = {"src": "198.18.2.1", "table": 100}
    state: IpState = {"links": {}, "routes": [], "rules": [rule, rule, {"src": "198.18.2.2", "table": 254}]}
    assert runtime.ip_batch_lines(state, [])[2:] == ["rule add from 198.18.2.1/32 table 100",
                                                    "rule add from 198.18.2.2/32 table 254"]


@pytest.mark.parametrize("table", [0, 255, 2**32, -1, True, "100", 100.0, "100 table 1"])
def test_a_table_id_is_an_integer_in_range_not_the_kernels_local(table: Any) -> None:
    with pytest.raises(Refused):
        runtime.ip_batch_lines({"links": {}, "routes": [{"to": "198.18.2.0/24", "dev": "ib0", "table": table}],
                                "rules": []}, [])
    with pytest.raises(Refused):
        runtime.ip_batch_lines({"links": {}, "routes": [], "rules": [{"src": "198.18.2.1", "table": table}]}, [])


@pytest.mark.parametrize(("route", "error"), [
    ({"to": "198.18.2.0/24", "dev": "ib0 table 1"}, Refused),
    ({"to": "198.18.2.0/24", "dev": "-ib0"}, Refused),
    ({"to": "198.18.2.0/24", "dev": "ib0", "src": "198.18.2.1\nrule flush"}, ValueError),
    ({"to": "198.18.2.0/24", "dev": "ib0", "scope": "link proto kernel"}, Refused),
    ({"to": "198.18.2.0/24", "dev": "ib0", "type": "throw"}, Refused),
    ({"to": "198.18.2.0/24", "dev": "ib0", "metric": "5 table 7"}, Refused),
])
def test_every_route_word_is_checked(route: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        runtime.ip_batch_lines({"links": {}, "routes": [route], "rules": []}, [])


@pytest.mark.parametrize(("rule", "error"), [
    ({"src": "198.18.2.1 lookup 7", "table": 100}, ValueError),
    ({"src": "198.18.2.1", "dst": "all\nrule flush", "table": 100}, ValueError),
    ({"src": "198.18.2.1", "table": 100, "priority": 2**32}, Refused),
    ({"src": "198.18.2.1", "table": 100, "priority": "1"}, Refused),
    ({"src": "198.18.2.1"}, Refused),  # a rule looks up a table
])
def test_every_rule_word_is_checked(rule: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        runtime.ip_batch_lines({"links": {}, "routes": [], "rules": [rule]}, [])


def test_a_table_named_in_rt_tables_is_refused_before_the_apply_changes_anything() -> None:
    with pytest.raises(Refused, match="rt_tables"):
        runtime.state_of([], [{"dst": "198.18.2.0/24", "dev": "ib0", "table": "rails"}], [], set())


# ------------------------------------------------------------------------------------------- as root

SNAPSHOT_AND_APPLY = """
import json, sys
from pathlib import Path
from gpunet.node import runtime
tx, state, phase = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
target = {"name": "netplan", "requires": [], "check": [], "apply": [], "revert": [], "snapshot": ["ip"],
          "ip_state": state}
if phase == "apply":
    runtime.take_snapshot("ip", target, Path("/"), tx)
    runtime.apply_ip_state(state, Path("/"))
else:
    runtime.restore_snapshot("ip", target, Path("/"), tx)
"""


@pytest.fixture
def namespace() -> Iterator[str]:
    """A namespace of this test's own, with a veth pair standing for two rails, as a lab builds a
    server: addresses, a default route and per-NIC tables with their rules (proto boot)."""
    name = f"gntest-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        setup = ["link add ib0 type veth peer name ib1", "link set ib0 up", "link set ib1 up", "link set lo up",
                 "addr add 198.18.2.1/24 dev ib0", "addr add 198.18.2.2/24 dev ib1",
                 "route add default via 198.18.2.254 dev ib0",
                 "rule add from 198.18.2.1 lookup 100", "route add 198.18.2.0/24 dev ib0 src 198.18.2.1 table 100",
                 "rule add from 198.18.2.2 lookup 101", "route add 198.18.2.0/24 dev ib1 src 198.18.2.2 table 101"]
        subprocess.run(["ip", "-n", name, "-batch", "-"], input="\n".join(setup) + "\n", text=True, check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def _routing(namespace: str) -> str:
    """Rules, routes of every table, addresses; sorted, as the kernel lists routes to one prefix
    in the order their addresses were added."""
    return "\n".join(sorted("".join(subprocess.run(["ip", "-n", namespace, "-4", *what], capture_output=True, text=True,
                                  check=True).stdout
                   for what in (["rule"], ["route", "show", "table", "all"], ["addr"])).splitlines()))


def _in(namespace: str, tx: Path, state: IpState, phase: str) -> None:
    subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-c", SNAPSHOT_AND_APPLY, str(tx),
                    json.dumps(state), phase], check=True, capture_output=True, text=True)


@pytest.mark.lab
def test_the_stand_in_sets_netplans_tables_and_rules_and_the_revert_puts_the_old_ones_back(
        namespace: str, tmp_path: Path) -> None:
    before = _routing(namespace)
    # what the rendered netplan file says (lab_network_state's output): ib1 moves to table 201 with
    # a priority, ib0 keeps table 100, and a second source address on ib0 gets a rule of its own
    state: IpState = {
        "links": {"ib0": {"mtu": None, "addresses": ["198.18.2.1/24"]},
                  "ib1": {"mtu": None, "addresses": ["198.18.2.2/24"]}},
        "routes": [{"to": "default", "via": "198.18.2.254", "dev": "ib0"},
                   {"to": "198.18.2.0/24", "dev": "ib0", "table": 100, "scope": "link", "src": "198.18.2.1"},
                   {"to": "198.18.2.0/24", "dev": "ib1", "table": 201, "scope": "link", "src": "198.18.2.2"}],
        "rules": [{"src": "198.18.2.1", "table": 100}, {"src": "198.18.2.2", "table": 201, "priority": 1000}]}
    _in(namespace, tmp_path, state, "apply")
    after = _routing(namespace)
    assert "1000:\tfrom 198.18.2.2 lookup 201" in after and "32765:\tfrom 198.18.2.1 lookup 100" in after
    assert "lookup 101" not in after  # the old rule and its table's route are gone, as networkd removes them
    assert "198.18.2.0/24 dev ib1 table 201 proto static scope link src 198.18.2.2" in after
    assert "table 101" not in after
    _in(namespace, tmp_path, state, "revert")
    assert _routing(namespace) == before
