"""How long gpunet takes to design a plan and write its files, from 256 nodes up to 1M GPUs.

For each size (default 256, 1024, 2048 and 12,500 nodes of 8-GPU servers, 12,500 x 8 being
100,000 GPUs; `--big` adds 125,000 nodes, 1M GPUs) the script builds a Spec modelled on the
scalable-unit example (management, rail-optimized NDR InfiniBand compute with 8 NICs per node,
bonded 2x200G RoCE storage; past 12,500 nodes the subnets, switches and taper of the built-in
million-gpu example) and times, per run, each in a process of its own as `gpunet plan` runs:

* design:  ``design(spec)``
* files:   every file `gpunet plan` writes (plan.json, the CSVs, summary.md with its failure and
           growth analysis, topology.svg)
* re-plan: the next `gpunet plan`: read plan.json back (fully validated, as any file from disk)
           and design again keeping its assignments

Each is timed on the wall clock and in CPU seconds (the process's own: on a shared machine the wall
clock also counts the others' load), with the process's peak RSS. It reports the median of each
over the runs (3 for the small sizes; up to 3 for the large, fewer when one run already spends the
``--budget``), the per-node cost of the largest size against the smallest, and pass/fail against
the targets of issue 31, on 2 cores:

* 100k GPUs (12,500 nodes): design + every file < 10 s; re-plan < 15 s
* 1M GPUs (125,000 nodes): design + every file < 60 s, peak RSS < 8 GB; re-plan < 90 s
* per-node cost (design + files), 125,000 nodes / 256 nodes <= 1.5x

Usage::

    python benchmarks/plan_scale.py
    python benchmarks/plan_scale.py --big --runs 1
    python benchmarks/plan_scale.py --sizes 256,1024 --json
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
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

PHASES = ("design", "files", "total", "replan")

DEFAULT_SIZES = (256, 1024, 2048, 12_500)
BIG_SIZE = 125_000
GPUS_PER_NODE = 8
COMPUTE_NICS = 8
STORAGE_NICS = 2
# nodes -> (design + files, re-plan) seconds, and the peak RSS where one is set
TARGETS = {12_500: {"total_s": 10.0, "replan_s": 15.0}, BIG_SIZE: {"total_s": 60.0, "replan_s": 90.0, "peak_gb": 8.0}}
RATIO_TARGET = 1.5
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
    medians: dict[str, float] = field(default_factory=dict)  # PHASE_s and PHASE_cpu_s, peak_gb, replan_peak_gb
    us_per_node: float = 0.0
    samples: list[dict[str, float]] = field(default_factory=list)


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux


def child_fresh(nodes: int, out: Path) -> dict[str, float]:
    """In a process of its own: design, then every file `gpunet plan` writes; plan.json into `out`."""
    spec = build_spec(nodes)
    warm_imports()
    start = _clock()
    plan = design(spec)
    designed = _clock()
    files = {name: render(plan) for name, render in PLAN_FILES.items()}
    done = _clock()
    if not all(files.values()):
        raise SystemExit("empty output")
    (out / "plan.json").write_text(files["plan.json"])
    return {"design_s": designed[0] - start[0], "design_cpu_s": designed[1] - start[1],
            "files_s": done[0] - designed[0], "files_cpu_s": done[1] - designed[1],
            "peak_gb": _peak_gb(), "switches": len(plan.switches), "cables": len(plan.links)}


def warm_imports() -> None:
    """Import what the files load on first use (the drawing, failure and growth analysis), so that
    every size's time is its own work, not a fixed ~0.5 s of imports that flatters the per-node
    ratio of the largest size against the smallest."""
    import gpunet.decide.failures  # noqa: PLC0415
    import gpunet.decide.growth  # noqa: PLC0415
    import gpunet.report.drawing  # noqa: F401, PLC0415


def child_replan(nodes: int, out: Path) -> dict[str, float]:
    """In a process of its own, as the next `gpunet plan`: read plan.json back, design keeping it."""
    spec = build_spec(nodes)
    start = _clock()
    again = design(spec, previous=read_plan(out / "plan.json"))
    done = _clock()
    return {"replan_s": done[0] - start[0], "replan_cpu_s": done[1] - start[1], "replan_peak_gb": _peak_gb(),
            "cables": len(again.links)}


def _child(kind: str, nodes: int, out: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--sizes", str(nodes), "--out", str(out)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {kind} run at {nodes} nodes failed:\n{done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


def one_run(nodes: int) -> dict[str, float]:
    """One design + files, then one re-plan, each in its own process."""
    with tempfile.TemporaryDirectory(prefix="gpunet-bench-") as out:
        fresh = _child("fresh", nodes, Path(out))
        again = _child("replan", nodes, Path(out))
    if again.pop("cables") != fresh["cables"]:
        raise SystemExit("re-plan changed the cabling")
    fresh["total_s"] = fresh["design_s"] + fresh["files_s"]
    fresh["total_cpu_s"] = fresh["design_cpu_s"] + fresh["files_cpu_s"]
    return fresh | again


def measure(nodes: int, runs: int | None, budget: float) -> Result:
    spec = build_spec(nodes)
    result = Result(nodes=nodes, gpus=nodes * GPUS_PER_NODE,
                    radix={name: p.fabric.switch.radix for name, p in spec.planes.items()})
    wanted = runs or (SMALL_RUNS if nodes < LARGE_FROM_NODES else LARGE_RUNS)
    adaptive = runs is None and nodes >= LARGE_FROM_NODES
    spent = 0.0
    while len(result.samples) < wanted:
        sample = one_run(nodes)
        result.switches, result.cables = int(sample.pop("switches")), int(sample.pop("cables"))
        result.samples.append(sample)
        spent += sample["total_s"] + sample["replan_s"]
        if adaptive and spent + sample["total_s"] + sample["replan_s"] > budget:
            break  # another run would overrun the budget
    result.runs = len(result.samples)
    result.medians = {key: statistics.median(s[key] for s in result.samples) for key in result.samples[0]}
    result.us_per_node = result.medians["total_s"] / nodes * 1e6
    return result


def verdict(results: list[Result]) -> dict[str, Any]:
    """Per-node ratios (wall and CPU) of the largest size against the smallest, and each target."""
    ordered = sorted(results, key=lambda r: r.nodes)
    low, high = (ordered[0], ordered[-1]) if ordered else (None, None)
    ratios = {}
    if low is not None and high is not None and high.nodes > low.nodes:
        for clock in ("total_s", "total_cpu_s"):
            ratios[clock] = (high.medians[clock] / high.nodes) / (low.medians[clock] / low.nodes)
    checks = []
    for r in ordered:
        for key, limit in TARGETS.get(r.nodes, {}).items():
            for clock in ((key, key.replace("_s", "_cpu_s")) if key.endswith("_s") else (key,)):
                checks.append({"nodes": r.nodes, "what": clock, "limit": limit, "measured": r.medians[clock],
                               "met": r.medians[clock] < limit})
    if ratios and high is not None and high.nodes >= BIG_SIZE and low is not None and low.nodes <= 256:
        for clock, ratio in ratios.items():
            checks.append({"nodes": high.nodes, "what": f"per-node {clock} / {low.nodes} nodes'",
                           "limit": RATIO_TARGET, "measured": ratio, "met": ratio <= RATIO_TARGET})
    return {"per_node_ratio": ratios, "ratio_sizes": [low.nodes, high.nodes] if low and high else [],
            "targets": checks, "all_met": all(c["met"] for c in checks) if checks else None}


def print_table(results: list[Result], summary: dict[str, Any]) -> None:
    for r in results:
        radix = ", ".join(f"{plane} {k}" for plane, k in r.radix.items())
        print(f"{r.nodes} nodes: switch radix {radix}; {r.runs} run(s)")
    print()
    head = ("nodes", "GPUs", "switches", "cables", "design s", "files s", "total s", "us/node", "re-plan s",
            "peak GB", "re-plan GB")
    print("{:>7} {:>8} {:>8} {:>9} {:>13} {:>13} {:>13} {:>7} {:>13} {:>7} {:>10}".format(*head))
    for r in results:
        m = r.medians
        cells = [f"{m[f'{p}_s']:.2f} ({m[f'{p}_cpu_s']:.2f})" for p in PHASES]
        print(f"{r.nodes:>7} {r.gpus:>8} {r.switches:>8} {r.cables:>9} {cells[0]:>13} {cells[1]:>13} {cells[2]:>13} "
              f"{r.us_per_node:>7.0f} {cells[3]:>13} {m['peak_gb']:>7.2f} {m['replan_peak_gb']:>10.2f}")
    print("(seconds: wall (CPU), medians; total: design + every file `gpunet plan` writes; re-plan: read "
          "plan.json back and design again keeping its assignments; each in a process of its own, peak RSS its own)")
    print()
    if summary["per_node_ratio"]:
        low, high = summary["ratio_sizes"]
        wall, cpu = summary["per_node_ratio"]["total_s"], summary["per_node_ratio"]["total_cpu_s"]
        print(f"per-node cost, {high} nodes / {low} nodes: {wall:.2f}x wall, {cpu:.2f}x CPU")
    for c in summary["targets"]:
        word = "met" if c["met"] else "MISSED"
        unit = "x" if "per-node" in c["what"] else (" GB" if "gb" in c["what"] else " s")
        print(f"target {c['nodes']} nodes {c['what']} < {c['limit']:g}{unit}: {word} ({c['measured']:.2f}{unit})")
    if not summary["targets"]:
        print("no target at these sizes (12,500 and 125,000 nodes have them; --big adds 125,000)")


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
    parser.add_argument("--big", action="store_true", help=f"add {BIG_SIZE} nodes (1M GPUs: minutes, ~8 GB)")
    parser.add_argument("--runs", type=int, default=None,
                        help="runs per size (default: 3; sizes from 4096 nodes repeat up to 3 within --budget)")
    parser.add_argument("--budget", type=float, default=90.0,
                        help="seconds the largest sizes may spend on repeat runs (default: 90)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    parser.add_argument("--child", choices=("fresh", "replan"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.child:
        run = child_fresh if args.child == "fresh" else child_replan
        print(json.dumps(run(args.sizes[0], args.out)))
        return 0

    sizes = args.sizes + ([BIG_SIZE] if args.big and BIG_SIZE not in args.sizes else [])
    results = []
    for nodes in sizes:
        if not args.json:
            print(f"measuring {nodes} nodes ...", file=sys.stderr, flush=True)
        results.append(measure(nodes, args.runs, args.budget))
    summary = verdict(results)
    if args.json:
        print(json.dumps({"results": [asdict(r) for r in results], **summary}, indent=2))
    else:
        print_table(results, summary)
    return 1 if summary["all_met"] is False else 0


if __name__ == "__main__":
    sys.exit(main())
