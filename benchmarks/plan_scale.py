"""How long gpunet takes to design and serialize a plan, from 256 nodes up to 100k GPUs.

For each size (default 256, 1024, 2048 and 12,500 nodes of 8-GPU servers; 12,500 x 8 is
100,000 GPUs) the script builds a Spec modelled on the scalable-unit example (management,
rail-optimized NDR InfiniBand compute with 8 NICs per node, bonded 2x200G RoCE storage) and
times, per run:

* design:    ``design(spec)``
* serialize: ``plan.model_dump_json()`` plus ``render_cabling_csv`` and ``render_addresses_csv``

It reports the median of each over the runs (3 runs for the small sizes; up to 3 for the
largest, fewer when one run already spends the ``--budget``), switches and cables planned,
microseconds per node, how the per-node time of the largest size compares with the smallest,
and whether the 100k-GPU plan met the target: design plus serialization in under 30 seconds.

Usage::

    python benchmarks/plan_scale.py
    python benchmarks/plan_scale.py --sizes 256,1024 --json
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpunet.design import design
from gpunet.model.io import read_plan
from gpunet.model.spec import Spec
from gpunet.render.plan_files import PLAN_FILES
from gpunet.spec.checks import spec_problems

DEFAULT_SIZES = (256, 1024, 2048, 12_500)
GPUS_PER_NODE = 8
COMPUTE_NICS = 8
STORAGE_NICS = 2
TARGET_GPUS = 100_000
TARGET_SECONDS = 30.0
SMALL_RUNS = 3
LARGE_RUNS = 3
LARGE_FROM_NODES = 4096
SMALL_SUBNETS_UP_TO = 12_500  # sizes from here on repeat only while within --budget


def radix_for(endpoints: int) -> int:
    """64-port switches while three tiers of them hold the plane's endpoints, else 128.

    Three tiers of radix-k switches hold at most k**3 / 4 endpoints at 1:1 (65,536 for k=64):
    100k compute NICs need the next size up, as clusters of that size use.
    """
    return 64 if endpoints <= 64**3 // 4 else 128


def subnets_for(nodes: int) -> dict[str, str]:
    """Each plane's subnet: those every size up to 100k GPUs was measured with, larger ones past it
    (125,000 nodes' million compute NICs). Plan data only: design() configures and sends nothing."""
    if nodes <= SMALL_SUBNETS_UP_TO:
        return {"management": "198.18.0.0/17", "gateway": "198.18.0.1", "compute": "10.0.0.0/14",
                "storage": "198.18.128.0/17"}
    return {"management": "10.32.0.0/14", "gateway": "10.32.0.1", "compute": "10.0.0.0/11",
            "storage": "10.36.0.0/14"}


def taper_for(nodes: int) -> dict[str, Any]:
    """Past 524,288 compute NICs (k^3/4 for k = 128) three tiers need their upper tiers tapered: 2:1
    at the leaf, 3:1 at the spine, as the built-in million-gpu example has them."""
    if nodes * COMPUTE_NICS <= 128**3 // 4:
        return {}
    return {"oversubscription": {"leaf": "2:1", "spine": "3:1"}}


def spec_dict(nodes: int) -> dict[str, Any]:
    """A scalable-unit-style spec for `nodes` 8-GPU servers, as the YAML loader would see it."""
    mgmt_radix = radix_for(nodes)
    comp_radix = radix_for(nodes * COMPUTE_NICS)
    stor_radix = radix_for(nodes * STORAGE_NICS)
    subnets = subnets_for(nodes)
    pad = max(5, len(str(nodes)))  # gpu00001 up to 99,999 nodes (the names every size had), gpu000001 past it
    return {
        "version": 1,
        "site": {
            "name": f"bench{nodes}",
            "domain": "bench.example",
            "dns_servers": ["198.18.0.53", "198.18.0.54"],
            "ntp_servers": ["198.18.0.123"],
            "admin_subnet": "198.18.0.0/28",
        },
        "planes": {
            "management": {
                # a /17: 12,500 node addresses from the bottom, the switches' management addresses
                # (about 5,900 at 12,500 nodes; no oob plane here) from the top
                "subnet": subnets["management"],
                "gateway": subnets["gateway"],
                "speed": "25G",
                "fabric": {
                    "switch": {"model": f"generic-{mgmt_radix}x25G", "radix": mgmt_radix, "port_speed": "25G"},
                    "oversubscription": {"leaf": "3:1", "spine": "3:1"},
                },
            },
            "compute": {
                # 100,000 compute addresses do not fit in 198.18.0.0/15 beside the other planes,
                # so compute takes 10.0.0.0/14. This is plan data only: design() is pure
                # computation, nothing is configured or sent anywhere.
                "subnet": subnets["compute"],
                "technology": "infiniband",
                "speed": "NDR",
                "fabric": {
                    "style": "rail-optimized",
                    "switch": {"model": f"generic-{comp_radix}xNDR", "radix": comp_radix, "port_speed": "NDR"},
                } | taper_for(nodes),
            },
            "storage": {
                "subnet": subnets["storage"],
                "technology": "roce",
                "speed": "200G",
                "fabric": {
                    "switch": {"model": f"SN5600-{stor_radix}x400G", "radix": stor_radix, "port_speed": "400G"},
                },
            },
        },
        "groups": [
            {
                "name": "gpu",
                "nodes": f"gpu[{1:0{pad}d}-{nodes:0{pad}d}]",
                "gpus": GPUS_PER_NODE,
                "gpu_model": "H100-SXM5",
                "nics": {
                    "management": {"devices": ["eno1"]},
                    "compute": {"count": COMPUTE_NICS},
                    "storage": {
                        "count": STORAGE_NICS,
                        "devices": ["ens6f0np0", "ens6f1np1"],
                        "bond": {"name": "bond0", "mode": "802.3ad", "hash_policy": "layer3+4"},
                    },
                },
            }
        ],
    }


def build_spec(nodes: int) -> Spec:
    spec = Spec.model_validate(spec_dict(nodes))
    problems = spec_problems(spec)
    if problems:
        raise SystemExit(f"benchmark spec for {nodes} nodes is invalid: {problems}")
    return spec


@dataclass
class Result:
    nodes: int
    gpus: int
    radix: dict[str, int]
    runs: int = 0
    switches: int = 0
    cables: int = 0
    design_s: float = 0.0
    serialize_s: float = 0.0
    replan_s: float = 0.0
    total_s: float = 0.0
    us_per_node: float = 0.0
    samples: list[dict[str, float]] = field(default_factory=list)


def one_run(spec: Spec) -> tuple[dict[str, float], int, int]:
    """Time one design plus serialization; returns the timings, switches and cables."""
    gc.collect()
    start = time.perf_counter()
    plan = design(spec)
    designed = time.perf_counter()
    files = {name: render(plan) for name, render in PLAN_FILES.items()}  # everything `gpunet plan` writes
    done = time.perf_counter()
    written = Path(tempfile.mkdtemp(prefix="gpunet-bench-")) / "plan.json"
    written.write_text(files["plan.json"])
    if not all(files.values()):
        raise SystemExit("empty output")
    # The second `gpunet plan`: read plan.json back and design again keeping its assignments.
    again = design(spec, previous=read_plan(written))
    replanned = time.perf_counter()
    shutil.rmtree(written.parent)
    if len(again.links) != len(plan.links):
        raise SystemExit("re-plan changed the cabling")
    timing = {"design_s": designed - start, "serialize_s": done - designed, "total_s": done - start,
              "replan_s": replanned - done}
    return timing, len(plan.switches), len(plan.links)


def measure(nodes: int, runs: int | None, budget: float) -> Result:
    spec = build_spec(nodes)
    result = Result(nodes=nodes, gpus=nodes * GPUS_PER_NODE,
                    radix={name: p.fabric.switch.radix for name, p in spec.planes.items()})
    wanted = runs or (SMALL_RUNS if nodes < LARGE_FROM_NODES else LARGE_RUNS)
    adaptive = runs is None and nodes >= LARGE_FROM_NODES
    spent = 0.0
    while len(result.samples) < wanted:
        timing, result.switches, result.cables = one_run(spec)
        result.samples.append(timing)
        spent += timing["total_s"]
        if adaptive and spent + timing["total_s"] > budget:
            break  # another run would overrun the budget
    result.runs = len(result.samples)
    for key in ("design_s", "serialize_s", "total_s", "replan_s"):
        setattr(result, key, statistics.median(s[key] for s in result.samples))
    result.us_per_node = result.total_s / nodes * 1e6
    return result


def verdict(results: list[Result]) -> dict[str, Any]:
    ordered = sorted(results, key=lambda r: r.nodes)
    ratio = ordered[-1].us_per_node / ordered[0].us_per_node if ordered else None
    target = next((r for r in ordered if r.gpus >= TARGET_GPUS), None)
    return {
        "per_node_ratio": ratio,
        "ratio_sizes": [ordered[0].nodes, ordered[-1].nodes] if ordered else [],
        "target": {
            "gpus": TARGET_GPUS,
            "seconds": TARGET_SECONDS,
            "measured_nodes": target.nodes if target else None,
            "total_s": target.total_s if target else None,
            "met": target.total_s < TARGET_SECONDS if target else None,
        },
    }


def print_table(results: list[Result], summary: dict[str, Any]) -> None:
    for r in results:
        radix = ", ".join(f"{plane} {k}" for plane, k in r.radix.items())
        print(f"{r.nodes} nodes: switch radix {radix}; {r.runs} run(s)")
    print()
    head = ("nodes", "GPUs", "switches", "cables", "design s", "serialize s", "total s", "us/node", "re-plan s")
    print("{:>7} {:>8} {:>9} {:>9} {:>9} {:>12} {:>8} {:>8} {:>10}".format(*head))
    for r in results:
        print(f"{r.nodes:>7} {r.gpus:>8} {r.switches:>9} {r.cables:>9} {r.design_s:>9.3f} "
              f"{r.serialize_s:>12.3f} {r.total_s:>8.3f} {r.us_per_node:>8.1f} {r.replan_s:>10.3f}")
    print("(total: design + every file `gpunet plan` writes; re-plan: read plan.json back and design "
          "again keeping its assignments, the second run)")
    print()
    if summary["per_node_ratio"] is not None:
        low, high = summary["ratio_sizes"]
        print(f"per-node time, {high} nodes / {low} nodes: {summary['per_node_ratio']:.2f}x")
    target = summary["target"]
    if target["met"] is None:
        print(f"{TARGET_GPUS}-GPU target (< {TARGET_SECONDS:g} s): not measured at these sizes")
    else:
        word = "met" if target["met"] else "MISSED"
        print(f"{TARGET_GPUS}-GPU target (< {TARGET_SECONDS:g} s): {word} "
              f"({target['total_s']:.2f} s at {target['measured_nodes']} nodes)")


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes are comma-separated node counts, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("give at least one positive node count")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=parse_sizes, default=list(DEFAULT_SIZES),
                        help="comma-separated node counts (default: 256,1024,2048,12500)")
    parser.add_argument("--runs", type=int, default=None,
                        help="runs per size (default: 3; sizes from 4096 nodes repeat up to 3 within --budget)")
    parser.add_argument("--budget", type=float, default=90.0,
                        help="seconds the largest sizes may spend on repeat runs (default: 90)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    args = parser.parse_args(argv)
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be at least 1")

    results = []
    for nodes in args.sizes:
        if not args.json:
            print(f"measuring {nodes} nodes ...", file=sys.stderr, flush=True)
        results.append(measure(nodes, args.runs, args.budget))
    summary = verdict(results)
    if args.json:
        print(json.dumps({"results": [asdict(r) for r in results], **summary}, indent=2))
    else:
        print_table(results, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
