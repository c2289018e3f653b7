"""Link speeds: Ethernet names (25G, 400G) and InfiniBand generations (HDR, NDR, XDR)."""

from __future__ import annotations

# 4x links, the width every data-centre HCA and switch port uses.
INFINIBAND_SPEEDS_GBPS: dict[str, int] = {
    "SDR": 10, "DDR": 20, "QDR": 40, "FDR": 56, "EDR": 100, "HDR": 200, "NDR": 400, "XDR": 800,
}
ETHERNET_SPEEDS_GBPS: dict[str, int] = {
    f"{g}G": g for g in (1, 10, 25, 40, 50, 100, 200, 400, 800)
}
KNOWN_SPEEDS = {**ETHERNET_SPEEDS_GBPS, **INFINIBAND_SPEEDS_GBPS}


def speed_name(name: str) -> str:
    """The canonical name of a speed, case-insensitive: '400g', '400GbE' -> '400G'; 'ndr' -> 'NDR'."""
    key = name.upper().removesuffix("BE").removesuffix("BPS")
    if key not in KNOWN_SPEEDS:
        known = ", ".join(KNOWN_SPEEDS)
        raise ValueError(f"unknown speed {name!r}; use one of {known}")
    return key


def speed_gbps(name: str) -> int:
    """Gbit/s of a speed name: '400G', '400g', '400GbE', 'NDR'."""
    return KNOWN_SPEEDS[speed_name(name)]
