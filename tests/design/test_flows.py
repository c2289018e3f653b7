"""The flows derived from the spec: who talks to whom on which port, the same list every consumer
(firewalls, Slurm, nccl.env, Prometheus, doctor) reads; the warnings and refusals around them."""

from __future__ import annotations

import re

import pytest

from gpunet.design import design
from gpunet.errors import SpecError
from gpunet.model.nodeset import parse_nodeset
from gpunet.model.plan import Plan
from gpunet.model.tuning import nccl_settings
from gpunet.render.slurm import render_network_conf
from gpunet.spec.checks import spec_warnings
from gpunet.spec.examples import EXAMPLES, example_text
from gpunet.spec.loader import parse_spec
from tests.render.rendered import example_plan

SCHEDULER = "  scheduler: {controller: login01}  # Slurm: slurmctld on login01; its ports go into the firewall\n"


def plan_of(text: str) -> Plan:
    return design(parse_spec(text)[0])


def flow(plan: Plan, service: str, protocol: str = "tcp") -> dict[str, object]:
    found = [f for f in plan.flows if f.service == service and f.protocol == protocol]
    assert len(found) == 1, (service, [f.service for f in plan.flows])
    return found[0].model_dump(by_alias=False)


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_nccl_sockets_sit_on_the_plane_the_bootstrap_flow_opens(example: str) -> None:
    plan = example_plan(example)  # designed once per process, shared with the other modules
    bootstrap = [f for f in plan.flows if f.service == "job-bootstrap"]
    reached = set(parse_nodeset(bootstrap[0].to_nodes)) if len(bootstrap) == 1 else set()  # once, not per node
    for node in plan.nodes:
        sockets = next((s.value for s in nccl_settings(plan, node) if s.name == "NCCL_SOCKET_IFNAME"), None)
        if sockets is None:
            continue
        assert len(bootstrap) == 1 and node.name in reached
        planes = {i.plane for i in node.interfaces if i.layer3 in sockets.lstrip("=").split(",")}
        assert planes == {bootstrap[0].plane}, (node.name, sockets)


def test_default_example_flows_and_slurm_agree() -> None:
    plan = plan_of(example_text("scalable-unit"))
    assert flow(plan, "job-bootstrap")["plane"] == "management"  # compute is InfiniBand: sockets on eno1
    assert flow(plan, "job-bootstrap")["ports"] == "32768-59999"
    assert flow(plan, "slurmctld")["to_nodes"] == "login01"
    network = render_network_conf(plan) or ""
    for service, key in (("slurmctld", "SlurmctldPort"), ("slurmd", "SlurmdPort"), ("srun", "SrunPortRange")):
        assert re.search(rf"^{key}={flow(plan, service)['ports']}$", network, re.M), (key, network)
    # Storage services only from clients to storage servers; SSH to login nodes from anywhere.
    assert flow(plan, "nfs")["to_nodes"] == "stor[01-04]" and "stor" not in str(flow(plan, "nfs")["from_nodes"])
    assert flow(plan, "ssh-in")["from_anywhere"] and flow(plan, "ssh-in")["to_nodes"] == "login[01-02]"
    assert flow(plan, "ntp", "udp")["to_hosts"] and flow(plan, "dns", "udp")["to_hosts"]


def test_a_spec_without_monitoring_ntp_or_scheduler_is_warned_not_refused() -> None:
    text = example_text("scalable-unit")
    bare = re.sub(r"  (monitoring|ntp_servers|scheduler):.*\n", "", text)
    messages = [p.message for p in spec_warnings(parse_spec(bare)[0])]
    assert any(m.startswith("no monitoring subnet") for m in messages)
    assert any(m.startswith("no NTP servers") for m in messages)
    assert any(m.startswith("no scheduler") for m in messages)
    plan = plan_of(bare)
    assert not {"node-exporter", "slurmctld", "srun", "ntp"} & {f.service for f in plan.flows}
    assert spec_warnings(parse_spec(text)[0]) == []


def test_declared_flows_resolve_roles_groups_and_subnets() -> None:
    text = example_text("scalable-unit") + (
        "flows:\n"
        "  - {service: jupyter, ports: 8888-8890, from: '@role:login', to: '@group:gpu', why: notebooks}\n"
        "  - {service: backup, ports: '873', from: 198.18.0.96/28, to: 'stor[01-02]'}\n")
    plan = plan_of(text)
    jupyter, backup = flow(plan, "jupyter"), flow(plan, "backup")
    assert (jupyter["from_nodes"], jupyter["to_nodes"], jupyter["declared"]) == ("login[01-02]", "gpu[001-032]", True)
    assert (backup["from_subnets"], backup["to_nodes"], backup["why"]) == (("198.18.0.96/28",), "stor[01-02]",
                                                                          "declared in the spec")
    assert "jupyter" in {f.service for f in plan.inbound_flows["gpu007"]}
    assert "jupyter" not in {f.service for f in plan.inbound_flows["stor01"]}


@pytest.mark.parametrize(("declared", "message"), [
    ("{service: x, ports: '80', from: '@role:nosuch', to: all}", r"flows\.0: from '@role:nosuch' names no node"),
    ("{service: x, ports: '80', from: all, to: 'gpu[900-901]'}", r"flows\.0: to 'gpu\[900-901\]' names no node"),
    ("{service: x, ports: '80', from: 198.18.0.0/33, to: all}", r"198.18.0.0/33"),
    ("{service: x, ports: '80', from: all, to: all, plane: storage, protocol: sctp}", r"protocol"),
    ("{service: x, ports: '70000', from: all, to: all}", r"ports"),
])
def test_a_bad_declared_flow_is_located(declared: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        plan_of(example_text("scalable-unit") + f"flows:\n  - {declared}\n")


def test_a_monitoring_range_holding_a_node_is_refused() -> None:
    text = example_text("scalable-unit").replace("monitoring: 198.18.0.250/32", "monitoring: 198.18.0.0/24")
    with pytest.raises(SpecError, match=r"site\.monitoring: monitoring 198\.18\.0\.0/24 holds the address of gpu001"):
        plan_of(text)


@pytest.mark.parametrize(("site", "message"), [
    ("  ephemeral_ports: 60000-65000\n", r"site\.ephemeral_ports.*srun_ports"),
    ("  ephemeral_ports: 100-5000\n", r"below 1024"),
])
def test_port_ranges_that_would_collide_are_refused(site: str, message: str) -> None:
    text = example_text("scalable-unit").replace(SCHEDULER, SCHEDULER + site)
    with pytest.raises(SpecError, match=message):
        parse_spec(text)
