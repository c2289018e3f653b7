"""Media per tier: the defaults by technology and speed, the spec's choice, breakout cages counted
by hand, and cabling a spec cannot have refused where it is written."""

from __future__ import annotations

import pytest

from gpunet.design import design
from gpunet.design.bom import plan_bom
from gpunet.design.media import default_media
from gpunet.errors import SpecError
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from tests.decide.examples import example_plan


@pytest.mark.parametrize(("technology", "tier", "gbps", "media"), [
    ("ethernet", "node_leaf", 1, "rj45"), ("ethernet", "node_leaf", 25, "dac"), ("roce", "node_leaf", 200, "aec"),
    ("roce", "node_leaf", 400, "sr"), ("infiniband", "node_leaf", 200, "dac"), ("infiniband", "node_leaf", 400, "sr"),
    ("infiniband", "leaf_spine", 400, "sr"), ("ethernet", "spine_core", 100, "sr"),
    ("infiniband", "spine_core", 400, "dr"), ("roce", "direct", 100, "dac"),
])
def test_default_media_by_technology_tier_and_speed(technology: str, tier: str, gbps: int, media: str) -> None:
    assert default_media(technology, tier, gbps) == media


def test_twin_port_cages_share_one_transceiver() -> None:
    """Scalable unit, compute: 8 rail leaves x 32 nodes, 32 uplinks each to 4 spines, 2 ports a cage."""
    lines = {(b.item, b.tier, b.model): b for b in plan_bom(example_plan("scalable-unit")) if b.plane == "compute"}
    node_side, leaf_side = lines["transceiver", "node_leaf", "ib-sr-xcvr-400G"], lines[
        "transceiver", "node_leaf", "ib-sr-xcvr-2x400G"]
    assert (node_side.count, node_side.ports) == (256, 256)  # one single-port module per HCA
    assert (leaf_side.count, leaf_side.ports) == (8 * 32 // 2, 256)  # 16 cages per rail leaf
    uplinks = lines["transceiver", "leaf_spine", "ib-sr-xcvr-2x400G"]
    assert (uplinks.count, uplinks.ports) == (8 * 16 + 4 * 64 // 2, 512)  # leaf cages, then spine cages
    assert lines["cable", "leaf_spine", "sr-fiber-400G"].count == 256  # a fiber a link
    assert lines["nic", "node", "ConnectX-7-NDR"].count == 256


def test_copper_breakout_is_one_splitter_a_cage() -> None:
    text = example_text("scalable-unit").replace("cabling: {breakout: 2}", "cabling: {breakout: 2, node_leaf: dac}")
    bom = plan_bom(design(parse_spec(text)[0]))
    splitter = next(b for b in bom if b.plane == "compute" and b.tier == "node_leaf" and b.item == "cable")
    assert (splitter.model, splitter.count, splitter.cables) == ("ib-dac-2x400G-split", 128, 256)
    storage = [b for b in bom if b.plane == "storage" and b.item == "nic"]
    assert {(b.model, b.count, b.ports) for b in storage} == {("ConnectX-7-2x200G", 32, 64), ("eth-nic-200G", 8, 8)}


@pytest.mark.parametrize(("old", "new", "where"), [
    ("{breakout: 2}", "{breakout: 3}", ":36:15: planes.compute.cabling.breakout: a 64-port switch"),
    ("{breakout: 2}", "{leaf_spine: rj45}", ":36:15: planes.compute.cabling.leaf_spine: rj45 carries"),
    ("{breakout: 2}", "{node_leaf: copper}", ":36:15: planes.compute.cabling.node_leaf: Input should"),
])
def test_cabling_a_spec_cannot_have_is_located(old: str, new: str, where: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(example_text("scalable-unit").replace(old, new))
    assert any(where in str(p) for p in caught.value.problems), caught.value.problems
