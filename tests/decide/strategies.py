"""Random small valid specs for the design-decision properties: every style, technology, media
choice, breakout, NIC card and dual-homing, few enough nodes that brute force stays fast."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st

from gpunet.design import design
from gpunet.errors import DesignError, SpecError
from gpunet.model.plan import Plan
from gpunet.model.spec import Spec
from gpunet.spec.checks import spec_problems

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
MEDIA = st.sampled_from([None, "dac", "acc", "aec", "aoc", "sr", "dr"])


@st.composite
def cabling(draw: st.DrawFn) -> dict[str, Any]:
    chosen = {tier: draw(MEDIA) for tier in ("node_leaf", "leaf_spine", "spine_core")}
    return {"breakout": draw(st.sampled_from([1, 2])), **{t: m for t, m in chosen.items() if m}}


@st.composite
def fabric(draw: st.DrawFn, styles: list[str]) -> dict[str, Any]:
    return {"style": draw(st.sampled_from(styles)),
            "switch": {"radix": draw(st.sampled_from([8, 16])), "port_speed": "400G"},
            "oversubscription": {"leaf": draw(st.sampled_from([1, 2, 3])), "spine": draw(st.sampled_from([1, 3]))},
            "min_spines": draw(st.sampled_from([1, 2, 4]))}


@st.composite
def spec_dicts(draw: st.DrawFn) -> dict[str, Any]:
    tech = draw(st.sampled_from(["roce", "infiniband"]))
    compute = {"subnet": "10.0.0.0/20", "technology": tech, "speed": "NDR" if tech == "infiniband" else "400G",
               "fabric": draw(fabric(["auto", "rail-optimized", "three-tier", "spine-leaf"])),
               "cabling": draw(cabling())}
    storage_fabric = draw(fabric(["auto", "spine-leaf"])) | {"dual_homed": draw(st.booleans())}
    storage = {"subnet": "10.1.0.0/20", "speed": "100G", "fabric": storage_fabric, "cabling": draw(cabling())}
    nics = draw(st.integers(1, 4))
    card = {"count": nics, "ports_per_card": draw(st.sampled_from([1, 2]))}
    groups = [_group("gpu", f"g[01-{draw(st.integers(2, 24)):02d}]", card | _model(draw(st.booleans())))]
    if draw(st.booleans()):
        groups.append(_group("other", f"o[01-{draw(st.integers(1, 6)):02d}]", {"count": nics}))
    return {"site": {"name": "t"}, "planes": {"compute": compute, "storage": storage}, "groups": groups}


def _model(named: bool) -> dict[str, str]:
    return {"model": "ConnectX-7"} if named else {}


def _group(name: str, nodes: str, compute: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "nodes": nodes, "gpus": 8 if name == "gpu" else 0,
            "nics": {"compute": compute, "storage": {"count": 2, "bond": {"name": "bond0"}}}}


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    """A designed plan of a random spec; specs no fabric can build are skipped."""
    try:
        spec = Spec.model_validate(draw(spec_dicts()))
    except ValueError:
        assume(False)
        raise
    assume(not spec_problems(spec))
    try:
        return design(spec)
    except (DesignError, SpecError):
        assume(False)
        raise
