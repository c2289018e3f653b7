"""The traffic the cluster needs, as data: one list of flows in the Plan that every consumer reads
(firewall rules, Slurm and NCCL settings, the scrape config, doctor, the lab tests), so they
cannot disagree. A flow says who may open connections to whom, on which plane, to which ports."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import StringConstraints, model_validator

from gpunet.model.base import Frozen
from gpunet.model.spec import PlaneName
from gpunet.model.types import HostOrAddress, Name, PortRange, PortsText, SubnetText, Why, port_range

NODE_EXPORTER_PORT = 9100
GPUNET_EXPORTER_PORT = 9842  # gpunet's own exporter (monitor/); node_exporter keeps 9100
PROBE_PORT = 33434  # UDP, traceroute's: `gpunet localize` and doctor's path-MTU probes between nodes
Protocol = Literal["tcp", "udp", "any"]
FoldedNodes = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9,\[\]-]*$")]  # gpu[001-032],login01


class Flow(Frozen):
    """Connections `protocol`/`ports` opened from `from_nodes` (their addresses on `plane`) and
    `from_subnets` to `to_nodes` on `plane`, or to `to_hosts` outside the plan (NTP, DNS)."""

    service: Name
    protocol: Protocol
    ports: PortsText = ""
    plane: PlaneName
    from_nodes: FoldedNodes = ""
    from_subnets: tuple[SubnetText, ...] = ()
    from_anywhere: bool = False  # the way in (login nodes' SSH): any source address
    to_nodes: FoldedNodes = ""
    to_hosts: tuple[HostOrAddress, ...] = ()
    why: Why = ""
    declared: bool = False  # written in the spec's `flows:`, not derived

    @model_validator(mode="after")
    def _consistent(self) -> Flow:
        port_range(self.ports)  # raises on a bad range
        if (self.protocol == "any") != (self.ports == ""):
            raise ValueError("a flow names ports exactly when its protocol is tcp or udp")
        if not (self.from_nodes or self.from_subnets or self.from_anywhere) or not (self.to_nodes or self.to_hosts):
            raise ValueError(f"flow {self.service}: needs a source and a destination")
        return self

    @property
    def port_range(self) -> PortRange | None:
        return port_range(self.ports)

    @property
    def inbound(self) -> bool:
        """Accepted by nodes of the plan (the firewall's business); else only opened from them."""
        return bool(self.to_nodes)


def sample_ports(flow: Flow) -> list[int]:
    """Ports a test or a probe tries: both ends of a range, or one port of any-port flows."""
    span = flow.port_range
    if span is None:
        return [47001]  # any port: one the plan gives no other service
    return sorted({span.low, span.high})

