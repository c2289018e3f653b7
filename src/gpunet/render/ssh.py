"""SSH: a hardened sshd drop-in for every node, and the admins' ssh_config for the cluster."""

from __future__ import annotations

from dataclasses import dataclass

from gpunet.model.plan import Node, Plan
from gpunet.render.common import header
from gpunet.render.grafana import PROMETHEUS_PORT
from gpunet.render.quote import token

SSHD_PATH = "etc/ssh/sshd_config.d/50-gpunet.conf"
SSH_CONFIG_PATH = "ssh_config"
IDENTITY_FILE = "~/.ssh/id_ed25519"
CONTROL_PATH = "~/.ssh/cm-%C"
GRAFANA_PORT = 3000  # Grafana's default http_port
# Algorithms every OpenSSH since 7.4 (RHEL 8, Ubuntu 18.04) knows: an unknown name stops sshd.
KEX = "curve25519-sha256,curve25519-sha256@libssh.org,diffie-hellman-group16-sha512,diffie-hellman-group18-sha512"
CIPHERS = "chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com,aes256-ctr,aes128-ctr"
MACS = "hmac-sha2-512-etm@openssh.com,hmac-sha2-256-etm@openssh.com,umac-128-etm@openssh.com"


def render_sshd(plan: Plan, node: Node) -> str:
    del plan, node
    return header("sshd drop-in") + f"""\
# Keys only: no passwords, no keyboard-interactive; root by key (cluster automation) only.
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthenticationMethods publickey
PermitRootLogin prohibit-password
PermitEmptyPasswords no
MaxAuthTries 3
LoginGraceTime 30
# Drop dead sessions after 3 missed keep-alives a minute apart (a rebooted peer, a cut link).
ClientAliveInterval 60
ClientAliveCountMax 3
# Many parallel fan-out connections (pdsh/clush) arrive at once.
MaxStartups 100:30:200
X11Forwarding no
KexAlgorithms {KEX}
Ciphers {CIPHERS}
MACs {MACS}
"""


def host_patterns(names: list[str]) -> str:
    """ssh_config Host globs for node names: gpu001..gpu128 -> `gpu???`, one per prefix and
    digit width (NodeSet syntax means nothing to ssh)."""
    patterns: dict[str, None] = {}
    for name in names:
        prefix = name.rstrip("0123456789")
        patterns[token(prefix, "node name") + "?" * (len(name) - len(prefix))] = None
    return " ".join(patterns)


@dataclass(frozen=True)
class SshClient:
    """What the Plan cannot know about the admin's side: the key, where host keys and the
    multiplexing sockets live (the lab's own ssh_config points them into the lab directory)."""

    identity_file: str = IDENTITY_FILE
    known_hosts: str | None = None  # None: ssh's default (~/.ssh/known_hosts)
    control_path: str = CONTROL_PATH


def render_ssh_config(plan: Plan, client: SshClient = SshClient()) -> str:
    """For admins, terminals and IDEs: every node by name at its management address, through the
    bastion, with the key, keep-alives and one multiplexed connection per node; and an entry
    that forwards the monitoring host's dashboards to this machine."""
    bastion = token(plan.site.bastion, "site.bastion") if plan.site.bastion else None
    lines = [header("ssh_config").rstrip(), "# For admins: ssh -F ssh_config gpu001; IDEs: see gpunet's README.",
             "# ssh takes the first value it finds: entries above an Include of this file override it."]
    # The bastion's block comes first, so the node globs (login?? say) do not send it through itself.
    if bastion:
        address = next((n.management_ip for n in plan.nodes if n.name == bastion), None)
        lines += ["", f"Host {bastion}", *([f"    HostName {address}"] if address else []),
                  *_login(plan, client), "    ProxyJump none"]
    # Each node's address, so `ssh gpu001` works from this file alone (no DNS for the cluster).
    lines += [f"Host {token(n.name, 'node')}\n    HostName {n.management_ip}"
              for n in plan.nodes if n.management_ip and n.name != bastion]
    lines += ["", f"Host {host_patterns([n.name for n in plan.nodes])}", *_login(plan, client),
              *([f"    ProxyJump {bastion}"] if bastion else [])]
    lines += _dashboards(plan, client, bastion)
    lines += [
        "", "Host *",
        "    # Notice a dead path within ~2 minutes instead of hanging.",
        "    ServerAliveInterval 30", "    ServerAliveCountMax 4",
        "    # One TCP connection per node, reused by every following command (fan-out is fast).",
        "    ControlMaster auto", f"    ControlPath {client.control_path}", "    ControlPersist 10m",
        "    StrictHostKeyChecking accept-new", "    HashKnownHosts no",
        *([f"    UserKnownHostsFile {token(client.known_hosts, 'known hosts file')}"] if client.known_hosts else []),
    ]
    return "\n".join(lines) + "\n"


def _login(plan: Plan, client: SshClient) -> list[str]:
    return [f"    User {token(plan.site.admin_user, 'site.admin_user')}",
            "    # The key the nodes' sshd accepts (keys only): gpunet renders no password login.",
            f"    IdentityFile {token(client.identity_file, 'identity file')}", "    IdentitiesOnly yes"]


def _dashboards(plan: Plan, client: SshClient, bastion: str | None) -> list[str]:
    """`ssh -N <site>-dashboards` makes Grafana and Prometheus of the monitoring host (site.monitoring,
    one address) answer at localhost:3000 and localhost:9090 here."""
    monitoring = plan.site.monitoring
    if monitoring is None or monitoring.num_addresses != 1:
        return []
    return ["", f"# ssh -N {plan.site.name}-dashboards, then Grafana at http://localhost:{GRAFANA_PORT} and "
                f"Prometheus at http://localhost:{PROMETHEUS_PORT}",
            f"Host {plan.site.name}-dashboards", f"    HostName {monitoring.network_address}", *_login(plan, client),
            *([f"    ProxyJump {bastion}"] if bastion else []),
            f"    LocalForward {GRAFANA_PORT} 127.0.0.1:{GRAFANA_PORT}",
            f"    LocalForward {PROMETHEUS_PORT} 127.0.0.1:{PROMETHEUS_PORT}",
            "    # A port already taken here is an error, not a session without its forward.",
            "    ExitOnForwardFailure yes"]
