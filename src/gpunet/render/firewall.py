"""Inbound policy per node and role, as one model rendered two ways: an nftables ruleset and
firewalld zones. Management: SSH from the admin range (and bastion), ICMP, exporters from the
monitoring host, drop the rest. Data planes: their own subnet (NCCL and MPI use ephemeral
ports). Storage plane: the storage protocol ports on storage servers."""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Interface

from gpunet.model.plan import Interface, Node, Plan
from gpunet.render.common import GPUNET_EXPORTER_PORT, NODE_EXPORTER_PORT, STORAGE_PORTS, addressed, header
from gpunet.render.quote import token, xml_attribute

NFT_PATH = "etc/nftables.d/gpunet.nft"
ZONES_DIR = "etc/firewalld/zones"


@dataclass(frozen=True)
class Allow:
    """Accept traffic arriving on `interfaces` from `sources` (optionally only some ports)."""

    why: str
    interfaces: tuple[str, ...]
    sources: tuple[str, ...]
    tcp: tuple[int, ...] = ()
    udp: tuple[int, ...] = ()
    any_port: bool = False


@dataclass
class Policy:
    zone_interfaces: dict[str, list[str]] = field(default_factory=dict)  # plane -> interfaces
    allows: list[Allow] = field(default_factory=list)


def layer3_name(iface: Interface) -> str:
    return f"{iface.name}.{iface.vlan}" if iface.vlan else iface.name


def policy(plan: Plan, node: Node) -> Policy:
    result = Policy()
    for iface in addressed(node):
        result.zone_interfaces.setdefault(iface.plane, []).append(layer3_name(iface))
    for plane, names in result.zone_interfaces.items():
        subnet = str(IPv4Interface(next(i.address for i in addressed(node) if i.plane == plane)).network)
        result.allows += _plane_allows(plan, node, plane, tuple(names), subnet)
    return result


def _plane_allows(plan: Plan, node: Node, plane: str, names: tuple[str, ...], subnet: str) -> list[Allow]:
    if plane == "management":
        allows = [Allow("SSH from the admin range and the bastion", names, ssh_sources(plan, node, subnet), tcp=(22,))]
        if plan.site.monitoring is not None:
            allows.append(Allow("exporters, scraped by the monitoring host", names, (str(plan.site.monitoring),),
                                tcp=(NODE_EXPORTER_PORT, GPUNET_EXPORTER_PORT)))
        return allows
    if plane == "storage":
        if node.role != "storage":
            return []  # storage clients only need replies, which the established rule accepts
        return [Allow("storage protocols (NFS, NFS/RDMA, Lustre) from the storage plane", names, (subnet,),
                      tcp=STORAGE_PORTS["tcp"], udp=STORAGE_PORTS["udp"])]
    return [Allow(f"{plane} plane peers: NCCL and MPI use ephemeral ports", names, (subnet,), any_port=True)]


def ssh_sources(plan: Plan, node: Node, subnet: str) -> tuple[str, ...]:
    """The admin range and the bastion's management address; login nodes take SSH from anywhere
    (they are the way in); with neither set, the management subnet itself."""
    if node.role == "login" or node.name == plan.site.bastion:
        return ("0.0.0.0/0",)
    sources = [str(plan.site.admin_subnet)] if plan.site.admin_subnet else []
    bastion = plan.node(plan.site.bastion)
    if bastion is not None:
        sources += [f"{i.address.split('/')[0]}/32" for i in bastion.interfaces
                    if i.plane == "management" and i.address]
    return tuple(sources) or (subnet,)


def render_nftables(plan: Plan, node: Node) -> str:
    lines = [
        "#!/usr/sbin/nft -f", header("nftables").rstrip(),
        "# Replaces only gpunet's own table: other tables (container runtimes, fail2ban) stay.",
        "table inet gpunet", "delete table inet gpunet", "", "table inet gpunet {",
        "\tchain input {", "\t\ttype filter hook input priority filter; policy drop;",
        "\t\tct state established,related accept comment \"replies, and ICMP errors for our flows\"",
        "\t\tct state invalid drop", '\t\tiif "lo" accept',
        "\t\tmeta l4proto { icmp, ipv6-icmp } accept comment \"ping, and PMTU discovery must work\"",
    ]
    for allow in policy(plan, node).allows:
        lines += [f"\t\t{rule} comment \"{allow.why}\"" for rule in _nft_rules(allow)]
    lines += ['\t\tlimit rate 5/minute burst 10 packets log prefix "gpunet drop: " level info', "\t}", "}"]
    return "\n".join(lines) + "\n"


def _nft_set(values: tuple[object, ...]) -> str:
    return str(values[0]) if len(values) == 1 else "{ " + ", ".join(str(v) for v in values) + " }"


def _nft_rules(allow: Allow) -> list[str]:
    iif = "iifname " + _nft_set(tuple(f'"{token(i, "interface")}"' for i in allow.interfaces))
    src = "" if allow.sources == ("0.0.0.0/0",) else f"ip saddr {_nft_set(allow.sources)} "
    if allow.any_port:
        return [f"{iif} {src}accept"]
    rules = [f"{iif} {src}tcp dport {_nft_set(allow.tcp)} accept"] if allow.tcp else []
    return rules + ([f"{iif} {src}udp dport {_nft_set(allow.udp)} accept"] if allow.udp else [])


def render_firewalld_zones(plan: Plan, node: Node) -> dict[str, str]:
    """One zone per plane, target DROP, with the same allows as the nftables ruleset."""
    pol = policy(plan, node)
    return {f"{ZONES_DIR}/gpunet-{plane}.xml": _zone(plane, names, _allows_on(pol, names))
            for plane, names in pol.zone_interfaces.items()}


def _allows_on(pol: Policy, names: list[str]) -> list[Allow]:
    return [a for a in pol.allows if a.interfaces == tuple(names)]


def _zone(plane: str, interfaces: list[str], allows: list[Allow]) -> str:
    body = [f'  <short>gpunet {plane}</short>',
            f'  <description>{plane} plane: generated by gpunet from plan.json</description>']
    body += [f"  <interface name={xml_attribute(i)}/>" for i in interfaces]
    # Ping is accepted; ICMP errors of our flows (PMTU "fragmentation needed") are RELATED and
    # accepted by firewalld's own conntrack rules.
    body += ['  <rule><icmp-type name="echo-request"/><accept/></rule>']
    for allow in allows:
        body += [f"  <!-- {allow.why} -->"] + [_rich_rule(src, allow) for src in allow.sources]
    return '<?xml version="1.0" encoding="utf-8"?>\n<zone target="DROP">\n' + "\n".join(body) + "\n</zone>\n"


def _rich_rule(source: str, allow: Allow) -> str:
    src = "" if source == "0.0.0.0/0" else f"<source address={xml_attribute(source)}/>"
    if allow.any_port:
        return f'  <rule family="ipv4">{src}<accept/></rule>'
    ports = [f'<port port="{p}" protocol="tcp"/>' for p in allow.tcp] + [
        f'<port port="{p}" protocol="udp"/>' for p in allow.udp]
    return "\n".join(f'  <rule family="ipv4">{src}{port}<accept/></rule>' for port in ports)
