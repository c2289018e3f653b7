"""Pause, ECN and CNP counters around every pair: both ends' flow-control and congestion counters are
sampled (probe/flow.py's command, through the runner that runs the tool there) just before and just
after the client runs, and their growth is kept with the measurement. A pair below the Plan's rate whose
ends paused (PFC or 802.3x pause, InfiniBand's PortXmitWait) is reported `congested` with the reason
"flow control: ...", one whose ends exchanged CNPs or saw ECN marks "congestion: ...": the link did
not lose the bandwidth, the fabric held it back (NVIDIA/daqiri#250: pause took 21.7 % of a 400 GbE
link with every drop counter at zero). Judging is pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import Field

from gpunet.errors import ParseError
from gpunet.model.base import Frozen
from gpunet.model.plan import Interface, Plan
from gpunet.probe.flow import growth, is_congestion, is_pause, parse_flow_sample, sample_argv

CONGESTED = "congested"
SHOWN = 3  # counters named in a reason; the measurement keeps them all


class EndCounters(Frozen):
    """One end's flow counters over the measurement's window."""

    node: str
    role: Literal["client", "server"]
    growth: dict[str, int] = Field(default_factory=dict)  # "device:counter" -> increase
    unreadable: str | None = None  # nothing could be read there, and why


def end_devices(plan: Plan, iface: Interface) -> tuple[list[str], list[str]]:
    """The netdevs and RDMA devices whose counters describe an interface: a bond's members carry them."""
    node = next((n for n in plan.nodes if any(i is iface for i in n.interfaces)), None)
    members = [i for i in node.interfaces if i.master == iface.name] if node and iface.members else []
    ports = members or [iface]
    return [p.name for p in ports], [p.hca for p in ports if p.hca]


def flow_sample_argv(plan: Plan, iface: Interface, root: str) -> list[str]:
    netdevs, hcas = end_devices(plan, iface)
    return sample_argv(root, netdevs, hcas)


def end_counters(node: str, role: Literal["client", "server"], before: str | None, after: str | None) -> EndCounters:
    if before is None or after is None:
        return EndCounters(node=node, role=role, unreadable=f"could not read the flow counters on {node}")
    try:
        first, second = parse_flow_sample(before), parse_flow_sample(after)
    except ParseError as exc:
        return EndCounters(node=node, role=role, unreadable=str(exc))
    if not any(first.values()):
        return EndCounters(node=node, role=role, unreadable=f"no flow-control counter on {node} (not an mlx5/"
                                                            "RDMA NIC, or no ethtool)")
    return EndCounters(node=node, role=role, growth=growth(first, second))


def flow_verdict(status: str, reason: str | None, ends: tuple[EndCounters, ...]) -> tuple[str, str | None]:
    """A low pair whose ends paused or signalled congestion is congested, with the counters that say so;
    every other status stands."""
    if status != "low":
        return status, reason
    paused = _named(ends, is_pause)
    if paused:
        return CONGESTED, f"flow control: {paused} (pause frames: the fabric held the traffic back, no loss)"
    marked = _named(ends, is_congestion)
    if marked:
        return CONGESTED, f"congestion: {marked} (ECN marks / CNPs: senders were slowed)"
    return status, reason


def _named(ends: tuple[EndCounters, ...], kind: Callable[[str], bool]) -> str:
    found = [f"{end.node} {key} +{value}" for end in ends for key, value in sorted(end.growth.items()) if kind(key)]
    return ", ".join(found[:SHOWN]) + (f" and {len(found) - SHOWN} more" if len(found) > SHOWN else "")
