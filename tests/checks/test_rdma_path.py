"""The RDMA path checks on recorded node trees (tests/fixtures/node_trees: sysfs, /proc and tool outputs
of one 8-GPU, 8-NIC node, assembled from recorded outputs; see each SOURCE.md): the correct node
passes, and each fault fails exactly its own check, with its fix. Tools are served from the tree's
tools/ by a fake runner (runner injection), files are read under the tree (root injection)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpunet.checks import CHECKS, Context, Finding, run_checks
from gpunet.errors import CommandError
from gpunet.model.state import NodeState, RdmaStack
from gpunet.probe.parsers import parse_env_file
from gpunet.probe.rdma_host import GPU_BUS_IDS, read_rdma_host
from tests.checks.rdma_specs import rdma_plan

TREES = Path(__file__).parent.parent / "fixtures" / "node_trees"
# The checks of the GPU node's RDMA path, and the stack checks they sit beside.
RDMA_PATH = {"GN-AFF-01", "GN-AFF-02", "GN-AFF-03", "GN-ACS-01", "GN-GDR-01", "GN-GDR-02", "GN-GDR-03",
             "GN-QOS-01", "GN-QOS-02", "GN-QOS-03", "GN-QOS-04", "GN-QOS-05", "GN-PKEY-01", "GN-PKEY-02",
             "GN-SHARP-01", "GN-NCCL-01", "GN-RDMA-01"}


class TreeRunner:
    """Serves the tree's recorded tool outputs; any other command is 'not installed'."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
                 timeout: float = 120) -> subprocess.CompletedProcess[str]:
        name = self._file(list(argv))
        if name is None or not (self.root / "tools" / name).is_file():
            raise CommandError(" ".join(argv), 127, f"{argv[0]}: not installed")
        return subprocess.CompletedProcess(list(argv), 0, (self.root / "tools" / name).read_text(), "")

    @staticmethod
    def _file(argv: list[str]) -> str | None:
        if argv == ["nvidia-smi", "topo", "-m"]:
            return "nvidia-smi-topo-m.txt"
        if argv == ["lspci", "-vvv"]:
            return "lspci-vvv.txt"
        if argv == GPU_BUS_IDS:
            return "nvidia-smi-query-gpu-bus-id.txt"
        if argv[:2] == ["mlnx_qos", "-i"] and len(argv) == 3:
            return f"mlnx_qos-{argv[2]}.txt"
        return None


def findings(root: Path, technology: str) -> list[Finding]:
    problems: list[str] = []
    modules = tuple(line.split()[0] for line in (root / "proc/modules").read_text().splitlines())
    state = NodeState(hostname="gpu01", nccl_env=parse_env_file((root / "etc/gpunet/nccl.env").read_text()),
                      rdma=RdmaStack(kernel_modules=modules, nvidia_driver=True),
                      rdma_host=read_rdma_host(TreeRunner(root), root, problems, root / "var/log/nccl-debug.log"))
    plan = rdma_plan(technology)
    return [f for f in run_checks(Context(state=state, plan=plan, node=plan.node("gpu01"))) if f.check in RDMA_PATH]


def failing(found: list[Finding]) -> dict[str, list[Finding]]:
    result: dict[str, list[Finding]] = {}
    for f in found:
        if f.verdict in ("fail", "warn"):
            result.setdefault(f.check, []).append(f)
    return result


@pytest.fixture
def roce_tree(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TREES / "hgx-h100-roce", tmp_path / "node", symlinks=True))


@pytest.fixture
def ib_tree(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TREES / "hgx-h100-ib", tmp_path / "node", symlinks=True))


def test_every_rdma_path_check_is_registered() -> None:
    assert set(CHECKS) >= RDMA_PATH


def test_correct_roce_node_passes(roce_tree: Path) -> None:
    found = findings(roce_tree, "roce")
    assert failing(found) == {}
    passed = {f.check for f in found if f.verdict == "pass"}
    assert passed >= {"GN-AFF-01", "GN-AFF-02", "GN-AFF-03", "GN-ACS-01", "GN-GDR-01", "GN-GDR-02", "GN-GDR-03",
                      "GN-QOS-01", "GN-QOS-02", "GN-QOS-03", "GN-QOS-04", "GN-QOS-05", "GN-NCCL-01"}
    assert sum(f.check == "GN-QOS-05" and f.verdict == "pass" for f in found) == 8  # every rail's HCA


def test_correct_infiniband_node_passes(ib_tree: Path) -> None:
    found = findings(ib_tree, "infiniband")
    assert failing(found) == {}
    assert {f.check for f in found if f.verdict == "pass"} >= {"GN-PKEY-01", "GN-PKEY-02", "GN-AFF-01", "GN-ACS-01"}


def only(found: list[Finding], check: str) -> list[Finding]:
    bad = failing(found)
    assert set(bad) == {check}, {k: [(f.subject, f.observed) for f in v] for k, v in bad.items()}
    return bad[check]


def test_acs_redirect_on_a_bridge_fails_acs(roce_tree: Path) -> None:
    lspci = roce_tree / "tools/lspci-vvv.txt"
    blocks = lspci.read_text().split("\n\n")
    blocks = [re.sub(r"ACSCtl:\t\S+ \S+ \S+ \S+ \S+", "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+",
                     b) if b.startswith("31:00.0") else b for b in blocks]
    lspci.write_text("\n\n".join(blocks))
    [finding] = only(findings(roce_tree, "roce"), "GN-ACS-01")
    assert finding.subject == "GPU2 <-> mlx5_2" and "0000:31:00.0" in finding.fix and "setpci" in finding.fix


def test_rail_nic_across_sockets_fails_aff02(roce_tree: Path) -> None:
    """The recorded topology with NIC3 and NIC4 swapped in its legend: GPU3's rail NIC sits on the other
    socket (and GPU4's)."""
    topo = roce_tree / "tools/nvidia-smi-topo-m.txt"
    text = topo.read_text().replace("NIC3: mlx5_3", "NIC3: mlx5_X").replace("NIC4: mlx5_4", "NIC4: mlx5_3")
    topo.write_text(text.replace("NIC3: mlx5_X", "NIC3: mlx5_4"))
    bad = only(findings(roce_tree, "roce"), "GN-AFF-02")
    assert {f.subject for f in bad} == {"GPU3 rail 3 (mlx5_3)", "GPU4 rail 4 (mlx5_4)"}
    assert all(f.observed == "SYS" and "other CPU socket" in f.fix for f in bad)


def test_rail_nic_not_nearest_fails_aff01(roce_tree: Path) -> None:
    topo = roce_tree / "tools/nvidia-smi-topo-m.txt"
    text = topo.read_text().replace("NIC0: mlx5_0", "NIC0: mlx5_X").replace("NIC1: mlx5_1", "NIC1: mlx5_0")
    topo.write_text(text.replace("NIC0: mlx5_X", "NIC0: mlx5_1"))
    bad = only(findings(roce_tree, "roce"), "GN-AFF-01")
    assert {f.subject for f in bad} == {"GPU0 rail 0 (mlx5_0)", "GPU1 rail 1 (mlx5_1)"}
    assert "nics.compute.hcas: [mlx5_1, mlx5_0, mlx5_2" in bad[0].fix


def test_pfc_off_on_the_roce_priority_fails_qos02(roce_tree: Path) -> None:
    qos = roce_tree / "tools/mlnx_qos-ens5np0.txt"
    qos.write_text(qos.read_text().replace("enabled     0   0   0   1", "enabled     0   0   0   0"))
    [finding] = only(findings(roce_tree, "roce"), "GN-QOS-02")
    assert finding.subject == "ens5np0" and "--pfc 0,0,0,1,0,0,0,0" in finding.fix


def test_ecn_off_fails_qos04(roce_tree: Path) -> None:
    (roce_tree / "sys/class/net/ens2np0/ecn/roce_np/enable/3").write_text("0\n")
    [finding] = only(findings(roce_tree, "roce"), "GN-QOS-04")
    assert finding.observed == "np off, rp on" and "roce_np|roce_rp/enable/3" in finding.fix


def test_wrong_gid_index_fails_qos05(roce_tree: Path) -> None:
    """mlx5_6 with two more link-local GIDs ahead (an extra IPv6 address): IPv4 RoCE v2 moves to index 5."""
    port = roce_tree / "sys/class/infiniband/mlx5_6/ports/1"
    gids = [(port / "gids" / str(n)).read_text() for n in range(4)]
    types = [(port / "gid_attrs/types" / str(n)).read_text() for n in range(4)]
    extra = "fe80:0000:0000:0000:1186:a6b1:3f0b:c441\n"
    for n, (gid, kind) in enumerate([(gids[0], types[0]), (gids[1], types[1]), (extra, types[0]),
                                     (extra, types[1]), (gids[2], types[2]), (gids[3], types[3])]):
        (port / "gids" / str(n)).write_text(gid)
        (port / "gid_attrs/types" / str(n)).write_text(kind)
    [finding] = only(findings(roce_tree, "roce"), "GN-QOS-05")
    assert finding.subject == "mlx5_6" and "NCCL_IB_GID_INDEX=5" in finding.fix


def test_wrong_pkey_fails_pkey01(ib_tree: Path) -> None:
    (ib_tree / "sys/class/infiniband/mlx5_4/ports/1/pkeys/1").write_text("0x8002\n")
    bad = only(findings(ib_tree, "infiniband"), "GN-PKEY-01")
    assert [f.subject for f in bad] == ["mlx5_4/1"] and "partition 0x0001" in bad[0].fix


def test_nccl_ib_hca_not_following_affinity_fails_aff03(roce_tree: Path) -> None:
    """The job's recorded log says NCCL_IB_HCA=mlx5_1..mlx5_8: GPU0's NIC is left out, mlx5_8 is no NIC here."""
    shutil.copy(TREES.parent / "nccl_debug_log/ray_roce_ib_hca_list/output.txt", roce_tree / "var/log/nccl-debug.log")
    found = findings(roce_tree, "roce")
    [finding] = only([f for f in found if f.check != "GN-GDR-03"], "GN-AFF-03")
    assert "missing mlx5_0" in finding.observed and "not on this node: mlx5_8" in finding.observed
    assert finding.fix.startswith("set NCCL_IB_HCA==mlx5_0:1,")


def sharp_findings(ib_tree: Path, collnet_line: str | None) -> list[Finding]:
    """The IB node on a plane that offers SHARP, with the recorded log and, where given, one more line."""
    log = ib_tree / "var/log/nccl-debug.log"
    if collnet_line:
        log.write_text(log.read_text() + collnet_line + "\n")
    plan = rdma_plan("infiniband")
    plan = plan.model_copy(update={"planes": tuple(p.model_copy(update={"sharp": p.name == "compute"})
                                                   for p in plan.planes)})
    problems: list[str] = []
    state = NodeState(hostname="gpu01", rdma_host=read_rdma_host(TreeRunner(ib_tree), ib_tree, problems, log))
    return [f for f in run_checks(Context(state=state, plan=plan, node=plan.node("gpu01")))
            if f.check == "GN-SHARP-01"]


def test_sharp_offered_but_not_used_warns(ib_tree: Path) -> None:
    [finding] = sharp_findings(ib_tree, None)
    assert finding.verdict == "warn" and "NCCL_COLLNET_ENABLE=1" in finding.fix


def test_sharp_used_passes(ib_tree: Path) -> None:
    """A CollNet channel line in the form NCCL prints network channels (constructed: no recorded log with
    CollNet was found; see the report)."""
    line = "gpu01:523:564 [0] NCCL INFO CollNet 00/0 : 0 [receive] via COLLNET/IB/0/GDRDMA"
    [finding] = sharp_findings(ib_tree, line)
    assert finding.verdict == "pass"
