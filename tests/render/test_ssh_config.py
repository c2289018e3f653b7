"""The admin ssh_config as ssh itself reads it (`ssh -G`): every node of the example resolves to its
management address, the admin user and key, through the bastion (the bastion directly), with
keep-alives; the dashboards entry forwards Grafana and Prometheus; included from a user's config as
the README says, it changes nothing for any other host, and a plan's name never widens its patterns."""

from __future__ import annotations

import re
import shutil
import subprocess
from fnmatch import fnmatchcase
from ipaddress import IPv4Address
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gpunet.errors import UsageError
from gpunet.model.plan import Node, Plan
from gpunet.render.ssh import HOST_LINE_CHARS, SshClient, address_patterns, render_ssh_config
from tests.render.rendered import example_plan

README = Path(__file__).parents[2] / "README.md"

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


def _readme_users_config(rendered: Path) -> str:
    """The README's ~/.ssh/config block, its Include pointed at `rendered`."""
    block = re.search(r"```\n(# ~/\.ssh/config:.*?)```", README.read_text(), re.DOTALL)
    assert block is not None, "README.md: the ~/.ssh/config example is gone"
    text, count = re.subn(r"^Include \S+$", f"Include {rendered}", block.group(1), flags=re.MULTILINE)
    assert count == 1, text
    return text


# Hosts that are not the cluster's: near misses of its names, addresses and domain included.
OUTSIDE = ("example.org", "gpu0011", "gpu01", "gpu001.example.org", "login03", "su1.example", "198.18.0.1",
           "198.18.0.40", "198.18.0.251", "198.18.1.2", "other-dashboards")


def test_an_include_as_the_readme_says_changes_nothing_for_other_hosts(tmp_path: Path) -> None:
    plan = example_plan("scalable-unit")
    rendered = tmp_path / "gpunet_ssh_config"
    rendered.write_text(render_ssh_config(plan))
    users = tmp_path / "config"
    users.write_text(_readme_users_config(rendered))
    without = tmp_path / "config_without_the_include"
    without.write_text(users.read_text().replace(f"Include {rendered}", ""))
    for host in OUTSIDE:
        assert _resolved(users, host) == _resolved(without, host), host
    settings = {"user": [plan.site.admin_user], "identityfile": ["~/.ssh/id_ed25519"], "identitiesonly": ["yes"],
                "controlmaster": ["auto"], "controlpersist": ["600"],
                "stricthostkeychecking": ["accept-new"], "serveraliveinterval": ["30"]}
    for host in ("gpu001", "gpu001.su1.example", "198.18.0.2", "su1-dashboards", "login01"):
        got = _resolved(users, host)
        assert {key: got.get(key) for key in settings} == settings, host
        assert got.get("proxyjump") == (None if host == "login01" else ["login01"]), host
        assert "/.ssh/cm-" in got["controlpath"][0], host  # ssh -G shows it expanded (%C: a hash)
    assert _resolved(users, "gpu001.su1.example")["hostname"] == ["198.18.0.2"]
    assert _resolved(users, "login01")["hostname"] == ["login.example.org"]  # the user's own value first


@pytest.mark.parametrize("hostile", ["gpu*", "gpu?", "!gpu001", "gpu001,example.org", "gpu001 *", "gpu001\nHost *"])
def test_a_name_never_becomes_a_pattern_or_a_line(hostile: str) -> None:
    """The model refuses such a name where a plan is read; the renderer refuses it again (a plan built
    in code, model_copy, skips validation), as a node and as the bastion."""
    plan = example_plan("scalable-unit")
    with pytest.raises(ValidationError):
        Node.model_validate({**plan.nodes[0].model_dump(), "name": hostile})
    renamed = (plan.nodes[0].model_copy(update={"name": hostile}), *plan.nodes[1:])
    with pytest.raises(UsageError, match="node name"):
        render_ssh_config(plan.model_copy(update={"nodes": renamed}))
    with pytest.raises(UsageError, match=r"site\.bastion"):
        render_ssh_config(plan.model_copy(update={"site": plan.site.model_copy(update={"bastion": hostile})}))


def _plan_of(plan: Plan, count: int) -> Plan:
    """`count` nodes (login01, then gpu00001...) at consecutive management addresses from 198.18.0.2."""
    template = plan.nodes[0]
    management = next(i for i in template.interfaces if i.plane == "management")
    nodes = tuple(template.model_copy(update={
        "name": "login01" if index == 0 else f"gpu{index:05d}",
        "interfaces": (management.model_copy(update={"address": f"{IPv4Address('198.18.0.2') + index}/16"}),)})
        for index in range(count))
    return plan.model_copy(update={"nodes": nodes})


def test_12500_nodes_make_short_lines_that_still_name_only_them(tmp_path: Path) -> None:
    plan = _plan_of(example_plan("scalable-unit"), 12_500)
    text = render_ssh_config(plan)
    lines = text.splitlines()
    assert max(map(len, lines)) <= HOST_LINE_CHARS
    # Two lines a node (its entry), and its name and FQDN in a list of ~30 nodes a line, each list with
    # its dozen settings; the 12,500 addresses, 49 runs of /24, fold into a handful of lines.
    assert len(lines) < 2.6 * len(plan.nodes)
    config = tmp_path / "ssh_config"
    config.write_text(text)
    last = IPv4Address("198.18.0.2") + 12_499
    for host, address in [("gpu00001", "198.18.0.3"), ("gpu00254", "198.18.1.0"), ("gpu00255", "198.18.1.1"),
                          ("gpu12499", str(last)), (f"gpu06000.{plan.site.domain}", "198.18.23.114")]:
        got = _resolved(config, host)
        assert (got["hostname"], got["user"], got.get("proxyjump")) == ([address], ["root"], ["login01"]), host
    for outside in ("198.18.0.1", str(last + 1), "198.18.255.2", "gpu12500"):
        assert "proxyjump" not in _resolved(config, outside), outside


@given(st.sets(st.integers(0, 255), min_size=1), st.sets(st.integers(0, 255)))
def test_address_patterns_match_exactly_the_addresses(first: set[int], second: set[int]) -> None:
    addresses = {f"10.0.7.{octet}" for octet in first} | {f"10.0.8.{octet}" for octet in second}
    patterns = address_patterns(sorted(addresses))
    every = [f"10.0.{third}.{octet}" for third in (6, 7, 8) for octet in range(256)]
    assert {a for a in every if any(fnmatchcase(a, p) for p in patterns)} == addresses
    assert len(patterns) <= len(addresses)


def test_address_patterns_fold_runs_of_addresses() -> None:
    assert address_patterns([f"10.0.0.{octet}" for octet in range(256)]) == [
        "10.0.0.?", "10.0.0.??", "10.0.0.1??", "10.0.0.2??"]
    assert address_patterns(["10.0.1.7", "10.0.0.255", *(f"10.0.0.{o}" for o in range(248, 255))]) == [
        "10.0.0.248", "10.0.0.249", "10.0.0.25?", "10.0.1.7"]
