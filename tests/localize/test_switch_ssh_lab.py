"""The lab reached as a real fabric is: switch counters over SSH from the lab's own switches (every
switch of the default example's lab has an eth0 on the out-of-band plane at its planned management
address, in lab numbering, and an sshd there; `localize --lab ID --switches` reads `ip -s -s -j link`
from each, twice around a window), and probing from the plan's nodes over SSH with hops named only
through the plan's switch addresses (`localize --probe --plan`), (root; `lab` marker)."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from typer.testing import CliRunner

from gpunet.api.fabric import localize_nodes
from gpunet.cli.main import app
from gpunet.fabric.cabling import cable_name
from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.sshd import ssh_argv
from gpunet.lab.state import LAB_PLAN, LabState, lab_dir
from gpunet.model.plan import Plan
from gpunet.reach import LAB_SSH_OPTIONS, Reach
from gpunet.render.switch.common import SWITCH_MTU
from tests.labs import shared_lab, shared_lab_plan

pytestmark = [pytest.mark.lab]
lab = shared_lab("default8")
plan = shared_lab_plan()
DATA_PLANES = ("compute", "storage")


def _ssh(state: LabState, address: str, command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(ssh_argv(lab_dir(state.lab_id), address, command), capture_output=True, text=True,
                          timeout=60, check=False)


def test_every_switch_answers_ssh_at_its_management_address_with_its_own_ports(lab: LabState, plan: Plan) -> None:
    managed = [s for s in plan.switches if s.management]
    assert {s.name for s in managed} == {s.name for s in plan.switches}  # the Plan gives every switch one
    assert {s.name: s.management.split("/")[0] for s in managed if s.management} == lab.switch_mgmt
    with ThreadPoolExecutor(8) as pool:
        answers = dict(zip(managed, pool.map(lambda s: _ssh(lab, lab.switch_mgmt[s.name], ["ip", "-j", "link"]),
                                             managed), strict=True))
    for switch, done in answers.items():
        assert done.returncode == 0, (switch.name, done.stderr)
        seen = {link["ifname"] for link in json.loads(done.stdout)}
        planned = {f"swp{p.port}" for c in plan.links for p in (c.a, c.b) if p.device == switch.name}
        assert planned <= seen, (switch.name, planned - seen)  # the switch's own namespace, not another's
        assert "eth0" in seen or switch.name == "bmc-leaf001", seen  # the OOB switch's address is on its bridge


def test_localize_reads_every_data_switch_over_ssh_and_a_healthy_lab_names_nothing(lab: LabState, plan: Plan) -> None:
    result = CliRunner().invoke(app, ["localize", "--lab", lab.lab_id, "--switches", "--window", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    asked = sum(1 for s in plan.switches if s.plane in DATA_PLANES)
    assert report["suspects"] == []
    assert f"switch port counters read over SSH from {asked} of {asked} switches" in report["notes"]


def test_frames_over_a_switch_ports_mtu_show_between_the_two_samples_on_that_ports_cable(
        lab: LabState, plan: Plan) -> None:
    """A leaf port's MTU set below its server's (a real misconfiguration) drops the server's
    3000-byte frames on arrival: the kernel counts them in the port's rx_dropped (a hardware switch
    counts giants), read over SSH before and after the window and said with the port's cable. A drop
    is not a bad cable, so nothing is named (veths have no error counter to move: recorded outputs
    show errors named, tests/localize/test_switch_counters.py)."""
    cable = next(c for c in plan.links if c.b.device == "comp-leaf001" and c.b.port == "1")
    server = plan.node(cable.a.device)
    source = next(i for i in server.interfaces if i.name == cable.a.port)
    target = next(i for c in plan.links if c.b.device == "comp-leaf001" and c.b.port == "2"
                  for i in plan.node(c.a.device).interfaces if i.name == c.a.port)
    leaf_ns = f"gn{lab.lab_id}-comp-leaf001"
    subprocess.run(["ip", "-n", leaf_ns, "link", "set", "swp1", "mtu", "1500"], check=True)
    pings = subprocess.Popen(["ip", "netns", "exec", f"gn{lab.lab_id}-{server.name}", "ping", "-q", "-c", "60000",
                              "-i", "0.01", "-s", "3000", "-W", "1", "-I", str(source.address).split("/")[0],
                              str(target.address).split("/")[0]], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        result = CliRunner().invoke(app, ["localize", "--lab", lab.lab_id, "--switches", "--window", "3", "--json"])
    finally:
        pings.kill()
        pings.wait()
        subprocess.run(["ip", "-n", leaf_ns, "link", "set", "swp1", "mtu", str(SWITCH_MTU)], check=True)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["suspects"] == []
    note = next(n for n in report["notes"] if "dropped packets" in n)
    assert f"most at comp-leaf001 swp1 (cable {cable_name(cable)}): " in note, note
    assert int(note.rsplit(": ", 1)[1]) >= 50, note  # 100 frames a second over the 3 s window


def test_probing_from_the_plans_nodes_over_ssh_names_a_lossy_uplink_first(lab: LabState, plan: Plan) -> None:
    """`localize --probe --plan`, as on a real cluster: the plan's nodes over SSH at their management
    addresses (the lab's key; its host keys are new, so not checked), gpunet's agent sent along and
    run by the nodes' own python3, every hop named from the plan's /31s and loopbacks alone."""
    uplink = next(c for c in plan.links if c.plane == "compute" and c.tier == "leaf_spine")
    apply_fault(lab.lab_id, f"{uplink.a.device}:{uplink.a.port}", "loss", "3")
    try:
        reached = Reach(kind="ssh", plan_path=lab_dir(lab.lab_id) / LAB_PLAN, user="root",
                        key=lab_dir(lab.lab_id) / "id_ed25519", ssh_options=LAB_SSH_OPTIONS)
        report = localize_nodes(reached, ["compute"], None)
    finally:
        heal(lab.lab_id)
    assert report.suspects and report.suspects[0].cable == cable_name(uplink), report.suspects[:2]
    assert report.suspects[0].named
    assert any(n.startswith("probed over SSH from the plan's nodes") for n in report.notes)
    [probed] = report.planes
    assert probed.plane == "compute" and probed.learned > 0 and probed.covered > 0
