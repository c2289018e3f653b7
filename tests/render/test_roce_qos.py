"""The host RoCE QoS boot unit and script: systemd-analyze verify accepts the unit (and refuses a broken
one), bash -n accepts the script, and its dry run sets exactly the plane's RoCE class (plan.qos, the
values the switch side renders from)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpunet.model.plan import Plan
from gpunet.model.qos import RoceQos
from gpunet.model.tuning import nccl_settings
from gpunet.render.roce_qos import (
    SCRIPT_PATH,
    UNIT_PATH,
    render_roce_qos,
    render_roce_qos_script,
    render_roce_qos_unit,
    roce_interfaces,
)
from tests.checks.rdma_specs import rdma_plan
from tests.render.rendered import example_plan

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


def with_qos(qos: RoceQos) -> Plan:
    plan = rdma_plan("roce")
    return plan.model_copy(update={"planes": tuple(p.model_copy(update={"qos": qos}) if p.qos else p
                                                   for p in plan.planes)})


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def dry_run(script: str, tmp_path: Path) -> list[str]:
    path = tmp_path / "gpunet-roce-qos"
    path.write_text(script)
    done = subprocess.run(["bash", str(path)], env={"DRY_RUN": "1", "PATH": "/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=30, check=True)
    return done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_accepts_the_unit_and_refuses_a_broken_one(tmp_path: Path) -> None:
    plan = rdma_plan("roce")
    unit = tmp_path / "gpunet-roce-qos.service"
    unit.write_text(render_roce_qos_unit(plan, plan.nodes[0]))
    done = run(["systemd-analyze", "verify", str(unit)])
    assert done.returncode == 0, done.stderr
    unit.write_text(unit.read_text().replace("ExecStart=/bin/bash", "ExecStart=bash-not-a-path"))
    broken = run(["systemd-analyze", "verify", str(unit)])
    assert broken.returncode != 0 and "bash-not-a-path is not executable" in broken.stderr


def test_bash_n_accepts_the_script(tmp_path: Path) -> None:
    plan = rdma_plan("roce")
    path = tmp_path / "script"
    path.write_text(render_roce_qos_script(plan, plan.nodes[0]))
    assert run(["bash", "-n", str(path)]).returncode == 0
    path.write_text(path.read_text() + "if then fi\n")
    assert run(["bash", "-n", str(path)]).returncode != 0


@pytest.mark.parametrize("qos", [RoceQos(), RoceQos(dscp=24, priority=4, cnp_dscp=46, cnp_priority=7, ecn=False)])
def test_dry_run_sets_the_planes_roce_class(qos: RoceQos, tmp_path: Path) -> None:
    plan = with_qos(qos)
    node = plan.node("gpu01")
    assert node is not None
    lines = dry_run(render_roce_qos_script(plan, node), tmp_path)
    for iface, _ in roce_interfaces(plan, node):
        dev, hca = iface.name, iface.hca
        mine = [line for line in lines if f" {dev} " in f"{line} " or f"/{dev}/" in line or f" {hca} " in f"{line} "
                or f"/{hca}/" in line]
        ecn = [f"echo 1 > /sys/class/net/{dev}/ecn/roce_np/enable/{qos.priority}",
               f"echo 1 > /sys/class/net/{dev}/ecn/roce_rp/enable/{qos.priority}"] if qos.ecn else []
        assert mine == [
            f"mlnx_qos -i {dev} --trust dscp",
            f"mlnx_qos -i {dev} --dscp2prio set,{qos.dscp},{qos.priority}",
            f"mlnx_qos -i {dev} --dscp2prio set,{qos.cnp_dscp},{qos.cnp_priority}",
            f"mlnx_qos -i {dev} --pfc " + ",".join("1" if p == qos.priority else "0" for p in range(8)),
            *ecn,
            f"echo {qos.cnp_dscp} > /sys/class/net/{dev}/ecn/roce_np/cnp_dscp",
            f"echo {qos.cnp_priority} > /sys/class/net/{dev}/ecn/roce_np/cnp_802p_prio",
            f"cma_roce_tos -d {hca} -t {qos.traffic_class}",
            f"echo {qos.traffic_class} > /sys/class/infiniband/{hca}/tc/1/traffic_class"]
    assert len([line for line in lines if "--trust dscp" in line]) == 8


def test_the_script_sets_what_nccl_ib_tc_says() -> None:
    """The host's traffic class and NCCL's come from the same plane.qos."""
    plan = rdma_plan("roce")
    node = plan.node("gpu01")
    assert node is not None
    tc = next(s.value for s in nccl_settings(plan, node) if s.name == "NCCL_IB_TC")
    assert set(re.findall(r"-t (\d+)", render_roce_qos_script(plan, node))) == {tc}


def test_nodes_without_roce_get_no_files() -> None:
    plan = example_plan("small-ethernet")
    assert all(render_roce_qos(plan, n) == {} for n in plan.nodes)
    su = example_plan("scalable-unit")
    login = next(n for n in su.nodes if n.role == "login")
    assert render_roce_qos(su, login) == {}
    gpu = next(n for n in su.nodes if n.role == "gpu")
    assert set(render_roce_qos(su, gpu)) == {SCRIPT_PATH, UNIT_PATH}
