"""nccl-tests' bus bandwidth when NCCL reduced in the network (CollNet/SHARP). nccl-tests computes
busbw from the algorithm bandwidth with the ring's factor (all-reduce: 2(n-1)/n), the bytes each rank
moves over a ring. With SHARP each rank sends its buffer up once and receives the result once: per
direction its NIC carries the algorithm bandwidth, so that, not the ring figure, is what the link
carried and what a line rate bounds (a ring busbw would read up to twice the NIC's rate)."""

from __future__ import annotations

import statistics

from gpunet.bench.nccl import NcclResult
from gpunet.errors import ParseError
from gpunet.probe.nccl_log import parse_nccl_debug_log

# INFO lines that say how NCCL connected (CollNet among them), on the job that may use SHARP.
DEBUG_ENV = ("NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET")


def collnet_used(raw: str) -> str | None:
    """The log line saying CollNet/SHARP was used, or None (not used, or not said)."""
    try:
        log = parse_nccl_debug_log(raw)
    except ParseError:
        return None
    return log.collnet_lines[0] if log.collnet else None


def busbw_of(result: NcclResult, raw: str) -> tuple[float | None, str | None]:
    """The job's bus bandwidth (GB/s) and, where CollNet/SHARP carried it, why it is the mean
    algorithm bandwidth instead of nccl-tests' ring figure."""
    used = collnet_used(raw)
    if used is None:
        return result.avg_busbw_gbs, None
    timings = [t.algbw_gbs for r in result.rows for t in (r.out_of_place, r.in_place) if t]
    if not timings:
        return result.avg_busbw_gbs, None
    return round(statistics.fmean(timings), 3), (
        f"CollNet/SHARP reduced in the network ({used[:120]}): busbw is the mean algbw, the bytes each NIC "
        f"moved per direction; nccl-tests' ring formula gave {result.avg_busbw_gbs} GB/s")
