"""Settings computed from the Plan once: each plane's TCP congestion control with its reason, and
the MTU a plane gets when the spec names none."""

from __future__ import annotations

import pytest

from gpunet.api.plans import plan_spec
from gpunet.model.spec import default_mtu
from gpunet.model.tuning import CONGESTION_KEY, node_congestion, tcp_congestion


def test_each_plane_gets_cubic_for_its_own_reason() -> None:
    plan = plan_spec(None)  # scalable-unit: Ethernet management and oob, InfiniBand compute, RoCE storage
    chosen = {p.name: tcp_congestion(p) for p in plan.planes}
    # One host-wide key (per network namespace, not per interface): the planes must agree on it.
    assert {c.name for c in chosen.values()} == {CONGESTION_KEY}
    assert {c.value for c in chosen.values()} == {"cubic"}
    assert "site network" in chosen["management"].why
    assert "IPoIB" in chosen["compute"].why
    assert "lossless class" in chosen["storage"].why and "dctcp" in chosen["storage"].why


def test_a_node_is_told_the_planes_its_own_tcp_uses() -> None:
    plan = plan_spec(None)
    gpu, storage = plan.node("gpu001"), plan.node("stor01")
    assert gpu is not None and storage is not None
    assert [p.name for p, _ in node_congestion(plan, gpu)] == ["management", "compute", "storage"]  # not the BMC's
    assert [p.name for p, _ in node_congestion(plan, storage)] == ["management", "storage"]


@pytest.mark.parametrize(("plane", "technology", "mtu", "said"), [
    ("management", "ethernet", 1500, "gateways"),
    ("oob", "ethernet", 1500, "BMCs"),
    ("compute", "ethernet", 9000, "jumbo"),
    ("compute", "roce", 4200, "RDMA MTU (4096)"),
    ("compute", "infiniband", 4092, "IPoIB"),
    ("storage", "ethernet", 9000, "NFS"),
    ("storage", "roce", 9000, "NFS"),  # TCP storage beside RDMA: jumbo frames, RDMA still 4096
    ("storage", "infiniband", 4092, "RDMA"),  # IPoIB datagram mode cannot carry 9000
])
def test_the_default_mtu_and_why(plane: str, technology: str, mtu: int, said: str) -> None:
    got, why = default_mtu(plane, technology)
    assert got == mtu and said in why
