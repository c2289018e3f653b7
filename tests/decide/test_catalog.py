"""A parts catalog is read like a spec: each problem located at file:line:col with a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunet.decide.catalog import example_catalog_text, load_catalog, parse_catalog
from gpunet.decide.cost import price_plan
from gpunet.errors import CatalogError
from gpunet.spec.examples import EXAMPLES
from tests.decide.examples import example_plan

GOOD = """version: 1
currency: EUR
switches:
  QM9700-64xNDR: {part: MQM9700, price: 10, watts: 5}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(CatalogError) as caught:
        parse_catalog(text, "parts.yaml")
    return [str(p) for p in caught.value.problems]


def test_a_catalog_reads_its_sections() -> None:
    catalog = parse_catalog(GOOD)
    part = catalog.entry("switch", "QM9700-64xNDR")
    assert catalog.currency == "EUR" and not catalog.placeholder
    assert part is not None and (part.part, part.price, part.watts) == ("MQM9700", 10, 5)
    assert catalog.entry("nic", "QM9700-64xNDR") is None  # a model is looked up in its item's section


@pytest.mark.parametrize(("text", "expected"), [
    (GOOD.replace("watts: 5", "watt: 5"), "parts.yaml:4:45: switches.QM9700-64xNDR.watt: unknown key 'watt' "
                                          "(hint: did you mean 'watts'?)"),
    (GOOD.replace("price: 10", "price: -1"), "parts.yaml:4:34: switches.QM9700-64xNDR.price: Input should be "
                                             "greater than or equal to 0"),
    (GOOD.replace("price: 10", "price: ten"), "parts.yaml:4:34: switches.QM9700-64xNDR.price: Input should be a "
                                              "valid number"),
    (GOOD.replace("switches:", "switchs:"), "parts.yaml:3:1: switchs: unknown key 'switchs' (hint: did you mean "
                                            "'switches'?)"),
    (GOOD.replace("QM9700-64xNDR:", "'QM 9700':"), "parts.yaml:4:3: switches.QM 9700: 'QM 9700' is not a valid "
                                                   "model name"),
    (GOOD.replace("currency: EUR", "currency: euro"), "parts.yaml:2:1: currency: 'euro' is not a valid currency"),
    (GOOD.replace("{part: MQM9700, ", "{"), "parts.yaml:4:3: switches.QM9700-64xNDR.part: Field required"),
    ("- a\n- b\n", "parts.yaml:1:1: a catalog must be a YAML mapping with switches, nics and media"),
    (GOOD + "  bad: [\n", "parts.yaml:6:1: YAML syntax"),
])
def test_a_bad_catalog_is_located(text: str, expected: str) -> None:
    assert any(p.startswith(expected) for p in problems(text)), problems(text)


def test_a_missing_catalog_file_is_a_located_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"nope.yaml:1:1: cannot read"):
        load_catalog(tmp_path / "nope.yaml")


def test_the_shipped_catalog_is_marked_placeholder_and_prices_every_example() -> None:
    catalog = load_catalog(Path("example"))
    assert catalog.placeholder and "PLACEHOLDER" in example_catalog_text()
    assert parse_catalog(example_catalog_text()) == catalog
    for name in EXAMPLES:
        costing = price_plan(example_plan(name), catalog)
        assert costing.unpriced == [] and costing.total.cost is not None, name
