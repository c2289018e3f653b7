"""gpunet's library face: one module per command family, each with its own `__all__`.

    specs    read, validate and design a spec; flows, examples (no renderers: `gpunet validate`)
    plans    the same and: write a plan's files, render nodes' configuration, price the parts
    compare  designs side by side; a plan's cost, growth headroom and failure figures
    lab      the Plan in network namespaces, and its InfiniBand fabric in the simulator
    fleet    one command on many nodes, files to and from them, captures, detached runs
    doctor   the checklist on this node or many; probe
    apply    push the configuration with backup, verification and automatic revert
    bench    measure against the Plan, keep the history, compare, draw
    fabric   every cable from LLDP or ibnetdiscover; localize the cable to replace
    monitor  the Prometheus exporter
    report   one self-contained HTML page of the Plan and the results, the fabric drawn
    sim      a collective's predicted time on the Plan's cables, what-ifs; the nodes to give a job

The CLI imports only these (and gpunet.errors, gpunet.model): a test holds it to that. A family
is imported when first named (`from gpunet.api import bench`), so a command pays only for its own.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType
from typing import Any

FAMILIES = ("specs", "plans", "compare", "lab", "fleet", "doctor", "apply", "bench", "fabric", "monitor", "report",
            "sim")
# The entry points most library callers start from, each from the family that owns it.
SHORTCUTS = {name: "plans" for name in ("design_spec", "load_plan", "management_addresses", "plan_into", "plan_spec",
                                        "render_plan", "validate_spec", "write_plan")}

__all__ = []


def __getattr__(name: str) -> ModuleType | Any:
    if name in FAMILIES:
        return import_module(f"gpunet.api.{name}")
    if name in SHORTCUTS:
        return getattr(import_module(f"gpunet.api.{SHORTCUTS[name]}"), name)
    raise AttributeError(f"module 'gpunet.api' has no attribute {name!r}")
