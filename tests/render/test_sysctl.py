"""90-gpunet-net.conf: the congestion-control key once, with each plane's reason beside it."""

from __future__ import annotations

from gpunet.api.plans import plan_spec
from gpunet.render.sysctl import render_sysctl_net


def test_the_congestion_control_key_is_set_once_with_every_planes_reason() -> None:
    plan = plan_spec(None)
    node = plan.node("gpu001")
    assert node is not None
    text = render_sysctl_net(plan, node)
    settings = [line for line in text.splitlines() if line.startswith("net.ipv4.tcp_congestion_control")]
    assert settings == ["net.ipv4.tcp_congestion_control = cubic"]
    assert "bbr" not in text.replace("BBR", "")  # named only as a reason against it
    said = [line for line in text.splitlines() if line.startswith("#   ") and line[4] != " "]  # a plane, not its wrap
    assert [line.split()[1] for line in said] == ["management", "compute", "storage"]
    assert "per network namespace, not per" in text
    assert all(len(line) <= 100 for line in text.splitlines() if line.startswith("#"))
