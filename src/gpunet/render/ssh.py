"""SSH: a hardened sshd drop-in for every node, and the admins' ssh_config for the cluster."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address

from gpunet.model.plan import Node, Plan
from gpunet.render.common import header
from gpunet.render.grafana import PROMETHEUS_PORT
from gpunet.render.quote import ssh_host, token

SSHD_PATH = "etc/ssh/sshd_config.d/50-gpunet.conf"
SSH_CONFIG_PATH = "ssh_config"
IDENTITY_FILE = "~/.ssh/id_ed25519"
CONTROL_PATH = "~/.ssh/cm-%C"
# The longest line the file holds: libssh (some IDEs' SSH client) reads lines of 1024 characters.
HOST_LINE_CHARS = 1000
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
    that forwards the monitoring host's dashboards to this machine. Nothing in it applies to a
    host outside the cluster: the file is meant to be included from the user's ~/.ssh/config."""
    bastion = ssh_host(plan.site.bastion, "site.bastion") if plan.site.bastion else None
    lines = [header("ssh_config").rstrip(), "# For admins: ssh -F ssh_config gpu001; IDEs: see gpunet's README.",
             "# ssh takes the first value it finds: entries above an Include of this file override it.",
             "# Every setting applies to the cluster's hosts only (no `Host *`): an Include of this file",
             "# changes nothing for the user's other connections."]
    if bastion:
        lines += _bastion(plan, client, bastion)
    # Each node's address, so `ssh gpu001` works from this file alone (no DNS for the cluster).
    lines += [f"Host {_name(n.name)} {_fqdn(plan, n.name)}\n    HostName {ssh_host(n.management_ip, n.name)}"
              for n in plan.nodes if n.management_ip and n.name != bastion]
    lines += _dashboards(plan)
    lines += _cluster_settings(plan, client, bastion)
    return "\n".join(lines) + "\n"


def _name(name: str) -> str:
    return ssh_host(name, "node name")


def _fqdn(plan: Plan, name: str) -> str:
    return ssh_host(f"{_name(name)}.{plan.site.domain}", "site.domain")


def _bastion(plan: Plan, client: SshClient, bastion: str) -> list[str]:
    """The bastion's entry comes first, so the nodes' lists below (its address among them) never
    send it through itself."""
    node = next((n for n in plan.nodes if n.name == bastion), None)
    address = ssh_host(node.management_ip, bastion) if node and node.management_ip else None
    names = [bastion, *([_fqdn(plan, bastion)] if node else []), *([address] if address else [])]
    return ["", f"Host {' '.join(names)}", *([f"    HostName {address}"] if address else []),
            "    ProxyJump none", *_settings(plan, client)]


def _cluster_settings(plan: Plan, client: SshClient, bastion: str | None) -> list[str]:
    """Every other cluster host's settings, under `Host` lines that name each node as a user may
    type it: its name, its FQDN, its address (and the dashboards entry). `Host`, not `Match host`:
    the IDEs' own ssh_config parsers (JetBrains' older one, JSch, JGit) read no `Match`.

    12,500 nodes on one line would be ~400 kB, past what some parsers read (libssh: 1024 a line),
    so the list is cut into lines of at most HOST_LINE_CHARS, each with the same settings. Names
    and FQDNs are listed, never folded into `gpu?????` or `*.<domain>`: a glob would also match the
    user's other hosts of that shape, and the site domain may be the organisation's own. Addresses
    are folded (`198.18.0.1?` is .10 to .19 and no other IPv4 address), so a run costs few patterns."""
    monitoring = _monitoring_address(plan)
    addresses = [n.management_ip for n in plan.nodes if n.management_ip] + ([monitoring] if monitoring else [])
    names = [f"{_name(n.name)} {_fqdn(plan, n.name)}" for n in plan.nodes if n.name != bastion]  # a node on one line
    patterns = names + ([_dashboards_name(plan)] if monitoring else []) + address_patterns(addresses)
    jump = [f"    ProxyJump {bastion}"] if bastion else []
    lines: list[str] = []
    for index, hosts in enumerate(_lines_of(patterns, HOST_LINE_CHARS - len("Host "))):
        settings = _settings(plan, client)  # explained once; the repeats are the same lines
        lines += ["", f"Host {hosts}", *(s for s in settings if index == 0 or not s.lstrip().startswith("#")), *jump]
    return lines


def _settings(plan: Plan, client: SshClient) -> list[str]:
    return [
        f"    User {token(plan.site.admin_user, 'site.admin_user')}",
        "    # The key the nodes' sshd accepts (keys only): gpunet renders no password login.",
        f"    IdentityFile {token(client.identity_file, 'identity file')}", "    IdentitiesOnly yes",
        "    # Notice a dead path within ~2 minutes instead of hanging.",
        "    ServerAliveInterval 30", "    ServerAliveCountMax 4",
        "    # One TCP connection per node, reused by every following command (fan-out is fast).",
        "    ControlMaster auto", f"    ControlPath {token(client.control_path, 'control path')}",
        "    ControlPersist 10m", "    StrictHostKeyChecking accept-new", "    HashKnownHosts no",
        *([f"    UserKnownHostsFile {token(client.known_hosts, 'known hosts file')}"] if client.known_hosts else []),
    ]


def address_patterns(addresses: list[str]) -> list[str]:
    """ssh_config patterns that match exactly these IPv4 addresses among all IPv4 addresses: the
    last octets of each /24 folded into decimal globs (`?` standing for any digit), in address order."""
    octets: dict[tuple[int, ...], set[int]] = {}
    for text in addresses:
        *network, last = IPv4Address(ssh_host(text, "management address")).packed
        octets.setdefault(tuple(network), set()).add(last)
    return [f"{'.'.join(map(str, network))}.{glob}" for network in sorted(octets)
            for glob in _octet_globs(octets[network])]


def _octet_blocks() -> list[tuple[str, range]]:
    """The decimal globs of one octet and the values (0-255) each matches, largest first: `?` 0-9,
    `??` 10-99, `1??`, `2??` (200-255), then each ten (`4?`, `13?`, `25?` is 250-255). They nest,
    so taking the largest that fits, greedily, gives the fewest globs."""
    blocks = [("?", range(10)), ("??", range(10, 100)), ("1??", range(100, 200)), ("2??", range(200, 256))]
    blocks += [(f"{tens}?", range(tens * 10, min(tens * 10 + 10, 256))) for tens in range(1, 26)]
    return sorted(blocks, key=lambda block: -len(block[1]))


OCTET_BLOCKS = _octet_blocks()


def _octet_globs(values: set[int]) -> list[str]:
    left, globs = set(values), []
    for glob, block in OCTET_BLOCKS:
        if left.issuperset(block):
            globs.append((block[0], glob))
            left.difference_update(block)
    return [glob for _, glob in sorted(globs + [(value, str(value)) for value in left])]


def _lines_of(patterns: list[str], width: int) -> list[str]:
    """Space-separated patterns, as many a line as fit in `width` characters."""
    lines: list[str] = []
    for pattern in patterns:
        if lines and len(lines[-1]) + 1 + len(pattern) <= width:
            lines[-1] += f" {pattern}"
        else:
            lines.append(pattern)
    return lines


def _monitoring_address(plan: Plan) -> str | None:
    """The monitoring host's address when site.monitoring is one address (the dashboards' entry)."""
    monitoring = plan.site.monitoring
    return str(monitoring.network_address) if monitoring is not None and monitoring.num_addresses == 1 else None


def _dashboards_name(plan: Plan) -> str:
    return ssh_host(f"{plan.site.name}-dashboards", "site.name")


def _dashboards(plan: Plan) -> list[str]:
    """`ssh -N <site>-dashboards` makes Grafana and Prometheus of the monitoring host (site.monitoring,
    one address) answer at localhost:3000 and localhost:9090 here; its login is the Host list below."""
    address = _monitoring_address(plan)
    if address is None:
        return []
    name = _dashboards_name(plan)
    return ["", f"# ssh -N {name}, then Grafana at http://localhost:{GRAFANA_PORT} and "
                f"Prometheus at http://localhost:{PROMETHEUS_PORT}",
            f"Host {name}", f"    HostName {address}",
            f"    LocalForward {GRAFANA_PORT} 127.0.0.1:{GRAFANA_PORT}",
            f"    LocalForward {PROMETHEUS_PORT} 127.0.0.1:{PROMETHEUS_PORT}",
            "    # A port already taken here is an error, not a session without its forward.",
            "    ExitOnForwardFailure yes"]
