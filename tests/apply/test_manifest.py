"""What the agent is told: per render target, the real tools on a node, the lab's stand-ins in a
lab; batches; the key-installation script run for real against a temporary home."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from gpunet.api import plan_spec
from gpunet.apply import _node_dry_run
from gpunet.apply.keys import INSTALL_SCRIPT, read_public_key
from gpunet.apply.manifest import DEFAULT_TARGETS, Where, node_manifest
from gpunet.apply.remote import Reply
from gpunet.apply.rollout import batches_of
from gpunet.errors import UsageError
from gpunet.lab.blueprint import build_blueprint
from gpunet.lab.slice import slice_plan
from gpunet.node import runtime
from gpunet.render import netplan
from gpunet.spec.plan import plan_of
from tests.lab.helpers import SMALL

PLAN = plan_spec(SMALL)


def _manifest(where: Where, targets: tuple[str, ...] = DEFAULT_TARGETS) -> dict:  # type: ignore[type-arg]
    node = PLAN.node("gpu1")
    assert node is not None
    return node_manifest(PLAN, node, targets, where, txid="abcdef123456", token="t", timeout_s=120)


def test_a_real_node_gets_its_own_tools_and_private_netplan() -> None:
    manifest = _manifest(Where())
    by_name = {t["name"]: t for t in manifest["targets"]}
    assert by_name["netplan"]["apply"] == [{"run": ["netplan", "apply"]}]
    assert by_name["netplan"]["check"] == [{"run": ["netplan", "generate"]}]
    assert by_name["sshd"]["check"] == [{"run": ["sshd", "-t"]}]
    assert "net.core.rmem_max" in by_name["sysctl"]["sysctl_values"]  # the host-wide file too
    modes = {f["path"]: f["mode"] for f in manifest["files"]}
    assert modes["etc/netplan/60-gpunet.yaml"] == 0o600 and modes["etc/ssh/sshd_config.d/50-gpunet.conf"] == 0o644
    # the revert of the firewall never flushes other tables
    assert by_name["nftables"]["revert"][1]["stdin"] == "table inet gpunet\ndelete table inet gpunet\n"


def test_a_lab_server_gets_ip_commands_and_only_per_namespace_sysctls() -> None:
    manifest = _manifest(Where(lab_root="/run/gpunet/labs/zz/root", sshd_pid_dir="/run/gpunet/labs/zz/run"))
    by_name = {t["name"]: t for t in manifest["targets"]}
    assert by_name["netplan"]["ip_state"]["links"]["eth0"]["mtu"] == 1500
    assert by_name["sshd"]["apply"][0]["run"][-1] == "/run/gpunet/labs/zz/run/gpu1.sshd.pid"
    assert "net.core.rmem_max" not in by_name["sysctl"]["sysctl_values"]
    assert "net.ipv4.tcp_rmem" in by_name["sysctl"]["sysctl_values"]


def test_a_lab_server_gets_netplans_per_nic_tables_and_rules_read_from_the_rendered_file() -> None:
    """The default example's eight rails share a subnet: netplan gives each its table and rule, and
    so does the lab's stand-in, from the same rendered file."""
    lab_plan = build_blueprint(slice_plan(plan_of(None), 10), "zz00", 3).lab_plan
    node = lab_plan.nodes[0]
    manifest = node_manifest(lab_plan, node, ("netplan",), Where(lab_root="/x", sshd_pid_dir="/y"), txid="abcdef123456",
                             token="t", timeout_s=120)
    rendered = yaml.safe_load(manifest["files"][0]["content"])["network"]["ethernets"]
    assert manifest["files"][0]["path"] == netplan.PATH
    state = manifest["targets"][0]["ip_state"]
    policy = {dev: conf["routing-policy"] for dev, conf in rendered.items() if "routing-policy" in conf}
    assert len(policy) == 8  # ib0-ib7
    assert state["rules"] == [{"src": entry["from"], "dst": None, "table": entry["table"], "priority": None}
                              for entries in policy.values() for entry in entries]
    lines = runtime.ip_batch_lines(state, [])
    for dev, conf in rendered.items():
        for route in (r for r in conf.get("routes", []) if "table" in r):
            assert (f"route replace {route['to']} dev {dev} table {route['table']} scope link src {route['from']} "
                    f"proto static") in lines
        for entry in policy.get(dev, []):
            assert f"rule add from {entry['from']}/32 table {entry['table']}" in lines


def test_unknown_targets_and_bad_batches_are_refused() -> None:
    with pytest.raises(UsageError, match="apply knows"):
        _manifest(Where(), ("firewalld-typo",))
    assert batches_of(["a", "b", "c", "d", "e"], 1, 2) == [["a"], ["b", "c"], ["d", "e"]]
    assert batches_of(["a", "b"], 0, 8) == [["a", "b"]]
    with pytest.raises(UsageError):
        batches_of(["a"], 1, 0)


def test_install_key_appends_once_with_the_key_on_stdin(tmp_path: Path) -> None:
    pub = tmp_path / "id.pub"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True)
    line = read_public_key(pub)
    home = tmp_path / "home"
    home.mkdir()
    for _ in range(2):
        subprocess.run(["sh", "-c", INSTALL_SCRIPT], input=line + "\n", text=True, check=True,
                       env={**os.environ, "HOME": str(home)})
    keys = home / ".ssh" / "authorized_keys"
    assert keys.read_text() == line + "\n" and keys.stat().st_mode & 0o777 == 0o600
    for bad in ("ssh-ed25519 AAAA; touch /tmp/x", "-----BEGIN OPENSSH PRIVATE KEY-----", "ssh-ed25519 AAAA\nssh-rsa B"):
        (tmp_path / "bad.pub").write_text(bad)
        with pytest.raises(UsageError):
            read_public_key(tmp_path / "bad.pub")


def test_the_dry_run_diffs_each_file_and_names_sysctl_changes_and_commands() -> None:
    manifest = _manifest(Where())
    netplan = next(f for f in manifest["files"] if f["path"] == "etc/netplan/60-gpunet.yaml")
    current = {f["path"]: f["content"] for f in manifest["files"]} | {
        "etc/netplan/60-gpunet.yaml": netplan["content"].replace("mtu: 9000", "mtu: 1500"),
        "etc/nftables.d/gpunet.nft": None}
    reply = Reply("gpu1", {"files": current, "sysctl": {"net.ipv4.tcp_mtu_probing": "0",
                                                         "net.core.somaxconn": "8192"}, "host": "gpu1"})
    result = _node_dry_run("gpu1", manifest, reply)
    changed = {f.path: f.diff for f in result.files if f.diff}
    assert set(changed) == {"etc/netplan/60-gpunet.yaml", "etc/nftables.d/gpunet.nft"}
    assert "-      mtu: 1500\n+      mtu: 9000" in changed["etc/netplan/60-gpunet.yaml"]
    assert changed["etc/nftables.d/gpunet.nft"].startswith("--- /dev/null")
    assert "net.ipv4.tcp_mtu_probing: 0 -> 1" in result.sysctl
    assert not any(line.startswith("net.core.somaxconn") for line in result.sysctl)  # already as planned
    assert "netplan: netplan apply" in result.runtime and "sshd: sshd -t" in result.runtime
    assert _node_dry_run("gpu1", manifest, Reply("gpu1", {}, error="unreachable: timed out")).error
