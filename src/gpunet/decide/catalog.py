"""The parts catalog (`--catalog FILE`): part number, unit price and watts per switch model, NIC
model and cable or transceiver model, keyed by the model names the bill of materials uses.

    version: 1
    currency: USD
    placeholder: true            # the numbers are not prices: every cost is marked as such
    switches:
      QM9700-64xNDR: {part: MQM9700-NS2F, price: 1000, watts: 1000}
    nics:
      ConnectX-7-NDR: {part: MCX75310AAS-NEAT, price: 100, watts: 25}
    media:                       # cables, fibers and transceivers
      ib-sr-xcvr-2x400G: {part: MMA4Z00-NS, price: 10, watts: 17}

Read like a spec: every problem is located at file:line:col with a hint (a CatalogError)."""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, ValidationError
from pydantic_core import ErrorDetails

from gpunet.errors import CatalogError, SpecError, SpecProblem
from gpunet.files.yamldoc import read_document
from gpunet.model.base import Frozen
from gpunet.model.types import ModelName
from gpunet.spec.loader import HINTS, parse_yaml_document, real_errors

EXAMPLE_CATALOG = "example"  # --catalog example: the shipped catalog of placeholder numbers
PartNumber = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+/ -]{0,63}$")]
Amount = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]
SECTIONS = {"switch": "switches", "nic": "nics", "cable": "media", "transceiver": "media"}
NOT_A_MAPPING = ("a catalog must be a YAML mapping with switches, nics and media",
                 "start from `gpunet compare --example-catalog`")


class Part(Frozen):
    part: PartNumber
    price: Amount  # per unit, in the catalog's currency
    watts: Amount  # per unit, typical


class Catalog(Frozen):
    version: Literal[1] = 1
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$")
    placeholder: bool = False
    switches: dict[ModelName, Part] = Field(default_factory=dict)
    nics: dict[ModelName, Part] = Field(default_factory=dict)
    media: dict[ModelName, Part] = Field(default_factory=dict)

    def entry(self, item: str, model: str) -> Part | None:
        """The part of a BOM line's model, from the section of its item; None when not listed."""
        section: dict[str, Part] = getattr(self, SECTIONS[item])
        return section.get(model)


def example_catalog_text() -> str:
    return resources.files("gpunet.decide").joinpath("catalog-example.yaml").read_text()


def load_catalog(path: Path) -> Catalog:
    """A catalog file, or the shipped placeholder one for `example`; CatalogError when wrong."""
    if str(path) == EXAMPLE_CATALOG and not path.exists():
        return parse_catalog(example_catalog_text(), "<example catalog>")
    try:
        text = read_document(path, "catalog")
    except SpecError as exc:
        raise CatalogError(exc.problems) from None
    return parse_catalog(text, str(path))


def parse_catalog(text: str, file: str = "<catalog>") -> Catalog:
    try:
        data, source = parse_yaml_document(text, file, NOT_A_MAPPING)
    except SpecError as exc:
        raise CatalogError(exc.problems) from None
    try:
        return Catalog.model_validate(data)
    except ValidationError as exc:
        raise CatalogError([source.locate(_problem(e)) for e in real_errors(exc.errors())]) from None


def _problem(error: ErrorDetails) -> SpecProblem:
    path = tuple(p for p in error["loc"] if p != "[key]")
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return SpecProblem(f"unknown key {path[-1]!r}", path, _known(path))
    if error["type"] == "string_pattern_mismatch":
        what = "model name" if "[key]" in error["loc"] else "part number" if path[-1] == "part" else "currency"
        return SpecProblem(f"{error['input']!r} is not a valid {what}", path, PATTERN_HINTS[what])
    return SpecProblem(message, path, HINTS.get(error["type"], "see the README's catalog schema"))


PATTERN_HINTS = {
    "model name": "the model as the bill of materials names it (bom.csv): letters, digits, '.', '_', '+', '-'",
    "part number": "letters, digits, spaces and . _ + / - (up to 64)",
    "currency": "a three-letter ISO 4217 code such as USD or EUR",
}


def _known(path: tuple[str | int, ...]) -> str:
    fields: list[str] = list(Catalog.model_fields) if len(path) == 1 else list(Part.model_fields)
    close = difflib.get_close_matches(str(path[-1]), fields, n=1)
    return f"did you mean {close[0]!r}?" if close else f"known keys here: {', '.join(fields)}"
