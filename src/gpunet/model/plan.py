"""The Plan: everything gpunet decided from a Spec. plan.json is this model, serialized."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from ipaddress import IPv4Address, IPv4Network, collapse_addresses
from typing import Any, Literal

from pydantic import Field, model_validator

from gpunet.model.base import Frozen, set_fields_set, share_fields_set
from gpunet.model.consistency import cross_reference_problems
from gpunet.model.flows import Flow
from gpunet.model.nodeset import parse_nodeset
from gpunet.model.partition import Partition
from gpunet.model.qos import RoceQos
from gpunet.model.spec import (
    BondSpec,
    FabricSpec,
    FabricStyle,
    Media,
    PlaneName,
    Role,
    SiteSpec,
    Technology,
)
from gpunet.model.switch_spec import Peering
from gpunet.model.types import (
    AddressText,
    Device,
    HcaName,
    Hostname,
    Interface6Text,
    InterfaceText,
    ModelName,
    Name,
    PortName,
    Subnet6Text,
    SubnetText,
)

PLAN_SCHEMA_VERSION = 1
Tier = Literal["leaf", "spine", "core"]
LinkTier = Literal["direct", "node_leaf", "leaf_spine", "spine_core"]


class Interface(Frozen):
    """One addressed or cabled interface of a node on one plane."""

    name: Device
    plane: PlaneName
    speed_gbps: int = Field(ge=1)
    mtu: int = Field(ge=576, le=65520)
    address: InterfaceText | None = None  # CIDR, e.g. 10.0.0.5/24; None for bond members
    address6: Interface6Text | None = None
    hostname: Hostname | None = None
    rail: int | None = Field(None, ge=0)
    hca: HcaName | None = None  # RDMA device (mlx5_3) on InfiniBand and RoCE planes
    vlan: int | None = Field(None, ge=1, le=4094)
    bond: BondSpec | None = None  # set on the bond interface itself
    members: tuple[Device, ...] = ()
    master: Device | None = None  # set on bond members
    cabled: bool = True  # a bond is logical: its members carry the cables

    @property
    def layer3(self) -> str:
        """The device that holds the address: the VLAN device (bond0.20) where the plane is tagged."""
        return f"{self.name}.{self.vlan}" if self.vlan else self.name


class Node(Frozen):
    """A server: its role, GPUs and every interface on every plane."""

    name: Hostname
    group: Name
    role: Role
    gpus: int = Field(ge=0)
    gpu_model: ModelName | None = None
    interfaces: tuple[Interface, ...]
    # Attachment slot per switched plane (scalable-unit position or leaf position); kept
    # from the previous plan so growth never moves an existing node.
    slots: dict[str, int] = Field(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        """Read back or built: its interfaces' fields sets shared (interfaces built by design share theirs)."""
        share_fields_set(self)
        for interface in self.interfaces:
            share_fields_set(interface)

    @property
    def management_ip(self) -> str | None:
        """The address admins, fleet tools and Prometheus reach the node at (no prefix)."""
        found = next((i.address for i in self.interfaces if i.plane == "management" and i.address), None)
        return found.split("/")[0] if found else None


ASN = Field(None, ge=1, le=4294967294)


class Switch(Frozen):
    name: Hostname
    plane: PlaneName
    tier: Tier
    model: ModelName
    radix: int = Field(ge=1)
    port_gbps: int = Field(ge=1)
    pod: int | None = None
    su: int | None = None
    rail: int | None = None
    # Routed planes (Plane.routing): its eBGP ASN (RFC 7938: spines share one per plane or pod,
    # cores one per plane, each leaf its own) and its loopback, also its BGP router id.
    asn: int | None = ASN
    loopback: AddressText | None = None
    # Its management port's address with prefix (site.switch_management, else the oob or
    # management plane's subnet, from the top); None where the plan has neither.
    management: InterfaceText | None = None


class Port(Frozen):
    device: Hostname
    port: PortName  # switch ports are "1".."radix"; node ports are interface names


class Link(Frozen):
    plane: PlaneName
    tier: LinkTier
    a: Port
    b: Port
    gbps: int
    # Switch-to-switch cables of a routed plane: the cable's /31; the lower end (a) holds the even
    # address, the upper end (b) the odd one.
    p2p: SubnetText | None = None

    def model_post_init(self, context: Any, /) -> None:
        """Read back: its fields sets shared (cables built by design share theirs already); by hand,
        2.35 million times at 1M GPUs."""
        if len(self.__pydantic_fields_set__) == len(LINK_FIELDS):
            set_fields_set(self, LINK_FIELDS)
        for port in (self.a, self.b):
            if len(port.__pydantic_fields_set__) == len(PORT_FIELDS):
                set_fields_set(port, PORT_FIELDS)


# Every field name of a cable and of a port: the one set the cables read back share.
LINK_FIELDS, PORT_FIELDS = set(Link.model_fields), set(Port.model_fields)


class FabricBasis(Frozen):
    """What a plane's layout was sized from. A later plan with the previous one keeps it, so
    adding nodes or groups never changes the slot width, leaf shape or style under existing
    nodes; it changes only when the spec's fabric section changes."""

    style: FabricStyle  # resolved: never "auto"
    nics_per_node: int  # slot width: NICs of one node on one plane
    nic_gbps: int  # NIC speed the leaf uplinks were sized for
    planned_nodes: int
    fabric: FabricSpec


class Cabling(Frozen):
    """The spec's media per cable tier (tiers not named take the default for the technology and
    speed, design/media.py) and the switch ports per cage (2: twin-port 2x400G cages)."""

    media: dict[LinkTier, Media] = Field(default_factory=dict)
    breakout: int = Field(1, ge=1, le=8)


class NicCard(Frozen):
    """The NIC/HCA a node group carries on a plane, for the bill of materials."""

    model: ModelName
    ports_per_card: int = Field(1, ge=1, le=8)


class PlaneRouting(Frozen):
    """How a routed plane's switches route (eBGP, RFC 7938): the pools and ASN range the plan
    drew from (a later plan keeps drawing from them) and the session options the renders use."""

    loopbacks: SubnetText
    p2p: SubnetText
    asn_first: int = Field(ge=1, le=4294967294)
    asn_last: int = Field(ge=1, le=4294967294)
    peering: Peering = "numbered"
    bfd: bool = False


class Plane(Frozen):
    name: PlaneName
    technology: Technology
    subnet: SubnetText
    subnet6: Subnet6Text | None = None
    gateway: AddressText | None = None
    vlan: int | None = Field(None, ge=1, le=4094)
    mtu: int = Field(ge=576, le=65520)
    speed_gbps: int = Field(ge=1)
    style: FabricStyle
    basis: FabricBasis | None = None
    cabling: Cabling = Field(default_factory=Cabling)
    nics: dict[Name, NicCard] = Field(default_factory=dict)  # node group -> its NIC on this plane
    qos: RoceQos | None = None  # RoCE planes only: the lossless class hosts and switches share
    partition: Partition | None = None  # InfiniBand planes: the ports' P_Key (NCCL_IB_PKEY is its index)
    sharp: bool = False  # InfiniBand planes: in-network reduction offered (NCCL CollNet)
    routing: PlaneRouting | None = None  # routed Ethernet/RoCE planes (spine-leaf, rails, three tiers)


class PlaneCapacity(Frozen):
    plane: PlaneName
    style: FabricStyle
    tiers: int
    endpoints: int
    leaves: int = 0
    spines: int = 0
    cores: int = 0
    oversubscription: dict[str, float] = Field(default_factory=dict)
    bisection_gbps: float
    max_hops: int
    rails: int = 0
    per_rail_gbps: float = 0.0
    planned_nodes: int


class BomLine(Frozen):
    """One line of the bill of materials: `count` units of `model`. A cable line carries `cables`
    of the plan's cables (a twin or breakout assembly carries several); NIC and transceiver lines
    serve `ports` cable ends."""

    item: Literal["switch", "nic", "cable", "transceiver"]
    plane: PlaneName
    tier: str = Field(pattern=r"^[a-z_]{1,20}$")
    model: ModelName
    count: int
    media: Media | None = None
    group: Name | None = None  # NIC lines: the node group
    cables: int = 0
    ports: int = 0


class Plan(Frozen):
    schema_version: int = PLAN_SCHEMA_VERSION
    gpunet_version: ModelName  # "0.1.0": plan.json is input, so a version string is held to a name's characters
    site: SiteSpec
    planes: tuple[Plane, ...]
    nodes: tuple[Node, ...]
    switches: tuple[Switch, ...]
    links: tuple[Link, ...]
    capacity: tuple[PlaneCapacity, ...]
    bom: tuple[BomLine, ...] = Field(default=())
    flows: tuple[Flow, ...] = Field(default=())  # the traffic the cluster needs (model/flows.py)

    @model_validator(mode="after")
    def _consistent(self) -> Plan:
        """What plan.json must hold together before anything reads it: one owner per name, cables
        between known ports, addresses inside their plane. The first problem is reported."""
        problem = next(cross_reference_problems(self), None)
        if problem is not None:
            raise ValueError(problem)
        return self

    @cached_property
    def nodes_by_name(self) -> dict[str, Node]:
        """Built once per plan: an all-pairs run looks two nodes up per pair, among thousands."""
        return {n.name: n for n in self.nodes}

    @cached_property
    def links_at(self) -> dict[str, list[Link]]:
        """device -> the cables with an end on it, in plan order (switch views read one switch's cables
        among hundreds of thousands)."""
        found: dict[str, list[Link]] = {}
        for link in self.links:
            found.setdefault(link.a.device, []).append(link)
            found.setdefault(link.b.device, []).append(link)
        return found

    @cached_property
    def switches_by_name(self) -> dict[str, Switch]:
        return {s.name: s for s in self.switches}

    def node(self, name: str | None) -> Node | None:
        return self.nodes_by_name.get(name) if name is not None else None

    @cached_property
    def inbound_flows(self) -> dict[str, list[Flow]]:
        """node -> the flows it must accept (each folded NodeSet parsed once for all nodes)."""
        result: dict[str, list[Flow]] = {n.name: [] for n in self.nodes}
        for flow in self.flows:
            for name in parse_nodeset(flow.to_nodes) if flow.to_nodes else ():
                result[name].append(flow)
        return result

    @cached_property
    def flow_sources(self) -> dict[int, tuple[str, ...]]:
        """Flow position -> where it comes from as networks: its subnets, and its nodes' addresses on
        its plane collapsed (12 500 management addresses are a few prefixes); ("0.0.0.0/0",) from anywhere."""
        return {i: _sources(self, flow) for i, flow in enumerate(self.flows)}

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Plan:
        """A copy re-derives its indexes: one carried over would name the original's nodes."""
        copied = super().model_copy(update=update, deep=deep)
        for cached in ("nodes_by_name", "inbound_flows", "flow_sources", "links_at", "switches_by_name"):
            copied.__dict__.pop(cached, None)
        return copied


def _sources(plan: Plan, flow: Flow) -> tuple[str, ...]:
    if flow.from_anywhere:
        return ("0.0.0.0/0",)
    names = parse_nodeset(flow.from_nodes) if flow.from_nodes else ()
    hosts = [IPv4Address(i.address.split("/")[0]) for n in names if (node := plan.node(n))
             for i in node.interfaces if i.plane == flow.plane and i.address]
    networks = [IPv4Network(s) for s in flow.from_subnets]
    hosts = [h for h in hosts if not any(h in net for net in networks)]  # inside a listed subnet already
    return tuple(str(n) for n in collapse_addresses([*networks, *(IPv4Network(h) for h in hosts)]))
