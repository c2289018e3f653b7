"""The GPU node's RDMA path as read from the node: GPU/NIC distances, PCIe bridges and their ACS
controls, the RoCE QoS state of each NIC (trust, PFC, ECN, GIDs), partition keys, what NCCL reported,
and the flow-control counters (pause, ECN marks, CNPs). None everywhere means "not read" (the tool or
file is absent): a check then skips with the reason, it never passes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpunet.model.base import Frozen

# nvidia-smi's link types, nearest first (its legend): a GPU's best NIC is the one with the lowest rank.
LINK_RANK = {"X": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}


class TopoMatrix(Frozen):
    """`nvidia-smi topo -m`: for each GPU, the link type to every NIC (RDMA device name), and each
    GPU's CPU affinity and NUMA node (None where the column is empty or absent)."""

    gpus: tuple[str, ...]  # GPU0, GPU1, ...
    nics: tuple[str, ...]  # RDMA device names, from the NIC legend (or the old format's headers)
    links: dict[str, dict[str, str]]  # GPU -> NIC -> PIX | PXB | PHB | NODE | SYS
    numa: dict[str, int | None] = Field(default_factory=dict)  # GPU -> NUMA node

    def nearest(self, gpu: str) -> tuple[str, ...]:
        """The NICs at the GPU's shortest distance (several where a PIX pair shares a switch)."""
        row = self.links.get(gpu, {})
        best = min((LINK_RANK.get(v, 0) for v in row.values()), default=None)
        return tuple(nic for nic, v in row.items() if LINK_RANK.get(v, 0) == best)


class AcsControl(Frozen):
    """One bridge's ACSCtl bits as lspci prints them (True: '+')."""

    src_valid: bool
    trans_blk: bool
    req_redir: bool
    cmplt_redir: bool
    upstream_fwd: bool
    egress_ctrl: bool
    direct_trans: bool

    @property
    def redirects(self) -> bool:
        """Peer-to-peer requests or completions are sent up to the root complex (the IOMMU): the
        bits that cost GPUDirect its direct path. Source validation alone forwards peer traffic."""
        return self.req_redir or self.cmplt_redir or self.egress_ctrl


class PciDevice(Frozen):
    """One device of `lspci -vvv` (what the checks use of it)."""

    address: str  # 0000:00:01.1 (domain added where lspci left it out)
    description: str  # "PCI bridge: PLX Technology, Inc. PEX 8747 ..."
    secondary_bus: int | None = None  # bridges: "Bus: primary=00, secondary=01, subordinate=01"
    subordinate_bus: int | None = None
    numa_node: int | None = None
    acs: AcsControl | None = None  # None: no ACS capability shown (absent, or lspci not run as root)
    driver: str | None = None

    @property
    def is_bridge(self) -> bool:
        return self.secondary_bus is not None


class GidEntry(Frozen):
    """One row of `show_gids` or one populated /sys/class/infiniband/<hca>/ports/<p>/gids/<n>."""

    hca: str
    port: int
    index: int
    gid: str
    ipv4: str | None = None
    version: Literal["v1", "v2"] | None = None  # RoCE v1 / v2 (IB: None)
    netdev: str | None = None


class MlnxQos(Frozen):
    """`mlnx_qos -i IF`: the trust mode, the DSCP -> priority map, and which priorities PFC covers.
    A section the output did not show is None (not "off")."""

    trust: Literal["pcp", "dscp"]
    dscp2prio: dict[int, int] | None = None  # DSCP -> priority; None: not shown (pcp trust)
    pfc_enabled: tuple[int, ...] | None = None  # priorities with PFC on
    tc_of_priority: dict[int, int] = Field(default_factory=dict)


class EcnState(Frozen):
    """/sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio>: 1 = on (notification point: the receiver
    answers marked packets with CNPs; reaction point: the sender slows down on CNPs)."""

    np: dict[int, bool] = Field(default_factory=dict)
    rp: dict[int, bool] = Field(default_factory=dict)


class RoceNic(Frozen):
    """One RoCE NIC's QoS state: its netdev, its RDMA device, and what was read (None: not read)."""

    netdev: str
    hca: str | None = None
    qos: MlnxQos | None = None
    ecn: EcnState | None = None
    traffic_class: int | None = None  # /sys/class/infiniband/<hca>/tc/1/traffic_class (MLNX_OFED)


class NcclChannel(Frozen):
    """One `Channel NN/M : a[..] -> b[..] [send|receive] via NET/IB/<n>[/GDRDMA]` line."""

    rank: int
    transport: str  # NET/IB/0/GDRDMA, P2P/IPC, SHM/direct/direct, ...
    gdr: bool


class NcclLog(Frozen):
    """What an NCCL_DEBUG=INFO log says about the network path: the NET/IB device list, the network
    channels and whether they use GPUDirect RDMA, and in-network reduction (CollNet/SHARP)."""

    version: str | None = None
    ib_devices: tuple[str, ...] = ()  # "mlx5_0:1/RoCE" from "NET/IB : Using [0]mlx5_0:1/RoCE ..."
    ib_hca: str | None = None  # "NCCL_IB_HCA set to ...": the job's own setting
    net_channels: tuple[NcclChannel, ...] = ()  # channels over the network (NET/...) only
    collnet: bool | None = None  # True: CollNet/SHARP used; False: said unused; None: not mentioned
    collnet_lines: tuple[str, ...] = ()  # the lines that said so (evidence)
    lines: int = 0  # NCCL lines read

    @property
    def gdr_channels(self) -> int:
        return sum(c.gdr for c in self.net_channels)


class HostIommu(Frozen):
    """The IOMMU as the kernel was booted and runs: cmdline options and /sys/class/iommu entries."""

    cmdline: tuple[str, ...] = ()  # intel_iommu=..., amd_iommu=..., iommu=..., iommu.passthrough=...
    units: int = 0  # entries of /sys/class/iommu (dmar0, ivhd0, ...): 0 = no IOMMU active

    @property
    def mode(self) -> Literal["off", "passthrough", "translated"]:
        """off: no IOMMU remaps DMA; passthrough: devices DMA to physical addresses (iommu=pt);
        translated: every DMA, GPUDirect's peer writes included, goes through IOMMU page tables."""
        options = set(self.cmdline)
        if options & OFF_OPTIONS or not self.units:
            return "off"
        return "passthrough" if options & PASSTHROUGH_OPTIONS else "translated"


OFF_OPTIONS = {"intel_iommu=off", "amd_iommu=off", "iommu=off"}
PASSTHROUGH_OPTIONS = {"iommu=pt", "iommu.passthrough=1"}


class RdmaHost(Frozen):
    """Everything about the node's GPU-to-fabric path that the RDMA checks read (None: not read)."""

    topo: TopoMatrix | None = None
    pci: tuple[PciDevice, ...] | None = None
    pci_of_gpu: dict[str, str] = Field(default_factory=dict)  # GPU0 -> 0000:1b:00.0 (nvidia-smi)
    pci_of_hca: dict[str, str] = Field(default_factory=dict)  # mlx5_0 -> 0000:18:00.0 (sysfs device link)
    numa_of_hca: dict[str, int] = Field(default_factory=dict)  # /sys/class/infiniband/<hca>/device/numa_node
    iommu: HostIommu | None = None
    modules: tuple[str, ...] | None = None  # /proc/modules names
    roce: tuple[RoceNic, ...] = ()
    gids: tuple[GidEntry, ...] | None = None
    pkeys: dict[str, tuple[int, ...]] | None = None  # "mlx5_0/1" -> the port's P_Key table, by index
    nccl_log: NcclLog | None = None
