"""The RDMA software stack against the plan, on recorded ibv_devinfo outputs (a machine here has no
RDMA device): modules, provider, the HCAs verbs sees, NCCL's library, GPUDirect RDMA."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpunet import api
from gpunet.checks import Context, Finding, run_checks
from gpunet.model.state import NodeState, RdmaStack
from gpunet.probe.parsers import parse_ibv_devinfo

RECORDED = Path(__file__).parent.parent / "fixtures" / "ibv_devinfo"
PLAN = api.plan_spec(None)  # gpu001: compute mlx5_0..7 on InfiniBand, storage mlx5_8..9 on RoCE
MLX5_MODULES = ("ib_core", "ib_uverbs", "mlx5_core", "mlx5_ib", "rdma_cm", "rdma_ucm")


def findings(node: str = "gpu001", **rdma: Any) -> dict[str, list[Finding]]:
    state = NodeState(hostname=node, rdma=RdmaStack(**rdma))
    found: dict[str, list[Finding]] = {}
    for f in run_checks(Context(state=state, plan=PLAN, node=PLAN.node(node))):
        found.setdefault(f.check, []).append(f)
    return found


def verdicts(found: dict[str, list[Finding]], check: str) -> dict[str, str]:
    return {f.subject: f.verdict for f in found[check]}


def recorded(case: str) -> Any:
    return parse_ibv_devinfo((RECORDED / case / "output.txt").read_text())


def test_eight_hcas_of_a_real_node_against_the_plans_ten() -> None:
    """DeepEP #397's eight ConnectX-7 (mlx5_0, _3-_6, _9-_11, all InfiniBand): the plan wants
    mlx5_0-7 on InfiniBand and mlx5_8-9 on Ethernet (RoCE storage)."""
    got = verdicts(findings(verbs_devices=recorded("deepep-397-cx7-ib-multi")), "GN-RDMA-03")
    assert {h for h, v in got.items() if v == "pass"} == {"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6"}
    assert {h for h, v in got.items() if v == "fail"} == {"mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8", "mlx5_9"}


def test_a_down_port_and_a_wrong_link_layer_fail() -> None:
    down = findings(verbs_devices=recorded("ucx-9908-cx6-hdr-ib-verbose"))["GN-RDMA-03"]
    assert [(f.subject, f.verdict) for f in down if f.subject == "mlx5_1"] == [("mlx5_1", "fail")]
    assert "PORT_DOWN" in next(f.observed for f in down if f.subject == "mlx5_1")


def test_no_rdma_here_is_a_skip_with_the_reason() -> None:
    found = findings(verbs_devices=recorded("no-rdma-kernel"), kernel_modules=None)
    assert [f.verdict for f in found["GN-RDMA-03"]] == ["skip"] and "no RDMA device" in found["GN-RDMA-03"][0].evidence
    assert [f.verdict for f in found["GN-RDMA-01"]] == ["skip"]
    assert [f.verdict for f in findings(verbs_devices=None)["GN-RDMA-03"]] == ["skip"]


@pytest.mark.parametrize(("modules", "verdict", "missing"), [
    (MLX5_MODULES, "pass", ""), (tuple(m for m in MLX5_MODULES if m != "mlx5_ib"), "fail", "mlx5_ib"),
])
def test_kernel_modules(modules: tuple[str, ...], verdict: str, missing: str) -> None:
    check = findings(kernel_modules=modules)["GN-RDMA-01"][0]
    assert check.verdict == verdict and missing in check.observed
    assert not missing or f"modprobe -a {missing}" in check.fix


def test_rdma_core_provider() -> None:
    assert findings(providers=("mlx5", "efa"))["GN-RDMA-02"][0].verdict == "pass"
    lacking = findings(providers=("efa",))["GN-RDMA-02"][0]
    assert lacking.verdict == "fail" and "ibverbs-providers" in lacking.fix


def test_nccl_library_and_gpudirect() -> None:
    assert findings(nccl="libnccl.so.2.21.5")["GN-NCCL-02"][0].observed == "2.21.5"
    assert findings(nccl=None)["GN-NCCL-02"][0].verdict == "warn"
    assert findings(kernel_modules=("nvidia", "nvidia_peermem"))["GN-GDR-01"][0].verdict == "pass"
    assert findings(kernel_modules=("nvidia",))["GN-GDR-01"][0].verdict == "warn"
    assert findings(kernel_modules=("ib_core",))["GN-GDR-01"][0].verdict == "skip"
    assert {f.verdict for check in ("GN-NCCL-02", "GN-GDR-01", "GN-RDMA-01")
            for f in findings("login01", kernel_modules=())[check]} == {"skip"}


@pytest.mark.parametrize("rdma", [{"kernel_modules": MLX5_MODULES}, {"nvidia_driver": False}])
def test_nccl_is_not_judged_where_no_nvidia_driver_is_loaded(rdma: dict[str, Any]) -> None:
    """A GPU node of the plan whose host has no NVIDIA driver (a lab server, a node being built):
    neither a missing nccl.env nor a missing libnccl is a warning there; the GPU is what is missing."""
    found = findings(nccl=None, **rdma)
    assert [f.verdict for f in found["GN-NCCL-01"] + found["GN-NCCL-02"]] == ["skip", "skip"]
    assert "no NVIDIA driver" in found["GN-NCCL-02"][0].evidence


def test_nccl_is_judged_where_the_driver_is_loaded_or_unknown() -> None:
    for rdma in ({"nvidia_driver": True}, {}, {"kernel_modules": ("nvidia", *MLX5_MODULES)}):
        found = findings(nccl=None, **rdma)
        assert [f.verdict for f in found["GN-NCCL-01"] + found["GN-NCCL-02"]] == ["warn", "warn"], rdma
