"""The small lab every lab test (and later checks, bench and monitor tests) runs against."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpunet.lab.state import LabState
from tests.lab.helpers import built_lab
from tests.labs import lab_id

SMALL_LAB_ID = lab_id("zt")


@pytest.fixture(scope="module")
def small_lab() -> Iterator[LabState]:
    """8 servers, 2 leaves, 2 spines, management (a bridge) and compute (routed, ECMP) planes;
    always torn down, whatever the tests did."""
    with built_lab(SMALL_LAB_ID) as state:
        yield state
