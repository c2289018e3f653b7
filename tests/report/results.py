"""Result files of the default example with faults seeded, made by gpunet's own functions and
written in the shapes the commands print (`--json`):

- cabling: check_cabling on what a fabric that matches the plan reports, with gpu007's management
  cable plugged into the free port mgmt-leaf001:41 (a miswire);
- localize: localize_counters on two recorded ibqueryerrors samples of the simulated default
  example (tests/fixtures/ibqueryerrors), whose symbol errors name a lossy leaf-spine cable;
- doctor: the real checks on a constructed state of gpu012 whose ib3 lost its link (GN-LINK-01 and
  GN-IB-01 fail) and of gpu020 whose storage bond has MTU 1500 (GN-MTU-01 fails);
- bench: a database written through the bench store, constructed measurements of 8 nodes (one
  low pair, one inconclusive with its reason): there is no RDMA here to measure;
- switch, sim: constructed in the shapes the report accepts (those commands are being built);
- compare: compare() of the example against its RoCE variant (tests/fixtures/compare).
"""

from __future__ import annotations

import json
from pathlib import Path

from gpunet.bench.health import EndHealth
from gpunet.bench.store import Measurement, add_measurements, start_run
from gpunet.checks import Context, run_checks
from gpunet.decide.compare import compare
from gpunet.design import design
from gpunet.fabric.cabling import check_cabling, ends
from gpunet.fabric.observed import End, Observation, Seen
from gpunet.localize.run import localize_counters
from gpunet.model.plan import Plan
from gpunet.model.state import (
    BondSlave,
    BondState,
    IbPort,
    InterfaceState,
    NodeState,
    RdmaStack,
    Route,
    SnmpCounters,
)
from gpunet.probe.parsers import parse_env_file
from gpunet.render.nccl import render_nccl_env
from gpunet.report.model import plan_digest
from gpunet.spec.loader import load_spec

FIXTURES = Path(__file__).parent.parent / "fixtures"
IBQUERYERRORS = FIXTURES / "ibqueryerrors"
MISWIRED = ("gpu007", "eno1", "41")  # gpu007's management cable, found in mgmt-leaf001:41
LOSSY = "comp-leaf003:40 comp-spine001:24"  # the symbol errors of the recorded sample


def cabling_json(plan: Plan) -> str:
    links = []
    for link in plan.links:
        if link.plane == "oob":
            continue
        a, b = ends(link)
        if (a.device, a.port) == MISWIRED[:2]:
            b = End(b.device, MISWIRED[2])
        ib = link.plane == "compute"
        links.append(Seen(a, b, width=4 if ib else None, speed="NDR" if ib else None,
                          gbps=None if ib else float(link.gbps)))
    looked = {e.device for link in plan.links if link.plane != "oob" for e in ends(link)}
    planes = [p.name for p in plan.planes if p.name != "oob"]
    return check_cabling(plan, Observation("LLDP and ibnetdiscover", links, looked), planes).model_dump_json(indent=1)


def localize_json(plan: Plan) -> str:
    before = (IBQUERYERRORS / "ibsim-0.10-default-example-clean" / "output.txt").read_text()
    after = (IBQUERYERRORS / "ibsim-0.10-switch-symbol-errors-ca-rcv-errors-xmit-wait" / "output.txt").read_text()
    return localize_counters(plan, after, before, seconds=30).model_dump_json(indent=1)


def healthy_state(plan: Plan, name: str) -> NodeState:
    """A node exactly as planned: links up at speed and MTU, addresses, routes, bonds, HCAs, settings."""
    node = plan.node(name)
    assert node is not None
    mgmt = next(p for p in plan.planes if p.name == "management")
    interfaces = tuple(InterfaceState(name=i.name, operstate="up", carrier=True, mtu=i.mtu,
                                      speed_mbps=i.speed_gbps * 1000, duplex="full")
                       for i in node.interfaces if i.plane != "oob")
    return NodeState(
        hostname=name, interfaces=interfaces, addresses={i.layer3: (i.address,) for i in node.interfaces if i.address},
        routes=(Route(dst="default", dev="eno1", gateway=mgmt.gateway),),
        bonds=tuple(BondState(name=i.name, mode="IEEE 802.3ad Dynamic link aggregation", mii_up=True,
                              slaves=tuple(BondSlave(name=m, mii_up=True) for m in i.members))
                    for i in node.interfaces if i.bond),
        ib_ports=tuple(IbPort(ca=i.hca, port=1, state="ACTIVE", physical_state="LinkUp", rate_gbps=float(i.speed_gbps))
                       for i in node.interfaces if i.hca),
        snmp=SnmpCounters(groups={"Tcp": {"OutSegs": 1000, "RetransSegs": 0}}),
        sysctls={"net.ipv4.tcp_rmem": "4096 131072 268435456", "net.ipv4.tcp_wmem": "4096 65536 268435456"},
        resolved={i.hostname: (i.address.split("/")[0],) for n in plan.nodes for i in n.interfaces
                  if i.hostname and i.address},
        sshd={"passwordauthentication": "no", "kbdinteractiveauthentication": "no"},
        nccl_env=parse_env_file(render_nccl_env(plan, node)),
        rdma=RdmaStack(nccl="libnccl.so.2.21.5", providers=("mlx5",)),
        interval_s=2.0, rates={"Tcp/OutSegs": 500.0, "Tcp/RetransSegs": 0.0})


def doctor_json(plan: Plan, name: str, state: NodeState) -> str:
    """What `gpunet doctor --json` prints for the node (cli/doctor.py's shape)."""
    findings = run_checks(Context(state=state, plan=plan, node=plan.node(name)))
    return json.dumps({"node": name, "failed": any(f.verdict == "fail" for f in findings),
                       "findings": [f.model_dump() for f in findings], "probe_problems": []}, indent=1)


def link_down(plan: Plan) -> NodeState:
    """gpu012's ib3 without carrier, its HCA port polling."""
    state = healthy_state(plan, "gpu012")
    interfaces = tuple(i.model_copy(update={"operstate": "down", "carrier": False}) if i.name == "ib3" else i
                       for i in state.interfaces)
    ports = tuple(p.model_copy(update={"state": "DOWN", "physical_state": "Polling"}) if p.ca == "mlx5_3" else p
                  for p in state.ib_ports)
    return state.model_copy(update={"interfaces": interfaces, "ib_ports": ports})


def mtu_drift(plan: Plan) -> NodeState:
    """gpu020's storage bond at MTU 1500 where the plan says 9000."""
    state = healthy_state(plan, "gpu020")
    return state.model_copy(update={"interfaces": tuple(i.model_copy(update={"mtu": 1500}) if i.name == "bond0" else i
                                                        for i in state.interfaces)})


def bench_db(plan: Plan, path: Path) -> int:
    nodes = [f"gpu{n:03d}" for n in range(1, 9)]
    pairs = [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1:]]
    busy = EndHealth(node="gpu006", role="server", cpu_pressure=0.62, busy=1.0, steal=0.0, cpus=2)
    measurements = []
    for n, (a, b) in enumerate(pairs):
        status, value, reason, health = "ok", 392.0 - (n % 5), None, ()
        if (a, b) == ("gpu002", "gpu005"):
            status, value = "low", 288.0
        if (a, b) == ("gpu003", "gpu006"):
            status, value, reason, health = "inconclusive", 201.0, "gpu006 saturated: CPU pressure 0.62", (busy,)
        measurements.append(Measurement(source=a, destination=b, plane="compute", metric="throughput", value=value,
                                        unit="Gb/s", expected=396.0, status=status, reason=reason, health=health))
    run = start_run(path, plan_hash=plan_digest(plan), tool="iperf3", pattern="all-pairs",
                    arguments="plane=compute seconds=10 nodes=gpu[001-008]")
    add_measurements(path, run, measurements)
    return run


def switch_json() -> str:
    return json.dumps({"switch": "comp-leaf005", "findings": [
        {"check": "SW-LINK-01", "area": "link", "title": "port up at the planned speed", "verdict": "pass",
         "subject": "swp1", "observed": "up 400G"},
        {"check": "SW-MTU-01", "area": "mtu", "title": "port MTU as planned", "verdict": "warn", "subject": "swp33",
         "observed": "9216", "expected": "9216 (4096 IB MTU)", "fix": "nv set interface swp33 link mtu 9216"}]},
        indent=1)


def sim_json(plan: Plan) -> str:
    return json.dumps({"site": plan.site.name, "plan_hash": plan_digest(plan), "jobs": [
        {"name": "all_reduce 8 GiB, 32 nodes", "nodes": "gpu[001-032]", "collective": "all_reduce",
         "bytes": 8 << 30, "simulated_s": 0.412, "measured_s": 0.431},
        {"name": "all_to_all 1 GiB, 16 nodes", "nodes": "gpu[001-016]", "collective": "all_to_all",
         "bytes": 1 << 30, "simulated_s": 0.118, "measured_s": 0.171},
        {"name": "all_gather 2 GiB, 8 nodes", "nodes": "gpu[001-008]", "collective": "all_gather",
         "bytes": 2 << 30, "simulated_s": 0.066}]}, indent=1)


def compare_json(plan: Plan) -> str:
    roce = design(load_spec(FIXTURES / "compare" / "su-roce.yaml")[0])
    return json.dumps(compare([("su-infiniband", plan), ("su-roce", roce)]).model_dump(mode="json"))


def write_all(plan: Plan, directory: Path) -> dict[str, Path]:
    """Every result file of the seeded example; returns family -> path (doctor: the first of two)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {"cabling": cabling_json(plan), "localize": localize_json(plan), "switch": switch_json(),
             "sim": sim_json(plan), "compare": compare_json(plan),
             "doctor": doctor_json(plan, "gpu012", link_down(plan)),
             "doctor2": doctor_json(plan, "gpu020", mtu_drift(plan))}
    paths = {}
    for name, text in files.items():
        paths[name] = directory / f"{name}.json"
        paths[name].write_text(text)
    paths["bench"] = directory / "bench.sqlite"
    bench_db(plan, paths["bench"])
    return paths
