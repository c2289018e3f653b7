"""An InfiniBand partition: the P_Key the subnet manager gives the plane's ports, and its index in each
port's P_Key table, which is what NCCL_IB_PKEY names (NCCL sets the QP's pkey_index from it)."""

from __future__ import annotations

from pydantic import Field

from gpunet.model.base import Frozen

MEMBERSHIP_BIT = 0x8000  # set: full member; clear: limited member (cannot talk to other limited members)


class Partition(Frozen):
    key: int = Field(ge=1, le=0x7FFE)  # the 15-bit partition number; 0x7fff is the default partition
    index: int = Field(1, ge=0, le=127)  # where the SM puts it in every port's table (index 0: default)

    def matches(self, table_value: int) -> bool:
        """A table entry is this partition, as a full member."""
        return table_value & 0x7FFF == self.key and bool(table_value & MEMBERSHIP_BIT)
