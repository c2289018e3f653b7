"""Lab addresses: every plan subnet re-homed inside the lab's own block of 198.18.0.0/15,
host index preserved (10.1.0.23 in the plan is <lab subnet>.23 in the lab)."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, ip_interface
from math import ceil, log2

from gpunet.errors import GpunetError
from gpunet.model.plan import Plan

LAB_RANGE = IPv4Network("198.18.0.0/15")  # RFC 2544 benchmarking range, never routed outside
LAB_BLOCK_PREFIX = 17  # four labs side by side, 32766 addresses each
MAX_LABS = 2 ** (LAB_BLOCK_PREFIX - LAB_RANGE.prefixlen)


class LabError(GpunetError):
    """The lab cannot be built, changed or found."""


def lab_block(slot: int) -> IPv4Network:
    if not 0 <= slot < MAX_LABS:
        raise LabError(f"at most {MAX_LABS} labs side by side; take one down first")
    return list(LAB_RANGE.subnets(new_prefix=LAB_BLOCK_PREFIX))[slot]


class BlockCarver:
    """Aligned sub-networks handed out from a block, in request order."""

    def __init__(self, block: IPv4Network) -> None:
        self.block, self.cursor = block, 0

    def take(self, addresses: int) -> IPv4Network:
        prefix = 32 - max(2, ceil(log2(max(addresses, 2))))
        size = 2 ** (32 - prefix)
        self.cursor = ceil(self.cursor / size) * size
        if self.cursor + size > self.block.num_addresses:
            raise LabError(f"the lab block {self.block} is full; use a smaller --max-nodes")
        net = IPv4Network((int(self.block.network_address) + self.cursor, prefix))
        self.cursor += size
        return net


@dataclass(frozen=True)
class PlaneAddressing:
    plan_subnet: IPv4Network
    lab_subnet: IPv4Network

    def to_lab(self, plan_address: str) -> IPv4Interface:
        index = int(ip_interface(plan_address).ip) - int(self.plan_subnet.network_address)
        return IPv4Interface((int(self.lab_subnet.network_address) + index, self.lab_subnet.prefixlen))

    def host_address(self, gateway: str | None) -> IPv4Interface:
        """Where the host sits on the management plane: the plan's gateway, else the last address."""
        if gateway is not None:
            return self.to_lab(gateway)
        return IPv4Interface((IPv4Address(int(self.lab_subnet.broadcast_address) - 1), self.lab_subnet.prefixlen))


def plane_addressing(plan: Plan, carver: BlockCarver) -> dict[str, PlaneAddressing]:
    """A lab subnet per plane, large enough for the highest host index the (sliced) plan uses."""
    result: dict[str, PlaneAddressing] = {}
    for plane in plan.planes:
        subnet = IPv4Network(plane.subnet)
        highest = max((int(ip_interface(i.address).ip) - int(subnet.network_address)
                       for n in plan.nodes for i in n.interfaces if i.plane == plane.name and i.address),
                      default=1)
        if plane.gateway:
            highest = max(highest, int(IPv4Address(plane.gateway)) - int(subnet.network_address))
        # +3: network, broadcast and the host's own address stay clear of every node index
        result[plane.name] = PlaneAddressing(subnet, carver.take(max(highest + 3, 256)))
    return result
