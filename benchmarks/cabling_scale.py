"""How long `cabling check` takes on InfiniBand fabrics, per cable, from 240 to 125,000 servers.

Specs modelled on the scalable-unit example (plan_scale.spec_dict: 8 NDR rails per 8-GPU server,
rail-optimized, 64-port switches) at each size:

1. Through the simulator (root, ibsim-utils, opensm, infiniband-diags): the largest fabric ibsim
   holds, 240 servers x 8 HCAs with 96 switches (2,016 nodes of its 2,048; 3,968 cables). Times
   `ibsim up` once, then `cabling check --ibsim` (ibnetdiscover through libumad2sim, parse, name,
   check), --runs times.
2. From saved discovery output: each size's fabric written as ibnetdiscover text (GUIDs for node
   ids, the Plan's names as descriptions, as a real fabric with node descriptions set reports it),
   then parse + name + check timed --runs times. 12,500 servers is 300,704 compute cables;
   `--big` adds 125,000 servers (1M GPUs, plan_scale's spec at that size: 2.3M compute cables,
   minutes to design and write), whose check must take under 60 s (issue 31). `--cli` also times
   the command a user runs, in a process of its own, once a size: reading and validating the
   plan.json (1.06 GB at 125,000 servers) included, against the same 60 s.

Prints medians, microseconds per cable, and the per-cable ratio of the largest size to the
smallest (near 1: the check is linear in cables). Every run must find 0 findings.

    python benchmarks/cabling_scale.py [--sizes 240,2048,12500] [--big] [--runs 3] [--no-sim] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from plan_scale import build_spec  # type: ignore[import-not-found]

from gpunet.api.fabric import CablingSource, cabling_check
from gpunet.design import design
from gpunet.fabric.cabling import check_cabling
from gpunet.fabric.ibnetdiscover import parse_ibnetdiscover
from gpunet.fabric.observed import from_ibnetdiscover
from gpunet.lab.ibsim import ibsim_down, ibsim_up, missing_tools
from gpunet.lab.ibsim_topology import SimFabric, render_topology
from gpunet.model.plan import Plan
from gpunet.render.plan_files import render_plan_json

PLANE = "compute"
SIM_SERVERS = 240  # 2,016 IB nodes and 96 switches: the most of this design under ibsim's 2,048
SIM_ID = "cb"
QUOTED_ID = re.compile(r'"([SH])-([^"]+)"')
BIG_SERVERS = 125_000
BIG_TARGET_S = 60.0


def discovery_text(plan: Plan) -> str:
    """The plane as ibnetdiscover prints it: node ids become GUIDs, descriptions stay the Plan's."""
    text = render_topology(SimFabric(plan, PLANE, ())).replace("4xHDR", "4xNDR")  # a real NDR fabric, not ibsim
    guids: dict[str, str] = {}

    def guid(match: re.Match[str]) -> str:
        key = match[0]
        if key not in guids:
            guids[key] = f'"{match[1]}-{0x0002c90300000000 + len(guids):016x}"'
        return guids[key]

    return QUOTED_ID.sub(guid, text)


def compute_cables(plan: Plan) -> int:
    return sum(1 for link in plan.links if link.plane == PLANE)


def time_saved(plan: Plan, path: Path, runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each run (on a shared machine the wall clock counts the others' load)."""
    samples, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        report = check_cabling(plan, from_ibnetdiscover(plan, parse_ibnetdiscover(path.read_text())), [PLANE])
        samples.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        if report.findings or report.counts != {"ok": compute_cables(plan)}:
            raise SystemExit(f"a healthy fabric gave {len(report.findings)} findings: {report.counts}")
    return samples, cpu


def saved_output(sizes: list[int], runs: int, cli: bool) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory(prefix="gpunet-cabling-") as tmp:
        for servers in sizes:
            print(f"saved output: {servers} servers ...", file=sys.stderr, flush=True)
            plan = design(build_spec(servers))
            path = Path(tmp) / f"ibnetdiscover-{servers}.txt"
            path.write_text(discovery_text(plan))
            samples, cpu = time_saved(plan, path, runs)
            cables = compute_cables(plan)
            results.append({"servers": servers, "cables": cables, "file_mb": round(path.stat().st_size / 2**20, 1),
                            "median_s": round(statistics.median(samples), 3),
                            "median_cpu_s": round(statistics.median(cpu), 3),
                            "us_per_cable": round(statistics.median(samples) / cables * 1e6, 2), "runs": runs})
            if cli:
                results[-1] |= time_cli(plan, path, Path(tmp) / f"plan-{servers}.json", cables)
    return results


def time_cli(plan: Plan, discovery: Path, plan_path: Path, cables: int) -> dict[str, Any]:
    """Once, the command a user runs: `gpunet cabling check --plan plan.json --ibnetdiscover FILE
    --plane compute` in a process of its own (reading and validating plan.json included; its
    summary table, as a person reads it: --json would print every one of the cables), wall
    seconds, its CPU and peak RSS; it must exit 0 (no finding) and count every cable ok."""
    plan_path.write_text(render_plan_json(plan))
    argv = [sys.executable, "-m", "gpunet", "cabling", "check", "--plan", str(plan_path), "--ibnetdiscover",
            str(discovery), "--plane", PLANE]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
    if done.returncode != 0 or (f"{cables:,}" not in done.stdout and str(cables) not in done.stdout):
        raise SystemExit(f"`gpunet cabling check` exited {done.returncode}: {done.stdout[-300:]} {done.stderr[-300:]}")
    plan_path.unlink()
    return {"cli_s": round(wall, 2), "cli_cpu_s": round(cpu, 2), "cli_peak_gb": round(usage.ru_maxrss / 2**20, 2)}


def simulated(runs: int) -> dict[str, Any]:
    plan = design(build_spec(SIM_SERVERS))
    start = time.perf_counter()
    state = ibsim_up(plan, SIM_ID)
    up_s = time.perf_counter() - start
    try:
        if state.notes and any("slice" in n for n in state.notes):
            raise SystemExit(f"the {SIM_SERVERS}-server fabric did not fit the simulator: {state.notes}")
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            report = cabling_check(CablingSource(ibsim=SIM_ID), None, [])
            samples.append(time.perf_counter() - start)
            if report.findings:
                raise SystemExit(f"the healthy simulated fabric gave {len(report.findings)} findings")
    finally:
        ibsim_down(SIM_ID)
    cables = compute_cables(plan)
    return {"servers": SIM_SERVERS, "cables": cables, "ibsim_up_s": round(up_s, 2),
            "median_s": round(statistics.median(samples), 3),
            "us_per_cable": round(statistics.median(samples) / cables * 1e6, 2), "runs": runs}


def sim_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (the simulator's files live under /run/gpunet)"
    missing = missing_tools()
    return f"needs {', '.join(missing)}" if missing else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=f"{SIM_SERVERS},2048,12500", help="servers, comma-separated")
    parser.add_argument("--big", action="store_true", help=f"add {BIG_SERVERS} servers (1M GPUs; minutes)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-sim", action="store_true", help="skip the simulator part")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cli", action="store_true",
                        help="also time `gpunet cabling check --plan plan.json --ibnetdiscover FILE`, once a size")
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",")} | ({BIG_SERVERS} if args.big else set()))
    why_not = "--no-sim" if args.no_sim else sim_unavailable()
    result: dict[str, Any] = {"simulator": simulated(args.runs) if why_not is None else {"skipped": why_not},
                              "saved_output": saved_output(sizes, args.runs, args.cli)}
    saved = result["saved_output"]
    result["per_cable_ratio_largest_to_smallest"] = round(saved[-1]["us_per_cable"] / saved[0]["us_per_cable"], 2)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    sim = result["simulator"]
    if "skipped" in sim:
        print(f"simulator: skipped ({sim['skipped']})")
    else:
        print(f"simulator, {sim['servers']} servers, {sim['cables']} cables: ibsim up {sim['ibsim_up_s']} s; "
              f"cabling check median {sim['median_s']} s = {sim['us_per_cable']} us/cable (ibnetdiscover included)")
    for row in saved:
        print(f"saved ibnetdiscover, {row['servers']:>6} servers, {row['cables']:>7} cables ({row['file_mb']} MB): "
              f"median {row['median_s']} s ({row['median_cpu_s']} s CPU) = {row['us_per_cable']} us/cable")
        if "cli_s" in row:
            print(f"  `gpunet cabling check --plan plan.json --ibnetdiscover` end to end: {row['cli_s']} s "
                  f"({row['cli_cpu_s']} s CPU), peak RSS {row['cli_peak_gb']} GB")
        if row["servers"] >= BIG_SERVERS:
            word = "met" if row["median_s"] < BIG_TARGET_S else "MISSED"
            print(f"target: 1M-GPU check < {BIG_TARGET_S:g} s: {word}"
                  + (f"; end to end with plan.json: {'met' if row['cli_s'] < BIG_TARGET_S else 'MISSED'}"
                     if "cli_s" in row else ""))
    print(f"per-cable time, {saved[-1]['servers']} vs {saved[0]['servers']} servers: "
          f"{result['per_cable_ratio_largest_to_smallest']}x")


if __name__ == "__main__":
    main()
