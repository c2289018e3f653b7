"""The spec's switch-side keys: a routed plane's pools, ASNs and session options
(planes.X.routing), and the switches' own management subnet (site.switch_management)."""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Literal

from pydantic import Field, model_validator

from gpunet.model.base import Frozen
from gpunet.model.types import Subnet


class SwitchManagementSpec(Frozen):
    """A subnet of its own for the switches' management ports (their out-of-band eth0/mgmt0), when
    they do not share the oob (or management) plane's subnet."""

    subnet: Subnet
    gateway: IPv4Address | None = None  # never handed to a switch as its own address

    @model_validator(mode="after")
    def _gateway_inside(self) -> SwitchManagementSpec:
        if self.gateway is not None and (self.gateway not in self.subnet or self.gateway in (
                self.subnet.network_address, self.subnet.broadcast_address)):
            raise ValueError(f"gateway {self.gateway} is not a host address of {self.subnet}")
        return self


# Private ASNs (RFC 6996): a fabric's internal ASNs never reach the Internet.
PRIVATE_ASNS_2BYTE = (64512, 65534)
PRIVATE_ASNS_4BYTE = (4200000000, 4294967294)
Peering = Literal["numbered", "unnumbered"]


def private_asn_range(asn: int) -> tuple[int, int] | None:
    """The private range holding `asn`, or None for a public or reserved one."""
    return next(((low, high) for low, high in (PRIVATE_ASNS_2BYTE, PRIVATE_ASNS_4BYTE) if low <= asn <= high), None)


class RoutingSpec(Frozen):
    """A routed (eBGP, RFC 7938) Ethernet or RoCE fabric: where the switches' loopbacks and the /31s
    of switch-to-switch cables come from, the ASNs, and how sessions form. Unset pools and ASNs take
    per-plane defaults (design/routing.py)."""

    loopbacks: Subnet | None = None  # one /32 per switch, also its BGP router id
    p2p: Subnet | None = None  # one /31 per switch-to-switch cable
    asn_base: int | None = Field(None, ge=1, le=4294967294)  # first ASN handed out
    asn_last: int | None = Field(None, ge=1, le=4294967294)  # default: the top of asn_base's private range
    peering: Peering = "numbered"  # numbered /31s, or BGP unnumbered (IPv6 link-local, RFC 5549)
    bfd: bool = False  # BFD on every session: sub-second failure detection where links fail silently

    @model_validator(mode="after")
    def _private_asns(self) -> RoutingSpec:
        base = self.asn_base
        if base is not None and private_asn_range(base) is None:
            raise ValueError(f"asn_base {base} is not a private ASN (RFC 6996: 64512-65534, or 4200000000-"
                             "4294967294): a fabric's ASNs must never be one someone else owns")
        if self.asn_last is not None:
            if base is None:
                raise ValueError("asn_last needs asn_base")
            if private_asn_range(self.asn_last) != private_asn_range(base) or self.asn_last < base:
                raise ValueError(f"asn_last {self.asn_last} is not above asn_base {base} in the same private range")
        return self
