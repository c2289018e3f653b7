"""The cluster spec: what the user writes in cluster.yaml (validated, frozen)."""

from __future__ import annotations

import re
from ipaddress import IPv4Address
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, model_validator

from gpunet.model.base import Frozen
from gpunet.model.nodeset import NodeSetError, parse_nodeset
from gpunet.model.partition import Partition
from gpunet.model.qos import RoceQos
from gpunet.model.switch_spec import RoutingSpec, SwitchManagementSpec
from gpunet.model.types import (
    EPHEMERAL_PORTS,
    SRUN_PORTS,
    AnyAddressText,
    Device,
    DomainName,
    HcaName,
    Hostname,
    HostOrAddress,
    ModelName,
    Name,
    PortsText,
    Subnet,
    Subnet6,
    UserName,
    Why,
)
from gpunet.model.units import INFINIBAND_SPEEDS_GBPS, speed_gbps, speed_name

Technology = Literal["ethernet", "roce", "infiniband"]
PlaneName = Literal["management", "compute", "storage", "oob"]
FabricStyle = Literal[
    "auto", "direct", "single-switch", "spine-leaf", "rail-optimized", "three-tier"
]
Role = Literal["gpu", "storage", "login", "management"]
BondMode = Literal[
    "802.3ad", "active-backup", "balance-xor", "balance-alb", "balance-tlb", "balance-rr"
]
HashPolicy = Literal["layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4"]
# What a cable is made of: direct-attach copper, active copper, active electrical, active optical
# (cable assemblies), a transceiver at each end with multimode (sr) or single-mode (dr) fiber, or
# BASE-T twisted pair (rj45, up to 10G).
Media = Literal["dac", "acc", "aec", "aoc", "sr", "dr", "rj45"]

# Interface MTU per technology when the spec gives none; README "MTU defaults" says why, and
# summary.md repeats it per plane (default_mtu).
#  - ethernet data planes: 9000 jumbo frames, the common host value under a 9216 switch MTU.
#  - roce: 4200 carries RoCE's largest RDMA MTU (4096) plus RoCEv2/UDP/IP headers; a larger
#    Ethernet MTU does not enlarge RDMA messages and only widens the mismatch surface.
#  - infiniband: 4092, IPoIB datagram mode (4096-byte IB MTU less the 4-byte IPoIB header).
#  - storage on Ethernet or RoCE: 9000, since it carries TCP (NFS, Lustre over TCP: the storage
#    flows of design/flows.py) beside any RDMA; RDMA still sends 4096-byte frames under it.
#  - management and oob stay at 1500: they talk to gateways, DNS and BMCs outside the fabric.
DATA_PLANE_MTU: dict[str, int] = {"ethernet": 9000, "roce": 4200, "infiniband": 4092}
EDGE_PLANES = ("management", "oob")
JUMBO_MTU = 9000
MTU_WHY = {
    "edge": "talks to gateways, DNS and BMCs outside the fabric, at the site network's 1500",
    "ethernet": "jumbo frames for bulk TCP: fewer packets per byte, the common host value under a 9216 switch MTU",
    "roce": "RoCE's largest RDMA MTU (4096) plus the RoCEv2/UDP/IP headers; a larger MTU would not enlarge "
            "RDMA frames and only widens the mismatch surface",
    "infiniband": "IPoIB datagram mode: the 4096-byte IB MTU less the 4-byte IPoIB header",
    "storage": "storage carries TCP (NFS, Lustre over TCP) beside RDMA: jumbo frames for it, while RDMA "
               "still sends 4096-byte frames (the largest IB MTU under the interface MTU)",
    "storage-ib": "IPoIB datagram mode caps IP at 4092, so no jumbo frames: InfiniBand storage runs over "
                  "RDMA (Lustre o2ib, NFS over RDMA)",
}
PLANE_SHORT = {"management": "mgmt", "compute": "comp", "storage": "stor", "oob": "bmc"}
# The names the design gives switches (design/naming.py): comp-leaf001, mgmt-spine002, ...
SWITCH_NAME = re.compile(rf"^({'|'.join(PLANE_SHORT.values())})-(leaf|spine|core)\d{{3,}}$")
MTU_LIMITS: dict[str, tuple[int, int]] = {
    "ethernet": (1280, 9216), "roce": (1280, 9216), "infiniband": (1280, 65520),
}


def _check_speed(value: str) -> str:
    return speed_name(value)


def _check_nodeset(value: str) -> str:
    """Node names from the spec: no group sources (they run commands), a size limit, host names."""
    try:
        nodes = parse_nodeset(value)
    except NodeSetError as exc:
        raise ValueError(str(exc)) from None
    if len(nodes) == 0:
        raise ValueError("NodeSet names no node")
    return value


def _ratio(value: object) -> object:
    """Accept 3, 3.0 or '3:1' for a 3:1 oversubscription; not `true`, not '-2:-1'."""
    if isinstance(value, bool):
        raise ValueError(f"bad ratio {value!r}; write it as '3:1' or 3")
    if isinstance(value, str) and ":" in value:
        down, _, up = value.partition(":")
        try:
            low, high = float(down), float(up)
        except ValueError:
            raise ValueError(f"bad ratio {value!r}; write it as '3:1' or 3") from None
        if not (low > 0 and high > 0):  # also false for nan
            raise ValueError(f"bad ratio {value!r}: both sides are bandwidths above 0; write it as '3:1' or 3")
        return low / high
    return value


Speed = Annotated[str, AfterValidator(_check_speed)]
NodeSetText = Annotated[str, AfterValidator(_check_nodeset)]
Ratio = Annotated[float, BeforeValidator(_ratio), Field(ge=1.0, le=64.0, allow_inf_nan=False)]


class SchedulerSpec(Frozen):
    """Slurm: the controller node and the ports the firewall opens for it (rendered into slurm.conf)."""

    controller: Hostname  # a node of the plan running slurmctld
    slurmctld_port: int = Field(6817, ge=1, le=65535)
    slurmd_port: int = Field(6818, ge=1, le=65535)
    srun_ports: PortsText = SRUN_PORTS  # SrunPortRange: srun's listening ports, pinned so the firewall can be tight


class FlowSpec(Frozen):
    """A site-specific flow: `from` and `to` are @role:NAME, @group:NAME, a NodeSet of the plan's
    nodes, or (for `from`) a subnet."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    service: Name
    protocol: Literal["tcp", "udp"] = "tcp"
    ports: PortsText
    source: str = Field(alias="from", min_length=1, max_length=4096)
    to: str = Field(min_length=1, max_length=4096)
    plane: PlaneName = "management"
    why: Why = ""


class SiteSpec(Frozen):
    name: Name
    domain: DomainName = "cluster.local"
    dns_servers: tuple[AnyAddressText, ...] = ()
    ntp_servers: tuple[HostOrAddress, ...] = ()
    bastion: DomainName | None = None  # a node of the plan (login01) or a host outside it
    admin_user: UserName = "root"  # who admins log in as (ssh_config's User)
    admin_subnet: Subnet | None = None  # where admins SSH from (management firewall)
    monitoring: Subnet | None = None  # Prometheus server(s), allowed to scrape exporters
    scheduler: SchedulerSpec | None = None
    # ip_local_port_range of every node: the ports NCCL, MPI and PMIx bootstrap listen on
    ephemeral_ports: PortsText = EPHEMERAL_PORTS
    # Switch management addresses: this subnet, else the top of the oob plane's subnet (the
    # management plane's without one), counting down while node addresses count up.
    switch_management: SwitchManagementSpec | None = None


class SwitchModel(Frozen):
    model: ModelName = "generic-64x400G"
    radix: int = Field(64, ge=4, le=1024)
    port_speed: Speed = "400G"

    @property
    def port_gbps(self) -> int:
        return speed_gbps(self.port_speed)


class Oversubscription(Frozen):
    """Down:up bandwidth ratio at each tier; 1.0 is non-blocking."""

    leaf: Ratio = 1.0
    spine: Ratio = 1.0


class FabricSpec(Frozen):
    style: FabricStyle = "auto"
    switch: SwitchModel = SwitchModel()
    oversubscription: Oversubscription = Oversubscription()
    # Nodes under one leaf; for rail-optimized fabrics, nodes per scalable unit.
    nodes_per_leaf: int | None = Field(None, ge=1)
    # Size the upper tiers for this many nodes so growing up to it never recables.
    planned_nodes: int | None = Field(None, ge=1)
    # Fewest spines per pod even when one would carry the load: one spine is a single point
    # of failure. Capped by the uplinks a leaf has.
    min_spines: int = Field(2, ge=1, le=64)
    # Spread each node's NICs on the plane over as many leaves (an MLAG pair for a 2-NIC bond):
    # losing one leaf leaves every node connected. Off: a node's NICs share one leaf.
    dual_homed: bool = False


class CablingSpec(Frozen):
    """Media per cable tier (unset: the default for the plane's technology and speed, see
    design/media.py) and the switch ports one cage holds (2: twin-port 2x400G OSFP cages)."""

    direct: Media | None = None
    node_leaf: Media | None = None
    leaf_spine: Media | None = None
    spine_core: Media | None = None
    breakout: int = Field(1, ge=1, le=8)

    def chosen(self) -> dict[str, Media]:
        tiers = ("direct", "node_leaf", "leaf_spine", "spine_core")
        return {t: m for t in tiers if (m := getattr(self, t)) is not None}


class PlaneSpec(Frozen):
    subnet: Subnet
    subnet6: Subnet6 | None = None
    technology: Technology = "ethernet"
    speed: Speed = "100G"
    mtu: int | None = Field(None, ge=576, le=65520)
    vlan: int | None = Field(None, ge=1, le=4094)
    gateway: IPv4Address | None = None
    fabric: FabricSpec = FabricSpec()
    cabling: CablingSpec = CablingSpec()
    qos: RoceQos | None = None  # RoCE planes: the lossless class (default DSCP 26 / priority 3, CNP 48 / 6)
    partition: Partition | None = None  # InfiniBand planes: the P_Key of their ports (NCCL_IB_PKEY)
    sharp: bool = False  # InfiniBand planes: the switches reduce in the network (SHARP); NCCL should use CollNet
    routing: RoutingSpec | None = None  # routed Ethernet/RoCE fabrics: pools, ASNs, peering (defaults when unset)

    @model_validator(mode="after")
    def _ethernet_speed_names(self) -> PlaneSpec:
        if self.technology != "infiniband" and self.speed in INFINIBAND_SPEEDS_GBPS:
            raise ValueError(f"{self.speed} is an InfiniBand speed; this plane is {self.technology}")
        if self.qos is not None and self.technology != "roce":
            raise ValueError(f"qos is the RoCE lossless class; this plane is {self.technology}")
        if (self.partition is not None or self.sharp) and self.technology != "infiniband":
            raise ValueError(f"partition and sharp are InfiniBand features; this plane is {self.technology}")
        if self.routing is not None and self.technology == "infiniband":
            raise ValueError("routing (BGP pools and ASNs) is for Ethernet and RoCE fabrics; InfiniBand is "
                             "routed by its subnet manager")
        return self

    @property
    def gbps(self) -> int:
        return speed_gbps(self.speed)


class BondSpec(Frozen):
    name: Device = "bond0"
    mode: BondMode = "802.3ad"
    members: tuple[Device, ...] | None = None
    lacp_rate: Literal["fast", "slow"] = "fast"
    hash_policy: HashPolicy = "layer3+4"
    mii_interval_ms: int = Field(100, ge=1, le=10000)


class NicSpec(Frozen):
    count: int = Field(1, ge=1, le=32)
    speed: Speed | None = None
    devices: tuple[Device, ...] | None = None
    # RDMA device of each NIC, in the same order (`ibdev2netdev` shows it); default mlx5_0...
    hcas: tuple[HcaName, ...] | None = None
    bond: BondSpec | None = None
    model: ModelName | None = None  # NIC/HCA model for the bill of materials; default e.g. ib-hca-400G
    ports_per_card: int = Field(1, ge=1, le=8)  # 2: a dual-port card carries two of these NICs


class NodeGroup(Frozen):
    name: Name
    nodes: NodeSetText
    role: Role = "gpu"
    gpus: int = Field(0, ge=0, le=72)
    gpu_model: ModelName | None = None
    nics: dict[PlaneName, NicSpec]

    @property
    def node_names(self) -> list[str]:
        return list(parse_nodeset(self.nodes))


class Spec(Frozen):
    version: Literal[1] = 1
    site: SiteSpec
    planes: dict[PlaneName, PlaneSpec]
    groups: tuple[NodeGroup, ...] = Field(min_length=1)
    flows: tuple[FlowSpec, ...] = ()


def plane_mtu(name: str, plane: PlaneSpec) -> int:
    """The plane's interface MTU: the spec's, else the default for its role and technology."""
    return plane.mtu if plane.mtu is not None else default_mtu(name, plane.technology)[0]


def default_mtu(name: str, technology: str) -> tuple[int, str]:
    """The MTU a plane gets when the spec names none, and why."""
    if name in EDGE_PLANES and technology == "ethernet":
        return 1500, MTU_WHY["edge"]
    if name == "storage" and technology == "infiniband":
        return DATA_PLANE_MTU[technology], MTU_WHY["storage-ib"]
    if name == "storage":
        return JUMBO_MTU, MTU_WHY["storage"]
    return DATA_PLANE_MTU[technology], MTU_WHY[technology]


def nic_devices(plane: str, plane_spec: PlaneSpec, nic: NicSpec) -> tuple[str, ...]:
    """The spec's device names, else ib0.. on InfiniBand and <plane>0.. elsewhere."""
    if nic.devices is not None:
        return nic.devices
    prefix = PLANE_SHORT[plane]
    if plane_spec.technology == "infiniband":  # ib0.. on compute; ibstor0.. elsewhere, never clashing
        prefix = "ib" if plane == "compute" else f"ib{PLANE_SHORT[plane]}"
    return tuple(f"{prefix}{i}" for i in range(nic.count))
