"""What each cable is made of, and the names its parts take in the bill of materials.

A tier's media is the spec's choice (planes.<plane>.cabling) or a default by technology, tier and
speed, sized for the distance such a run usually spans: node to leaf in or beside the rack (copper:
DAC up to 100G, and InfiniBand HDR; active electrical cables at 200G Ethernet), and above 200G on
optics, as GPU servers reach their rail leaves across the row (NVIDIA's SuperPOD and Spectrum-X
reference designs); leaf to spine across rows (multimode optics); spine to core between rows or
halls (single-mode above 100G).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpunet.errors import SpecProblem
from gpunet.model.spec import Media, PlaneName, Spec
from gpunet.model.units import speed_gbps

INTEGRATED: frozenset[str] = frozenset({"dac", "acc", "aec", "aoc", "rj45"})  # one assembly end to end
OPTICAL: frozenset[str] = frozenset({"sr", "dr"})  # a transceiver at each end, a fiber between
MEDIA_MAX_GBPS = {"rj45": 10}  # BASE-T ends at 10G
TECH_PREFIX = {"infiniband": "ib", "roce": "eth", "ethernet": "eth"}

# (up to Gb/s, media) per technology and tier, first match wins; above the last: the last media.
Steps = tuple[tuple[int, Media], ...]
_EDGE_ETH: Steps = ((1, "rj45"), (100, "dac"), (200, "aec"), (10**6, "sr"))
_EDGE_IB: Steps = ((200, "dac"), (10**6, "sr"))
_LEAF_SPINE: Steps = ((1, "rj45"), (10**6, "sr"))
_SPINE_CORE: Steps = ((1, "rj45"), (100, "sr"), (10**6, "dr"))
DEFAULT_MEDIA: dict[str, dict[str, Steps]] = {
    "ethernet": {"direct": _EDGE_ETH, "node_leaf": _EDGE_ETH, "leaf_spine": _LEAF_SPINE, "spine_core": _SPINE_CORE},
    "roce": {"direct": _EDGE_ETH, "node_leaf": _EDGE_ETH, "leaf_spine": _LEAF_SPINE, "spine_core": _SPINE_CORE},
    "infiniband": {"direct": _EDGE_IB, "node_leaf": _EDGE_IB, "leaf_spine": _LEAF_SPINE, "spine_core": _SPINE_CORE},
}


def default_media(technology: str, tier: str, gbps: int) -> Media:
    steps = DEFAULT_MEDIA[technology][tier]
    return next((media for limit, media in steps if gbps <= limit), steps[-1][1])


def media_of(technology: str, chosen: Media | None, tier: str, gbps: int) -> Media:
    """A cable's media: the spec's choice for its plane and tier, else the default."""
    return chosen or default_media(technology, tier, gbps)


def cable_model(technology: str, media: Media, gbps: int, legs: int = 1, split: bool = False) -> str:
    """ib-dac-400G; a twin assembly between two 2-port cages ib-dac-2x400G; a cage split to single
    ports ib-dac-2x400G-split; the fiber of an optical link sr-fiber-400G."""
    if media in OPTICAL:
        return f"{media}-fiber-{gbps}G"
    width = f"{legs}x{gbps}G" if legs > 1 else f"{gbps}G"
    return f"{TECH_PREFIX[technology]}-{media}-{width}{'-split' if split and legs > 1 else ''}"


def transceiver_model(technology: str, media: Media, gbps: int, legs: int = 1) -> str:
    """ib-sr-xcvr-400G for one port; ib-sr-xcvr-2x400G for a twin-port cage."""
    width = f"{legs}x{gbps}G" if legs > 1 else f"{gbps}G"
    return f"{TECH_PREFIX[technology]}-{media}-xcvr-{width}"


def nic_model(technology: str, gbps: int) -> str:
    """The NIC a group gets in the bill of materials when the spec names none: ib-hca-400G, eth-nic-25G."""
    return f"ib-hca-{gbps}G" if technology == "infiniband" else f"eth-nic-{gbps}G"


def cabling_problems(spec: Spec) -> Iterator[SpecProblem]:
    """Media that cannot carry the tier's speed (BASE-T above 10G), cages that do not divide the radix."""
    for name, plane in spec.planes.items():
        cabling, switch = plane.cabling, plane.fabric.switch
        if switch.radix % cabling.breakout:
            yield SpecProblem(f"a {switch.radix}-port switch does not split into cages of {cabling.breakout} "
                              "ports", ("planes", name, "cabling", "breakout"),
                              "breakout is the switch ports one cage holds: 2 for twin-port 2x400G OSFP")
        for tier, media in cabling.chosen().items():
            gbps = _tier_gbps(spec, name, tier)
            if gbps > MEDIA_MAX_GBPS.get(media, gbps):
                yield SpecProblem(f"{media} carries up to {MEDIA_MAX_GBPS[media]}G; this tier runs at {gbps}G",
                                  ("planes", name, "cabling", tier), "use dac, aoc, sr or dr")


def _tier_gbps(spec: Spec, plane: PlaneName, tier: str) -> int:
    """The fastest cable of a tier: switch ports above the leaves, the fastest NIC below."""
    plane_spec = spec.planes[plane]
    if tier in ("leaf_spine", "spine_core"):
        return plane_spec.fabric.switch.port_gbps
    nics = [g.nics[plane] for g in spec.groups if plane in g.nics]
    return max((speed_gbps(n.speed) if n.speed else plane_spec.gbps for n in nics), default=plane_spec.gbps)
