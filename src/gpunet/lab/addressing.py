"""Lab addresses: every plan subnet re-homed inside the lab's own block of 198.18.0.0/15,
host index preserved (10.1.0.23 in the plan is <lab subnet>.23 in the lab)."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, ip_interface
from math import ceil, log2

from gpunet.errors import LabError
from gpunet.model.plan import Plan

LAB_RANGE = IPv4Network("198.18.0.0/15")  # RFC 2544 benchmarking range, never routed outside
LAB_BLOCK_PREFIX = 19  # sixteen labs side by side (parallel test workers, several admins), 8190 addresses each
MAX_LABS = 2 ** (LAB_BLOCK_PREFIX - LAB_RANGE.prefixlen)


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
    """Plan subnet -> lab subnet. Host indexes are kept unless `dense` renumbers them 1, 2, ...
    (a slice of a large plan: gpu2048's index does not fit a lab block)."""

    plan_subnet: IPv4Network
    lab_subnet: IPv4Network
    dense: dict[int, int] | None = None

    def to_lab(self, plan_address: str) -> IPv4Interface:
        index = int(ip_interface(plan_address).ip) - int(self.plan_subnet.network_address)
        if self.dense is not None:
            index = self.dense[index]
        return IPv4Interface((int(self.lab_subnet.network_address) + index, self.lab_subnet.prefixlen))

    def host_address(self, gateway: str | None) -> IPv4Interface:
        """Where the host sits on the management plane: the plan's gateway, else the last address."""
        if gateway is not None:
            return self.to_lab(gateway)
        return IPv4Interface((IPv4Address(int(self.lab_subnet.broadcast_address) - 1), self.lab_subnet.prefixlen))


def plane_addressing(plan: Plan, block: IPv4Network, *, dense: bool = False
                     ) -> tuple[dict[str, PlaneAddressing], BlockCarver]:
    """A lab subnet per plane, keeping host indexes (or, `dense`, renumbered 1, 2, ...); the carver
    goes on to hand out the switches' addresses from what is left."""
    carver = BlockCarver(block)
    place = _dense if dense else _kept
    return {p.name: place(plan, p.name, carver) for p in plan.planes}, carver


def _indexes(plan: Plan, plane: str) -> tuple[IPv4Network, list[int]]:
    """The plan subnet and the host indexes the (sliced) plan uses on it, gateway and switch
    management addresses included (lab/management.py gives those switches a port on the plane)."""
    spec = next(p for p in plan.planes if p.name == plane)
    subnet = IPv4Network(spec.subnet)
    used = [int(ip_interface(i.address).ip) - int(subnet.network_address)
            for n in plan.nodes for i in n.interfaces if i.plane == plane and i.address]
    managed = [ip_interface(s.management).ip for s in plan.switches if s.management]
    used += [int(ip) - int(subnet.network_address) for ip in managed if ip in subnet]
    if spec.gateway:
        used.append(int(IPv4Address(spec.gateway)) - int(subnet.network_address))
    return subnet, sorted(set(used))


def _kept(plan: Plan, plane: str, carver: BlockCarver) -> PlaneAddressing:
    subnet, used = _indexes(plan, plane)
    # network and broadcast stay clear of every index, and the host's own address (the last one)
    # where the plane has no gateway for it to take (switch management fills a plane from the top)
    slack = 2 if next(p for p in plan.planes if p.name == plane).gateway else 3
    return PlaneAddressing(subnet, carver.take(max(max(used, default=1) + slack, 256)))


def _dense(plan: Plan, plane: str, carver: BlockCarver) -> PlaneAddressing:
    subnet, used = _indexes(plan, plane)
    renumber = {index: rank for rank, index in enumerate(used, start=1)}
    return PlaneAddressing(subnet, carver.take(max(len(used) + 3, 256)), renumber)
