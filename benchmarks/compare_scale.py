"""How long `gpunet compare` takes on two 12,500-node (100k-GPU) designs, failure analysis included.

The two designs are benchmarks/plan_scale.py's 12,500-node spec (rail-optimized NDR InfiniBand
compute, bonded 200G RoCE storage, 25G management, three tiers each) and the same cluster with a
400G RoCE compute fabric. Each is designed once (timed, but not part of the target: plan_scale.py
measures design); then, per run, the comparison of the two Plans: the full bill of materials priced
from the shipped placeholder catalog, growth headroom, the worst leaf, spine, core and cable of
every plane (nodes cut off, bisection and per-rail loss, node pairs losing paths and left with
none), and the Markdown table. It prints each run, the median of --runs (default 3), and whether
the median met the target of 30 s.

Usage::

    python benchmarks/compare_scale.py
    python benchmarks/compare_scale.py --nodes 2048 --runs 1
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from plan_scale import GPUS_PER_NODE, build_spec, spec_dict  # type: ignore[import-not-found]

from gpunet.decide.catalog import load_catalog
from gpunet.decide.compare import Comparison, compare, render_markdown
from gpunet.design import design
from gpunet.model.plan import Plan
from gpunet.model.spec import Spec

TARGET_SECONDS = 30.0


def roce_spec(nodes: int) -> Spec:
    """plan_scale's spec with the compute plane on 400G RoCE."""
    data: dict[str, Any] = spec_dict(nodes)
    compute = data["planes"]["compute"]
    radix = compute["fabric"]["switch"]["radix"]
    compute |= {"technology": "roce", "speed": "400G"}
    compute["fabric"]["switch"] = {"model": f"SN5600-{radix}x400G", "radix": radix, "port_speed": "400G"}
    data["site"]["name"] = f"roce{nodes}"
    return Spec.model_validate(data)


def one_run(plans: list[tuple[str, Plan]]) -> tuple[float, Comparison]:
    gc.collect()
    start = time.perf_counter()
    result = compare(plans, load_catalog(Path("example")))
    if not render_markdown(result):
        raise SystemExit("empty comparison")
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=12_500, help="8-GPU servers per design (default 12500)")
    parser.add_argument("--runs", type=int, default=3, help="comparisons to time (default 3)")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.runs < 1:
        parser.error("--nodes and --runs must be at least 1")
    plans = []
    for name, spec in (("infiniband", build_spec(args.nodes)), ("roce", roce_spec(args.nodes))):
        start = time.perf_counter()
        plans.append((name, design(spec)))
        print(f"designed {name}: {len(plans[-1][1].links):,} cables in {time.perf_counter() - start:.1f} s "
              "(not counted)", flush=True)
    seconds = []
    for run in range(args.runs):
        spent, result = one_run(plans)
        seconds.append(spent)
        print(f"run {run + 1}: compare {spent:.2f} s", flush=True)
    median = statistics.median(seconds)
    print()
    for design_ in result.designs:
        kinds = sum(len(p.failures.impacts) for p in design_.planes)
        print(f"{design_.name}: {design_.gpus:,} GPUs, {design_.switches:,} switches, {design_.cables:,} cables; "
              f"{len(design_.planes)} planes, {kinds} failure kinds (each plane's worst leaf, spine, core, cable)")
    word = "met" if median < TARGET_SECONDS else "MISSED"
    print(f"compare of two {args.nodes:,}-node ({args.nodes * GPUS_PER_NODE:,}-GPU) designs, median of "
          f"{args.runs}: {median:.2f} s; target < {TARGET_SECONDS:g} s: {word}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
