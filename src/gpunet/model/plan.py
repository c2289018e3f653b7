"""The Plan: everything gpunet decided from a Spec. plan.json is this model, serialized."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any, Literal

from pydantic import Field

from gpunet.model.base import Frozen
from gpunet.model.spec import (
    DEVICE_PATTERN,
    HOSTNAME,
    BondSpec,
    FabricSpec,
    FabricStyle,
    PlaneName,
    Role,
    SiteSpec,
    Technology,
)

PLAN_SCHEMA_VERSION = 1
Tier = Literal["leaf", "spine", "core"]
LinkTier = Literal["direct", "node_leaf", "leaf_spine", "spine_core"]


class Interface(Frozen):
    """One addressed or cabled interface of a node on one plane."""

    name: str = Field(pattern=DEVICE_PATTERN)
    plane: PlaneName
    speed_gbps: int
    mtu: int
    address: str | None = None  # CIDR, e.g. 10.0.0.5/24; None for bond members
    address6: str | None = None
    hostname: str | None = None
    rail: int | None = None
    hca: str | None = None  # RDMA device (mlx5_3) on InfiniBand and RoCE planes
    vlan: int | None = None
    bond: BondSpec | None = None  # set on the bond interface itself
    members: tuple[str, ...] = ()
    master: str | None = None  # set on bond members
    cabled: bool = True  # a bond is logical: its members carry the cables


class Node(Frozen):
    """A server: its role, GPUs and every interface on every plane."""

    name: str = Field(pattern=HOSTNAME.pattern)
    group: str
    role: Role
    gpus: int
    gpu_model: str | None = None
    interfaces: tuple[Interface, ...]
    # Attachment slot per switched plane (scalable-unit position or leaf position); kept
    # from the previous plan so growth never moves an existing node.
    slots: dict[str, int] = Field(default_factory=dict)

    @property
    def management_ip(self) -> str | None:
        """The address admins, fleet tools and Prometheus reach the node at (no prefix)."""
        found = next((i.address for i in self.interfaces if i.plane == "management" and i.address), None)
        return found.split("/")[0] if found else None


class Switch(Frozen):
    name: str
    plane: PlaneName
    tier: Tier
    model: str
    radix: int
    port_gbps: int
    pod: int | None = None
    su: int | None = None
    rail: int | None = None


class Port(Frozen):
    device: str
    port: str  # switch ports are "1".."radix"; node ports are interface names


class Link(Frozen):
    plane: PlaneName
    tier: LinkTier
    a: Port
    b: Port
    gbps: int


class FabricBasis(Frozen):
    """What a plane's layout was sized from. A later plan with the previous one keeps it, so
    adding nodes or groups never changes the slot width, leaf shape or style under existing
    nodes; it changes only when the spec's fabric section changes."""

    style: FabricStyle  # resolved: never "auto"
    nics_per_node: int  # slot width: NICs of one node on one plane
    nic_gbps: int  # NIC speed the leaf uplinks were sized for
    planned_nodes: int
    fabric: FabricSpec


class Plane(Frozen):
    name: PlaneName
    technology: Technology
    subnet: str
    subnet6: str | None = None
    gateway: str | None = None
    vlan: int | None = None
    mtu: int
    speed_gbps: int
    style: FabricStyle
    basis: FabricBasis | None = None


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
    item: Literal["switch", "cable"]
    plane: PlaneName
    tier: str
    model: str
    count: int


class Plan(Frozen):
    schema_version: int = PLAN_SCHEMA_VERSION
    gpunet_version: str
    site: SiteSpec
    planes: tuple[Plane, ...]
    nodes: tuple[Node, ...]
    switches: tuple[Switch, ...]
    links: tuple[Link, ...]
    capacity: tuple[PlaneCapacity, ...]
    bom: tuple[BomLine, ...] = Field(default=())

    @cached_property
    def nodes_by_name(self) -> dict[str, Node]:
        """Built once per plan: an all-pairs run looks two nodes up per pair, among thousands."""
        return {n.name: n for n in self.nodes}

    def node(self, name: str | None) -> Node | None:
        return self.nodes_by_name.get(name) if name is not None else None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Plan:
        """A copy re-derives the node index: one carried over would name the original's nodes."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("nodes_by_name", None)
        return copied
