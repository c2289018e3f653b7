"""Names the design gives: interface devices, per-plane hostnames, switch names."""

from __future__ import annotations

import functools

from gpunet.model.spec import PLANE_SHORT


def plane_hostname(node: str, plane: str, ifname: str, addressed_count: int) -> str:
    """gpu001 on management; gpu001-stor for one address; gpu001-ib3 when a plane has several."""
    if plane == "management" and addressed_count == 1:
        return node
    if addressed_count == 1:
        return f"{node}-{PLANE_SHORT[plane]}"
    return f"{node}-{ifname}"


@functools.lru_cache(maxsize=1 << 16)
def switch_name(plane: str, tier: str, index: int) -> str:
    """comp-leaf001: fixed-width index so names stay stable as the fabric grows. Kept: every cable
    end names its switch, and one string per switch instead of one per end is ~300 MB less at 1M GPUs."""
    return f"{PLANE_SHORT[plane]}-{tier}{index + 1:03d}"


@functools.lru_cache(maxsize=4096)
def port_name(number: int) -> str:
    """A switch port's name ("1".."radix"), one string per number for the same reason."""
    return str(number)
