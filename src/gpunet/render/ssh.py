"""SSH: a hardened sshd drop-in for every node, and the admins' ssh_config for the cluster."""

from __future__ import annotations

from gpunet.model.plan import Node, Plan
from gpunet.render.common import header
from gpunet.render.quote import token

SSHD_PATH = "etc/ssh/sshd_config.d/50-gpunet.conf"
SSH_CONFIG_PATH = "ssh_config"
IDENTITY_FILE = "~/.ssh/id_ed25519"
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


def render_ssh_config(plan: Plan) -> str:
    """For admins: every node by its management name, through the bastion, multiplexed."""
    bastion = token(plan.site.bastion, "site.bastion") if plan.site.bastion else None
    lines = [header("ssh_config").rstrip(), "# For admins: ssh -F ssh_config gpu001"]
    if bastion:
        lines += ["", f"Host {bastion}", "    ProxyJump none"]
    # Each node's address, so `ssh gpu001` works from this file alone (no DNS for the cluster).
    lines += [f"Host {token(n.name, 'node')}\n    HostName {n.management_ip}" for n in plan.nodes if n.management_ip]
    # The bastion's block comes first: ssh takes the first value it finds, so its glob here
    # (login?? say) does not send it through itself.
    lines += ["", f"Host {host_patterns([n.name for n in plan.nodes])}",
              f"    User {token(plan.site.admin_user, 'site.admin_user')}",
              "    # The key the nodes' sshd accepts (keys only): gpunet renders no password login.",
              f"    IdentityFile {IDENTITY_FILE}", "    IdentitiesOnly yes"]
    if bastion:
        lines.append(f"    ProxyJump {bastion}")
    lines += [
        "", "Host *",
        "    # Notice a dead path within ~2 minutes instead of hanging.",
        "    ServerAliveInterval 30", "    ServerAliveCountMax 4",
        "    # One TCP connection per node, reused by every following command (fan-out is fast).",
        "    ControlMaster auto", "    ControlPath ~/.ssh/cm-%C", "    ControlPersist 10m",
        "    StrictHostKeyChecking accept-new", "    HashKnownHosts no",
    ]
    return "\n".join(lines) + "\n"
