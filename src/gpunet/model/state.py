"""NodeState: one node as it is, read by probe/ (tool outputs parsed by pure functions)."""

from __future__ import annotations

from pydantic import Field

from gpunet.model.base import Frozen
from gpunet.model.rdma import RdmaHost
from gpunet.model.ruleset import Ruleset


class EthtoolLink(Frozen):
    """`ethtool DEV`: what the link negotiated."""

    speed_mbps: int | None = None  # None: "Unknown!" (no carrier, or a driver that cannot tell)
    duplex: str | None = None
    link_detected: bool | None = None
    port: str | None = None
    auto_negotiation: bool | None = None


class BondSlave(Frozen):
    name: str
    mii_up: bool
    speed_mbps: int | None = None
    duplex: str | None = None
    link_failures: int = 0
    aggregator_id: int | None = None


class BondState(Frozen):
    """/proc/net/bonding/<bond>."""

    name: str = ""
    mode: str  # as the kernel names it: "IEEE 802.3ad Dynamic link aggregation", ...
    mii_up: bool
    mii_interval_ms: int | None = None
    active_slave: str | None = None
    hash_policy: str | None = None
    lacp_rate: str | None = None
    slaves: tuple[BondSlave, ...] = ()

    @property
    def mode_name(self) -> str:
        """The mode as configured (802.3ad, active-backup, ...)."""
        return MODE_NAMES.get(self.mode, self.mode)


MODE_NAMES = {
    "IEEE 802.3ad Dynamic link aggregation": "802.3ad",
    "fault-tolerance (active-backup)": "active-backup",
    "load balancing (round-robin)": "balance-rr",
    "load balancing (xor)": "balance-xor",
    "transmit load balancing": "balance-tlb",
    "adaptive load balancing": "balance-alb",
    "fault-tolerance (broadcast)": "broadcast",
}


class IbPort(Frozen):
    """One port of an InfiniBand/RoCE HCA (ibstat or /sys/class/infiniband)."""

    ca: str
    port: int
    state: str  # Active, Down, Initializing, Armed
    physical_state: str  # LinkUp, Polling, Disabled, ...
    state_id: int | None = None  # the number sysfs states before the name ("4: ACTIVE"); None from ibstat
    physical_state_id: int | None = None  # "5: LinkUp"; the name alone can be wrong ("4: ACTIVE" seen)
    rate_gbps: float | None = None
    link_layer: str | None = None  # InfiniBand | Ethernet (RoCE)
    counters: dict[str, int] = Field(default_factory=dict)


class VerbsPort(Frozen):
    """One port as `ibv_devinfo` shows it: what the verbs library (and so NCCL) sees."""

    port: int
    state: str  # PORT_ACTIVE, PORT_DOWN, ...
    link_layer: str | None = None  # InfiniBand | Ethernet
    active_mtu: int | None = None
    active_speed: str | None = None  # "50.0 Gbps" (-v only)


class VerbsDevice(Frozen):
    hca: str
    transport: str | None = None
    fw_ver: str | None = None
    ports: tuple[VerbsPort, ...] = ()


class RdmaStack(Frozen):
    """The software NCCL needs on the planned NICs, as found on the node; None: not read."""

    kernel_modules: tuple[str, ...] | None = None  # /proc/modules
    verbs_devices: tuple[VerbsDevice, ...] | None = None  # ibv_devinfo; None: ibv_devinfo not installed
    providers: tuple[str, ...] = ()  # rdma-core provider libraries (libmlx5, libefa, ...)
    nccl: str | None = None  # libnccl's file, its version in the name (libnccl.so.2.21.5)
    nvidia_driver: bool | None = None  # /sys/module/nvidia: the GPU driver is loaded (None: no /sys/module)


class IbCa(Frozen):
    name: str
    ca_type: str | None = None
    firmware: str | None = None
    ports: tuple[IbPort, ...] = ()


class SnmpCounters(Frozen):
    """/proc/net/snmp or /proc/net/netstat: {"Tcp": {"RetransSegs": 3, ...}, "TcpExt": {...}}."""

    groups: dict[str, dict[str, int]]

    def get(self, group: str, name: str) -> int | None:
        return self.groups.get(group, {}).get(name)


class NetDevCounters(Frozen):
    """/proc/net/dev: counters per interface, and each line that could not be read ("line 5: ...")."""

    interfaces: dict[str, dict[str, int]] = Field(default_factory=dict)
    skipped: tuple[str, ...] = ()


class InterfaceState(Frozen):
    """/sys/class/net/<name>: link facts and counters."""

    name: str
    operstate: str
    carrier: bool | None = None  # None: unreadable (an interface that is administratively down)
    mtu: int
    speed_mbps: int | None = None  # None: the driver does not report it (-1), or no carrier
    duplex: str | None = None
    address: str | None = None
    master: str | None = None
    virtual: bool = False  # no device/ link: veth, bridge, bond, loopback
    statistics: dict[str, int] = Field(default_factory=dict)


class NicInfo(Frozen):
    """`ethtool -i` and `ethtool -S` of one physical NIC."""

    driver: str
    version: str | None = None
    firmware: str | None = None
    bus_info: str | None = None
    stats: dict[str, int] = Field(default_factory=dict)


class FirewallState(Frozen):
    """What filters this node's traffic: nftables tables, firewalld, iptables rules, and the rules
    themselves (None: the tool is not here, or could not be read)."""

    nft_tables: tuple[str, ...] = ()  # "inet gpunet", "ip filter", ...
    firewalld: str | None = None  # running | not running; None: not installed
    iptables_rules: int | None = None  # rules in iptables-save; None: not installed
    nft: Ruleset | None = None  # `nft -j list ruleset`, less the tables iptables-save shows (iptables-nft)
    iptables: Ruleset | None = None  # `iptables-save`
    iptables_backend: str | None = None  # nf_tables | legacy


class Route(Frozen):
    dst: str  # "default" or a prefix
    dev: str | None = None
    gateway: str | None = None
    table: str = "main"


class NodeState(Frozen):
    """Everything a probe read from one node at one moment (and the counter rates between two
    samples `interval_s` apart)."""

    hostname: str
    interfaces: tuple[InterfaceState, ...] = ()
    addresses: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # interface -> CIDRs
    routes: tuple[Route, ...] = ()
    bonds: tuple[BondState, ...] = ()
    ib_ports: tuple[IbPort, ...] = ()
    snmp: SnmpCounters | None = None
    sysctls: dict[str, str] = Field(default_factory=dict)
    resolved: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # hostname -> addresses
    nics: dict[str, NicInfo] = Field(default_factory=dict)  # physical NICs only
    firewall: FirewallState = FirewallState()
    gpus: tuple[str, ...] | None = None  # NVML device names; None: no NVML on this node
    sshd: dict[str, str] | None = None  # `sshd -T`: effective settings, lower-case keys
    selinux: str | None = None  # enforcing | permissive | disabled; None: not present
    apparmor: bool | None = None
    nccl_env: dict[str, str] | None = None
    rdma: RdmaStack = RdmaStack()
    rdma_host: RdmaHost | None = None  # the GPU-to-fabric path (topology, ACS, RoCE QoS, pkeys, NCCL log)
    interval_s: float = 0.0
    rates: dict[str, float] = Field(default_factory=dict)  # "eth0/rx_errors" or "Tcp/RetransSegs" per second
    problems: tuple[str, ...] = ()  # probes that could not run, with why
