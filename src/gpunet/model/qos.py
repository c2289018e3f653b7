"""The RoCE lossless class: chosen once per plane and read by both sides of every cable, so the
hosts (NCCL_IB_TC, trust/PFC/ECN settings) and the switches (DSCP -> TC maps, PFC, WRED/ECN, the
CNP queue) can never disagree about which priority is lossless.

Defaults are the values NVIDIA's RoCE configuration guides and Cumulus NVUE's `qos roce` profile
use: RoCE data on DSCP 26, switch priority/traffic class 3 (lossless, PFC), ECN marking on it;
congestion notification packets (CNP) on DSCP 48, priority 6 (strict priority queue).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from gpunet.model.base import Frozen

ECT0 = 0b10  # the ECN field of an ECN-capable transport: lets a switch mark instead of drop


class RoceQos(Frozen):
    """Which DSCP and priority RoCE data and its CNPs ride, and whether ECN marks them."""

    dscp: int = Field(26, ge=0, le=63)
    priority: int = Field(3, ge=0, le=7)  # 802.1p priority = switch traffic class; PFC on this one
    cnp_dscp: int = Field(48, ge=0, le=63)
    cnp_priority: int = Field(6, ge=0, le=7)
    ecn: bool = True

    @model_validator(mode="after")
    def _apart(self) -> RoceQos:
        if self.dscp == self.cnp_dscp or self.priority == self.cnp_priority:
            raise ValueError("RoCE data and CNPs need their own DSCP and priority (a CNP must not wait behind "
                             "the data it is throttling)")
        if self.priority == 0:
            raise ValueError("priority 0 is the default class every untagged frame rides; a lossless RoCE class "
                             "there pauses all other traffic too (use 3, the usual choice)")
        return self

    @property
    def traffic_class(self) -> int:
        """The IP traffic class byte a host sets on RoCE packets (NCCL_IB_TC): DSCP << 2, ECT(0) when
        ECN is on (26 -> 106)."""
        return self.dscp << 2 | (ECT0 if self.ecn else 0)
