"""Every rendered file of every built-in example (one node per group) is accepted by the real
tool that reads it, and each tool is shown rejecting a deliberately broken file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.render import validators as v
from tests.render.rendered import by_node, files_matching, node_files, rendered, text_of

root = pytest.mark.lab  # needs root: namespaces, mount namespaces, nft


def ids(cases: list[tuple[str, str]]) -> list[str]:
    return [f"{example}:{path}" for example, path in cases]


NETPLAN = files_matching("60-gpunet.yaml")


@pytest.mark.skipif(bool(v.need("netplan")), reason=str(v.need("netplan")))
@pytest.mark.parametrize(("example", "path"), NETPLAN, ids=ids(NETPLAN))
def test_netplan_generate_accepts(tmp_path: Path, example: str, path: str, text: str) -> None:
    done = v.netplan_generate(tmp_path, text)
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert list((tmp_path / "run/systemd/network").glob("*.network"))


@pytest.mark.skipif(bool(v.need("netplan")), reason=str(v.need("netplan")))
def test_netplan_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = text_of(*NETPLAN[0]).replace("mtu:", "mtuu:", 1)
    done = v.netplan_generate(tmp_path, broken)
    assert done.returncode != 0 and "mtuu" in done.stderr


NFT = files_matching("gpunet.nft")


@root
@pytest.mark.parametrize(("example", "path"), NFT, ids=ids(NFT))
def test_nft_check_accepts(example: str, path: str, text: str) -> None:
    with v.netns(f"gnnft{os.getpid()}") as ns:
        done = v.run("ip", "netns", "exec", ns, "nft", "-c", "-f", "-", stdin=text)
    assert done.returncode == 0, done.stderr


@root
def test_nft_rejects_a_broken_ruleset() -> None:
    broken = text_of(*NFT[0]).replace("tcp dport 22", "tcp dport ssh-ish")
    with v.netns(f"gnnft{os.getpid()}") as ns:
        done = v.run("ip", "netns", "exec", ns, "nft", "-c", "-f", "-", stdin=broken)
    assert done.returncode != 0


SSHD = files_matching("50-gpunet.conf")


@pytest.mark.skipif(bool(v.need("/usr/sbin/sshd")), reason=str(v.need("/usr/sbin/sshd")))
@pytest.mark.parametrize(("example", "path"), SSHD, ids=ids(SSHD))
def test_sshd_t_accepts(tmp_path: Path, example: str, path: str, text: str) -> None:
    done = v.sshd_check(tmp_path, text)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(bool(v.need("/usr/sbin/sshd")), reason=str(v.need("/usr/sbin/sshd")))
def test_sshd_t_rejects_a_broken_dropin(tmp_path: Path) -> None:
    broken = text_of(*SSHD[0]).replace("PermitRootLogin prohibit-password", "PermitRootLogin maybe")
    done = v.sshd_check(tmp_path, broken)
    assert done.returncode != 0 and 'unsupported option "maybe"' in done.stderr


SSH_CONFIG = files_matching("admin/ssh_config")


@pytest.mark.parametrize(("example", "path"), SSH_CONFIG, ids=ids(SSH_CONFIG))
def test_ssh_g_reads_the_admin_config(tmp_path: Path, example: str, path: str, text: str) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(text)
    first = next(line.split()[1] for line in text.splitlines() if line.startswith("Host ") and "*" not in line)
    done = v.run("ssh", "-G", "-F", str(config), first.replace("?", "0"))
    assert done.returncode == 0, done.stderr
    assert "serveraliveinterval 30" in done.stdout and "controlmaster auto" in done.stdout


def test_ssh_g_rejects_a_broken_config(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(text_of(*SSH_CONFIG[0]) + "    ServerAliveIntervall 30\n")
    assert v.run("ssh", "-G", "-F", str(config), "x").returncode != 0


FIREWALLD = by_node("firewalld/zones/")


@root
@pytest.mark.skipif(bool(v.need("firewall-offline-cmd")), reason=str(v.need("firewall-offline-cmd")))
@pytest.mark.parametrize(("example", "node"), FIREWALLD, ids=[f"{e}:{n}" for e, n in FIREWALLD])
def test_firewalld_offline_check_accepts(tmp_path: Path, example: str, node: str) -> None:
    done = v.firewalld_check(tmp_path, node_files(example, node, "firewalld/zones/"))
    assert done.returncode == 0, done.stdout + done.stderr


@root
@pytest.mark.skipif(bool(v.need("firewall-offline-cmd")), reason=str(v.need("firewall-offline-cmd")))
def test_firewalld_rejects_a_broken_zone(tmp_path: Path) -> None:
    zones = {name: text.replace("<accept/>", "<accept/><bogus/>")
             for name, text in node_files(*FIREWALLD[0], "firewalld/zones/").items()}
    done = v.firewalld_check(tmp_path, zones)
    assert done.returncode != 0 and "bogus" in done.stdout + done.stderr


SYSCTL_NET = files_matching("90-gpunet-net.conf")
HOST_ONLY_CONGESTION = 'sysctl: setting key "net.ipv4.tcp_congestion_control": Operation not permitted'


@root
@pytest.mark.parametrize(("example", "path"), SYSCTL_NET, ids=ids(SYSCTL_NET))
def test_sysctl_p_applies_in_a_fresh_namespace(tmp_path: Path, example: str, path: str, text: str) -> None:
    conf = tmp_path / "90-gpunet-net.conf"
    conf.write_text(text)
    with v.netns(f"gnsys{os.getpid()}") as ns:
        done = v.run("ip", "netns", "exec", ns, "sysctl", "-p", str(conf))
        rmem = v.run("ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.tcp_rmem").stdout.split()
    refused = [line for line in done.stderr.splitlines() if line.strip()]
    if refused == [HOST_ONLY_CONGESTION]:
        # Linux lets only the host's own namespace (where a node's file is applied) choose a default
        # outside net.ipv4.tcp_allowed_congestion_control; the algorithm must still be one it has
        chosen = next(line.split("=")[1].strip() for line in text.splitlines()
                      if line.startswith("net.ipv4.tcp_congestion_control"))
        kernel = Path("/proc/sys/net/ipv4")
        assert chosen in (kernel / "tcp_available_congestion_control").read_text().split()
        assert chosen not in (kernel / "tcp_allowed_congestion_control").read_text().split()
        refused = []
    assert not refused and (done.returncode == 0 or done.stderr), done.stderr
    assert rmem[-1] in text  # the value really landed


@root
def test_sysctl_p_rejects_a_broken_file(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text(text_of(*SYSCTL_NET[0]) + "net.ipv4.tcp_rmemm = 1\n")
    with v.netns(f"gnsys{os.getpid()}") as ns:
        assert v.run("ip", "netns", "exec", ns, "sysctl", "-p", str(conf)).returncode != 0


@pytest.mark.parametrize(("example", "path"), files_matching("91-gpunet-host.conf")[:1])
def test_host_wide_sysctl_keys_exist(example: str, path: str, text: str) -> None:
    """Keys outside network namespaces are checked against this kernel, read-only (never set)."""
    keys = [line.split("=")[0].strip() for line in text.splitlines() if "=" in line and not line.startswith("#")]
    assert keys
    for key in keys:
        assert Path("/proc/sys", *key.split(".")).exists(), key


NCCL = files_matching("nccl.env")


@pytest.mark.parametrize(("example", "path"), NCCL, ids=ids(NCCL))
def test_nccl_env_is_valid_bash_and_sets_what_it_says(tmp_path: Path, example: str, path: str, text: str) -> None:
    env_file = tmp_path / "nccl.env"
    env_file.write_text(text)
    assert v.run("bash", "-n", str(env_file)).returncode == 0
    shown = v.run("env", "-i", "bash", "-c", f"set -eu; . {env_file}; env")
    assert shown.returncode == 0, shown.stderr
    exported = {line.split("=", 1)[0] for line in shown.stdout.splitlines() if line.startswith("NCCL_")}
    assert exported == {line.split()[1].split("=")[0] for line in text.splitlines() if line.startswith("export ")}


def test_bash_n_rejects_a_broken_env_file(tmp_path: Path) -> None:
    env_file = tmp_path / "nccl.env"
    env_file.write_text('export NCCL_IB_HCA="=mlx5_0:1\n')
    assert v.run("bash", "-n", str(env_file)).returncode != 0


NM = by_node("NetworkManager/system-connections/")


@pytest.mark.skipif(bool(v.nm_available()), reason=str(v.nm_available()))
@pytest.mark.parametrize(("example", "node"), NM, ids=[f"{e}:{n}" for e, n in NM])
def test_libnm_reads_and_verifies_keyfiles(tmp_path: Path, example: str, node: str) -> None:
    done = v.nm_check(tmp_path, node_files(example, node, "NetworkManager/system-connections/"))
    assert done.returncode == 0, done.stdout


@pytest.mark.skipif(bool(v.nm_available()), reason=str(v.nm_available()))
def test_libnm_rejects_a_broken_keyfile(tmp_path: Path) -> None:
    keyfiles = node_files(*NM[0], "NetworkManager/system-connections/")
    name, text = next((k, t) for k, t in keyfiles.items() if "type=ethernet" in t)
    done = v.nm_check(tmp_path, {name: text.replace("type=ethernet", "type=vlan")})
    assert done.returncode != 0


ANSIBLE = sorted({example for example, _ in files_matching("ansible/site.yml")})


def ansible_dir(tmp_path: Path, example: str) -> Path:
    target = tmp_path / "ansible"
    target.mkdir()
    for path, text in rendered(example).items():
        if "/ansible/" in path:
            (target / Path(path).name).write_text(text)
    return target


@pytest.mark.skipif(bool(v.need("ansible-playbook")), reason=str(v.need("ansible-playbook")))
@pytest.mark.parametrize("example", ANSIBLE)
def test_ansible_syntax_check_and_inventory(tmp_path: Path, example: str) -> None:
    """`--list-hosts` loads the playbook as `--syntax-check` does (a broken one fails it the same
    way) and then reads the inventory, so one run shows both and that the canary group holds the
    hosts gpunet put there: a second run (`ansible-inventory --list`) parsed the whole inventory again,
    5 s of CPU for multi-unit-large's 1 026 hosts."""
    where = ansible_dir(tmp_path, example)
    canary = sorted(yaml.safe_load((where / "inventory.yml").read_text())["all"]["children"]["canary"]["hosts"])
    listed = v.run("ansible-playbook", "--list-hosts", "--limit", "canary", "-i", "inventory.yml", "site.yml",
                   cwd=where)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    hosts = listed.stdout.split(f"hosts ({len(canary)}):", 1)
    assert canary and len(hosts) == 2 and sorted(hosts[1].split()) == canary, listed.stdout


@pytest.mark.skipif(bool(v.need("ansible-playbook")), reason=str(v.need("ansible-playbook")))
def test_ansible_rejects_a_broken_playbook(tmp_path: Path) -> None:
    # the playbook is the same for every example: the smallest inventory keeps ansible's start short
    where = ansible_dir(tmp_path, "one-server" if "one-server" in ANSIBLE else ANSIBLE[0])
    site = where / "site.yml"
    site.write_text(site.read_text().replace("max_fail_percentage", "max_fail_percent"))
    check = v.run("ansible-playbook", "--syntax-check", "-i", "inventory.yml", "site.yml", cwd=where)
    assert check.returncode != 0


CHRONY = files_matching("chrony/conf.d/gpunet.conf")


@pytest.mark.skipif(bool(v.need("chronyd")), reason=str(v.need("chronyd")))
@pytest.mark.parametrize(("example", "path"), CHRONY, ids=ids(CHRONY))
def test_chronyd_reads_the_sources(tmp_path: Path, example: str, path: str, text: str) -> None:
    (tmp_path / "chrony.conf").write_text(text)
    done = v.run("chronyd", "-p", "-f", str(tmp_path / "chrony.conf"))  # -p: print the configuration and exit
    assert done.returncode == 0, done.stderr
    servers = [line for line in text.splitlines() if line.startswith("server ")]
    assert [line for line in done.stdout.splitlines() if line.startswith("server ")] == servers


@pytest.mark.skipif(bool(v.need("chronyd")), reason=str(v.need("chronyd")))
def test_chronyd_rejects_a_broken_source(tmp_path: Path) -> None:
    (tmp_path / "chrony.conf").write_text("server 198.18.0.123 iburstt\n")
    assert v.run("chronyd", "-p", "-f", str(tmp_path / "chrony.conf")).returncode != 0
