"""The fast paths the scale work added give exactly what the slow ones give: a canonical IPv4
interface address validated without ipaddress objects, models built as trusted (design's cables,
its addressed interfaces) equal to model_construct / model_copy, field for field and in JSON."""

from __future__ import annotations

import random
from collections.abc import Callable
from ipaddress import IPv4Interface, IPv4Network
from pathlib import Path

import pytest

from gpunet.design.fabric import link
from gpunet.fabric.cabling import VERDICT_SET, CableVerdict
from gpunet.fabric.ibnetdiscover import parse_ibnetdiscover
from gpunet.model.base import trusted, updated
from gpunet.model.plan import Interface, Link, Port
from gpunet.model.types import _as_interface, _as_network, check_subnet

FIXTURES = Path(__file__).parent.parent / "fixtures"


def slow_interface(value: str) -> str:
    """What _as_interface gave before the fast path (the special blocks aside)."""
    return str(IPv4Interface(value))


def test_a_canonical_address_is_taken_as_the_slow_path_takes_it() -> None:
    rng = random.Random(31)
    for _ in range(20_000):
        octets = [rng.choice([10, 172, 192, 198, 100]), rng.randrange(256), rng.randrange(256), rng.randrange(256)]
        address = ".".join(map(str, octets))
        value = f"{address}/{rng.randrange(33)}"
        assert _as_interface(value) == slow_interface(value)


@pytest.mark.parametrize(("value", "normal"), [
    ("10.0.0.5/255.255.255.0", "10.0.0.5/24"), ("10.0.0.5/024", "10.0.0.5/24"),
])
def test_other_spellings_still_go_the_slow_way(value: str, normal: str) -> None:
    assert _as_interface(value) == normal


@pytest.mark.parametrize(("value", "message"), [
    ("10.0.0.05/24", "Leading zeros"), ("256.1.1.1/8", "256"), ("10.0.0.5/33", "netmask"),
    ("10.0.0.\u0663/24", "decimal digits"), ("127.0.0.1/8", "overlaps 127.0.0.0/8"),
    ("0.0.0.1/8", "0.0.0.1/32 overlaps 0.0.0.0/8"), ("224.1.1.1/4", "overlaps 224.0.0.0/4"),
])
def test_bad_addresses_are_refused_with_the_same_words(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _as_interface(value)


def test_a_trusted_cable_is_the_constructed_one() -> None:
    built = link("compute", "node_leaf", ("gpu001", "ib0"), ("comp-leaf001", "1"), 400)
    fields = set(Link.model_fields)
    made = Link.model_construct(fields, plane="compute", tier="node_leaf", gbps=400,
                                a=Port.model_construct(set(Port.model_fields), device="gpu001", port="ib0"),
                                b=Port.model_construct(set(Port.model_fields), device="comp-leaf001", port="1"))
    assert built == made and hash(built) == hash(made)
    assert built.model_dump_json() == made.model_dump_json()
    assert built.__getstate__() == made.__getstate__()


def test_an_updated_interface_is_the_copied_one() -> None:
    iface = Interface(name="ib0", plane="compute", speed_gbps=400, mtu=4092, rail=0)
    change = {"address": "10.0.0.5/24", "hostname": "gpu001-ib0"}
    fast, slow = updated(iface, change), iface.model_copy(update=change)
    assert fast == slow and fast.model_dump_json() == slow.model_dump_json()
    assert fast.__getstate__() == slow.__getstate__()


def test_the_ibnetdiscover_parsers_models_are_the_validated_ones() -> None:
    """Nodes and links the parser builds as trusted (it checked and typed every value) are what
    validating the same values builds, down to the fields set; so is a cable's verdict."""
    text = (FIXTURES / "ibnetdiscover" / "ufm-sdk-lab-mixed-fdr-fdr10-edr-hdr-full" / "output.txt").read_text()
    topology = parse_ibnetdiscover(text)
    assert topology.nodes and topology.links
    for model in [*topology.nodes, *topology.links]:
        validated = type(model).model_validate(model.model_dump())
        assert model == validated and model.__getstate__() == validated.__getstate__()
    verdict = trusted(CableVerdict, VERDICT_SET, {"plane": "compute", "a": "gpu001:ib0", "b": "comp-leaf001:1",
                                                  "verdict": "ok", "observed": ""})
    slow = CableVerdict(plane="compute", a="gpu001:ib0", b="comp-leaf001:1", verdict="ok")
    assert verdict == slow and verdict.__getstate__() == slow.__getstate__()


def test_a_canonical_network_is_taken_as_the_slow_path_takes_it() -> None:
    """Host bits, prefixes, special blocks: the same value or the same refusal, word for word."""
    rng = random.Random(31)
    for _ in range(20_000):
        prefix, value = rng.randrange(33), rng.getrandbits(32)
        if rng.random() < 0.7:
            value &= ~((1 << (32 - prefix)) - 1) & 0xFFFFFFFF
        text = f"{value >> 24}.{(value >> 16) & 255}.{(value >> 8) & 255}.{value & 255}/{prefix}"
        assert outcome(_as_network, text) == outcome(lambda t: str(check_subnet(IPv4Network(t))), text)


def outcome(check: Callable[[str], str], text: str) -> tuple[str | None, str | None]:
    try:
        return check(text), None
    except ValueError as exc:
        return None, str(exc)
