from __future__ import annotations

import pytest

from gpunet.model.units import speed_gbps


@pytest.mark.parametrize(("name", "gbps"), [("25G", 25), ("400g", 400), ("100GbE", 100), ("NDR", 400),
                                            ("hdr", 200), ("XDR", 800), ("800Gbps", 800)])
def test_speed_names(name: str, gbps: int) -> None:
    assert speed_gbps(name) == gbps


def test_unknown_speed_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown speed '300G'.*400G"):
        speed_gbps("300G")
