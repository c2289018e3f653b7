"""sshd in every lab server, keys only, with one generated lab key."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpunet.runner import CommandRunner

SSHD = "/usr/sbin/sshd"
CONFIG = """\
# gpunet lab sshd: keys only, root by key, nothing else.
Port 22
HostKey {dir}/ssh_host_ed25519_key
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes yes
ClientAliveInterval 15
ClientAliveCountMax 4
MaxStartups 100:30:200
# scp (OpenSSH >= 9.0 speaks SFTP) and IDEs copy files over this, as on a real server.
Subsystem sftp internal-sftp
"""


def write_ssh_files(directory: Path, run: CommandRunner) -> None:
    """The lab's client key (authorized everywhere), one host key, and the sshd config."""
    for key in ("id_ed25519", "ssh_host_ed25519_key"):
        if not (directory / key).exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"gpunet-lab-{directory.name}",
                 "-f", str(directory / key)])
    (directory / "authorized_keys").write_text((directory / "id_ed25519.pub").read_text())
    (directory / "authorized_keys").chmod(0o600)
    (directory / "sshd_config").write_text(CONFIG.format(dir=directory))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    (directory / "run").mkdir(exist_ok=True)


def start_sshd(
    directory: Path, node: str, address: str, *, etc: Path, prefix: Sequence[str], run: CommandRunner,
    own_tree: bool = True,
) -> None:
    """sshd with its config at the device's own /etc/ssh (etc: /etc/netns/<ns>, which `ip netns
    exec` mounts over /etc), so `sshd -T` in it shows the effective settings. A server's (own_tree)
    first includes the drop-ins of the server's own tree (`gpunet apply --lab` writes the rendered
    one there), as Debian's sshd_config does: the first value of a keyword wins. A switch's has none
    (apply configures servers)."""
    pid_file = sshd_pid_file(directory, node)
    include = ""
    if own_tree:
        drop_ins = server_root(directory, node) / "etc/ssh/sshd_config.d"
        drop_ins.mkdir(parents=True, exist_ok=True)
        include = f"Include {drop_ins}/*.conf\n"
    config = include + CONFIG.format(dir=directory) + f"ListenAddress {address}\nPidFile {pid_file}\n"
    (etc / "ssh").mkdir(parents=True, exist_ok=True)
    (etc / "ssh" / "sshd_config").write_text(config)
    run([*prefix, SSHD])


def sshd_pid_dir(directory: Path) -> Path:
    """Where each lab server's sshd keeps its pid file, <node>.sshd.pid (apply reloads it by it)."""
    return directory / "run"


def sshd_pid_file(directory: Path, node: str) -> Path:
    return sshd_pid_dir(directory) / f"{node}.sshd.pid"


def servers_root(directory: Path) -> Path:
    """Where every lab server's own file tree lies (`server_root`)."""
    return directory / "root"


def server_root(directory: Path, node: str) -> Path:
    """A lab server's own file tree (its /etc/netplan, /etc/nftables.d, ...): the servers share
    this machine's filesystem, so what `gpunet apply` writes for one goes here, never to /etc."""
    return servers_root(directory) / node


def ssh_argv(directory: Path, address: str, command: Sequence[str]) -> list[str]:
    """An ssh command line that reaches a lab server with the lab key and nothing else."""
    return ["ssh", "-i", str(directory / "id_ed25519"), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "-o", "ConnectTimeout=5", f"root@{address}", *command]
