"""What a simulation reports: per message size what nccl-tests would print (time, algbw, busbw in
GB/s of 10^9 bytes), the cables that set the pace, and the same job on a non-blocking fabric of
the same NICs."""

from __future__ import annotations

from pydantic import Field, computed_field

from gpunet.model.base import Frozen


class SizeRow(Frozen):
    bytes: int
    time_us: float
    algbw: float  # GB/s: bytes / time, as nccl-tests
    busbw: float  # GB/s: algbw times the collective's factor


class Bottleneck(Frozen):
    """A full cable direction that the slowest transfers wait on."""

    cable: str  # both ends as cabling.csv has them: 'gpu001:ib0 comp-leaf001:1'
    direction: str  # 'comp-leaf001:33 -> comp-spine001:1'
    tier: str
    gbps: float
    connections: int  # of the slowest ones, how many have this as their bottleneck


class SimReport(Frozen):
    scenario: str
    plane: str
    collective: str
    algorithm: str
    routing: str
    seed: int
    nodes: int
    gpus_per_node: int
    ranks: int
    rails: int
    connections: int  # per peer and rail
    down: tuple[str, ...] = ()
    rows: tuple[SizeRow, ...]
    bottlenecks: tuple[Bottleneck, ...] = ()
    peak_busbw: float  # GB/s as the message grows without bound (the bandwidth term alone)
    limited_by: str  # network | nvlink | latency | disconnected
    nonblocking_busbw: float | None = None  # GB/s at the largest size, same NICs, no fabric in between
    vs_nonblocking: float | None = None  # busbw / nonblocking_busbw at the largest size
    spine_share: float = Field(ge=0, le=1)  # of the bytes on the network, the part that crosses a spine
    disconnected: int = 0  # transfers with no path
    notes: tuple[str, ...] = ()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def busbw(self) -> float:
        """Bus bandwidth at the largest size."""
        return self.rows[-1].busbw if self.rows else 0.0
