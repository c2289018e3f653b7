"""The admin ssh_config as ssh itself reads it (`ssh -G`): every node of the example resolves to its
management address, the admin user and key, through the bastion (the bastion directly), with
keep-alives; the dashboards entry forwards Grafana and Prometheus."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpunet.render.ssh import SshClient, render_ssh_config
from tests.render.rendered import example_plan

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs ssh (openssh-client)")


def _resolved(config: Path, host: str) -> dict[str, list[str]]:
    out = subprocess.run(["ssh", "-G", "-F", str(config), host], capture_output=True, text=True, check=True).stdout
    options: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        options.setdefault(key, []).append(value)
    return options


def test_ssh_resolves_every_node_as_planned(tmp_path: Path) -> None:
    plan = example_plan("scalable-unit")
    config = tmp_path / "ssh_config"
    config.write_text(render_ssh_config(plan))
    for node in plan.nodes:
        got = _resolved(config, node.name)
        jump = "none" if node.name == plan.site.bastion else plan.site.bastion
        assert (got["hostname"], got["user"], got["identityfile"], got.get("proxyjump", ["none"])) == (
            [node.management_ip], [plan.site.admin_user], ["~/.ssh/id_ed25519"], [jump]), node.name
        assert (got["serveraliveinterval"], got["serveralivecountmax"], got["controlmaster"]) == (
            ["30"], ["4"], ["auto"])
        assert got["identitiesonly"] == ["yes"] and got["stricthostkeychecking"] == ["accept-new"]


def test_the_dashboards_entry_forwards_grafana_and_prometheus(tmp_path: Path) -> None:
    plan = example_plan("scalable-unit")
    config = tmp_path / "ssh_config"
    config.write_text(render_ssh_config(plan, SshClient(identity_file="/keys/admin", known_hosts="/keys/known")))
    got = _resolved(config, f"{plan.site.name}-dashboards")
    assert got["hostname"] == [str(plan.site.monitoring.network_address)]  # type: ignore[union-attr]
    assert got["proxyjump"] == [plan.site.bastion] and got["identityfile"] == ["/keys/admin"]
    assert sorted(got["localforward"]) == ["3000 [127.0.0.1]:3000", "9090 [127.0.0.1]:9090"]
    assert got["exitonforwardfailure"] == ["yes"] and got["userknownhostsfile"] == ["/keys/known"]


def test_an_ide_reading_the_users_own_config_sees_the_same(tmp_path: Path) -> None:
    """VS Code and PyCharm read ~/.ssh/config: the README's lines there (the user's own override
    first: ssh keeps the first value; then `Match all`, as an Include under a Host line would only
    apply to that host) resolve the same node."""
    plan = example_plan("small-ethernet")
    rendered = tmp_path / "gpunet_ssh_config"
    rendered.write_text(render_ssh_config(plan))
    users = tmp_path / "config"
    users.write_text(f"Host login01\n    HostName login.example.org\n\nMatch all\nInclude {rendered}\n")
    node = plan.nodes[0]
    got = _resolved(users, node.name)
    assert got["hostname"] == [node.management_ip] and got["proxyjump"] == ["login01"]
    assert _resolved(users, "login01")["hostname"] == ["login.example.org"]
