"""The arrows between gpunet's packages (DESIGN.md): one Plan at the centre, views of it that do
not reach into each other except as drawn here, `gpunet.reach` the only way to machines, `api` the
only face the CLI uses, and no cycle. Every import counts, a lazy one inside a function too."""

from __future__ import annotations

from functools import cache

import networkx as nx
from tools.import_graph import graph

FOUNDATION = {"errors", "gpunet", "model", "runner", "files", "node"}
# package -> the packages it may import besides the foundation (and itself)
ALLOWED: dict[str, set[str]] = {
    "errors": set(), "gpunet": set(), "runner": set(), "model": set(), "files": set(), "node": set(),
    "spec": {"design"},
    "design": set(),
    "sim": {"design"},
    "place": {"sim"},
    "decide": {"design", "spec", "sim"},
    "render": {"decide", "report"},  # plan's topology.svg is the report's drawing of the Plan
    "probe": set(),
    "checks": {"probe"},
    "fleet": {"checks"},
    "fabric": {"fleet", "probe"},
    "localize": {"fabric"},
    "monitor": {"fabric", "localize", "probe"},
    "bench": {"fleet", "probe", "spec", "sim"},
    "lab": {"fabric", "render", "design", "spec", "probe"},
    "apply": {"fleet", "render"},
    "reach": {"lab", "fleet", "fabric", "spec"},
    "report": {"bench", "checks", "decide", "fabric", "fleet", "localize"},
    "api": {"*"},
    "cli": {"api"},
    "__main__": {"cli"},
}


@cache  # one parse of the tree per test process: every test reads the same arrows
def _package_graph() -> nx.DiGraph:
    return graph(2)


def _arrows() -> dict[str, set[str]]:
    g = _package_graph()
    return {n.removeprefix("gpunet."): {t.removeprefix("gpunet.") for t in g.successors(n)} for n in g.nodes}


def test_every_package_imports_only_along_the_drawn_arrows() -> None:
    wrong = {}
    for source, targets in _arrows().items():
        allowed = ALLOWED.get(source)
        assert allowed is not None, f"gpunet.{source} is a new package: draw its arrows in ALLOWED and DESIGN.md"
        if "*" in allowed:
            continue
        extra = targets - allowed - FOUNDATION - {source}
        if source == "node":  # the node side imports nothing of gpunet's but itself
            extra = targets - {"node"}
        if source in ("model", "errors", "files", "runner"):  # the foundation: model reads through files
            extra = targets - {"errors", "model", "gpunet", "files"} - {source}
        if extra:
            wrong[source] = sorted(extra)
    assert not wrong, f"imports against the arrows: {wrong}"


def test_the_cli_imports_only_the_api_errors_and_model() -> None:
    assert _arrows()["cli"] <= {"api", "errors", "model", "gpunet"}


def test_nothing_but_the_entry_point_imports_the_cli() -> None:
    importers = {source for source, targets in _arrows().items() if "cli" in targets}
    assert importers == {"__main__"}


def test_no_cycle_between_packages() -> None:
    assert list(nx.simple_cycles(_package_graph())) == []


def test_no_view_finds_a_lab_by_itself() -> None:
    """Only reach (and api, composing) get at a lab: fabric, localize, monitor, bench and apply take
    what reach hands them."""
    for view in ("fabric", "localize", "monitor", "bench", "apply", "checks", "probe", "fleet"):
        assert "lab" not in _arrows()[view], view
