"""`gpunet apply` on the README's built-in example in a lab (its eight GPU servers, the storage and
login nodes): the rails share a subnet, so netplan gives each its own routing table and rule, and
the lab's stand-in for `netplan apply` sets them as netplan would and puts the old ones back on
revert. The whole rollout ends applied, verified and confirmed; the doctor then finds no firewall
problem; `--target` takes the comma form."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
import yaml
from ClusterShell.NodeSet import NodeSet

from gpunet.api.apply import reach
from gpunet.apply import ApplyOptions, apply_rollout
from gpunet.apply.manifest import DEFAULT_TARGETS
from gpunet.lab.state import LabState, lab_dir
from gpunet.render.netplan import PATH as NETPLAN
from gpunet.spec.plan import plan_of
from tests.lab.helpers import built_lab
from tests.labs import lab_id
from tests.zygote import run_gpunet

LAB = lab_id("ad")
NODES = "gpu[001-008]"
pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    # ten servers: the example's first eight GPU servers (one leaf per plane), stor01 and login01
    with built_lab(LAB, plan_of(None), max_nodes=10) as state:
        yield state


def _gpunet(*args: str, timeout: float = 420) -> subprocess.CompletedProcess[str]:
    return run_gpunet(list(args), timeout=timeout)


def _routing(node: str) -> list[str]:
    """A server's policy rules and the routes of every table but the kernel's local one."""
    ns = f"gn{LAB}-{node}"
    rules = subprocess.run(["ip", "-n", ns, "-4", "rule"], capture_output=True, text=True, check=True).stdout
    routes = subprocess.run(["ip", "-n", ns, "-4", "route", "show", "table", "all"], capture_output=True, text=True,
                            check=True).stdout
    return sorted(rules.splitlines() + [r for r in routes.splitlines() if "table local" not in r])


def _gateway_moved(node: str, files: dict[str, str]) -> dict[str, str]:
    """The management default route via an address nobody answers at: verification fails."""
    doc = yaml.safe_load(files[NETPLAN])
    for conf in doc["network"]["ethernets"].values():
        for route in conf.get("routes", []):
            if route.get("to") == "default":
                route["via"] = route["via"].rsplit(".", 1)[0] + ".250"
    return files | {NETPLAN: yaml.safe_dump(doc, sort_keys=False)}


def test_a_reverted_change_puts_back_every_table_and_rule(lab: LabState) -> None:
    before = _routing("gpu008")
    assert sum("lookup 10" in line for line in before) == 8  # the lab built a table per rail
    plan, remote, _ = reach(lab=LAB, plan=None)
    # apply's default deadline: a bad change ends at its verification, and on CI's loaded host a
    # 60 s deadline left the verifying doctor too little after a slow `begin`
    report = apply_rollout(plan, NodeSet("gpu008"), remote, ApplyOptions(targets=DEFAULT_TARGETS,
                                                                              change=_gateway_moved))
    assert report.nodes[0].outcome == "reverted" and "GN-ROUTE-02" in report.nodes[0].reason, report.nodes
    assert _routing("gpu008") == before


def test_apply_ends_applied_verified_and_confirmed_with_netplans_tables_and_rules(lab: LabState) -> None:
    done = _gpunet("apply", "run", NODES, "--lab", LAB, "--timeout", "90", "--json")
    report = json.loads(done.stdout)
    # the nodes that did not end applied and why, as text (pytest cuts a long dict short)
    assert done.returncode == 0, done.stderr + "; ".join(
        f"{n['node']} {n['outcome']} ({n['configuration']}): {n['reason']}" for n in report["nodes"]
        if n["outcome"] != "applied")
    assert {(n["node"], n["outcome"], n["reason"]) for n in report["nodes"]} == {
        (node, "applied", "verified and confirmed") for node in NodeSet(NODES)}
    # what netplan's routing-policy says, set by apply (proto static; the lab built them proto boot)
    netplan = yaml.safe_load((lab_dir(LAB) / "root/gpu001" / NETPLAN).read_text())["network"]["ethernets"]
    routing = _routing("gpu001")
    for dev, conf in netplan.items():
        for entry in conf.get("routing-policy", []):
            assert any(line.endswith(f"from {entry['from']} lookup {entry['table']}") for line in routing), entry
        for route in (r for r in conf.get("routes", []) if "table" in r):
            assert (f"{route['to']} dev {dev} table {route['table']} proto static scope link src {route['from']} "
                    in routing), route


def test_the_doctor_then_finds_no_firewall_problem(lab: LabState) -> None:
    done = _gpunet("doctor", NODES, "--lab", LAB, "--json")
    findings = json.loads(done.stdout)["findings"]
    assert [f for f in findings if f["check"].startswith("GN-FW") and f["verdict"] in ("warn", "fail")] == []
    assert any(f["check"] == "GN-FW-01" and f["verdict"] == "pass" for f in findings)  # it did judge the rules


def test_a_chosen_pair_of_targets_applies_in_the_comma_form(lab: LabState) -> None:
    done = _gpunet("apply", "run", "gpu001", "--lab", LAB, "--target", "netplan,sysctl", "--timeout", "90", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["nodes"][0]["outcome"] == "applied", (done.stderr, report)
