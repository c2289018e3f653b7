"""Print gpunet's package import graph on one screen and any cycle in it.

Every `import gpunet.X...` / `from gpunet.X... import` in src/gpunet, at module level or inside a
function (a lazy import is still an arrow), counted per top-level package. Exit 1 on a cycle.

    python tools/import_graph.py [--modules]   # --modules: module-level graph, not packages
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from importlib.util import resolve_name
from pathlib import Path

import networkx as nx

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The gpunet modules a file imports, absolute names ('gpunet.fabric.lldp')."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "gpunet"}
        elif isinstance(node, ast.ImportFrom):
            base = resolve_name("." * node.level + (node.module or ""), package) if node.level else node.module or ""
            if base.split(".")[0] == "gpunet":
                found.add(base)
                found |= {f"{base}.{a.name}" for a in node.names}
    return found


def graph(level: int) -> nx.DiGraph:
    """Arrows between names cut to `level` dotted parts (2: gpunet.fabric)."""
    modules = {module_name(p): p for p in SRC.rglob("*.py")}
    g = nx.DiGraph()
    for name, path in modules.items():
        source = ".".join(name.split(".")[:level])
        g.add_node(source)
        for imported in imports_of(path):
            target = imported
            while target not in modules and "." in target:  # `from gpunet.x import name`: the module
                target = target.rpartition(".")[0]
            cut = ".".join(target.split(".")[:level])
            if cut != source and target in modules:
                g.add_edge(source, cut)
    return g


def main() -> int:
    g = graph(3 if "--modules" in sys.argv else 2)
    arrows: dict[str, list[str]] = defaultdict(list)
    for a, b in g.edges:
        arrows[a].append(b)
    short = {n: n.removeprefix("gpunet.") for n in g.nodes}
    for source in sorted(g.nodes, key=lambda n: (-len(nx.descendants(g, n)), n)):
        targets = sorted(short[t] for t in arrows.get(source, []))
        print(f"{short[source]:>10} -> {', '.join(targets) or '-'}")
    cycles = list(nx.simple_cycles(g))
    if cycles:
        print(f"\n{len(cycles)} cycle(s):")
        for cycle in sorted(cycles, key=len)[:20]:
            print("  " + " -> ".join(short[n] for n in [*cycle, cycle[0]]))
        return 1
    print("\nno cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
