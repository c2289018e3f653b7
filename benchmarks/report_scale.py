"""How long `gpunet report` takes on a 12,500-server (100k-GPU) plan with results, how large the page
is, and how soon a real Chromium paints it.

The plan is benchmarks/plan_scale.py's 12,500-node spec (three-tier rail-optimized NDR compute,
bonded RoCE storage, management), designed once and not timed. Its results, written once as the
commands write them: a cabling check of every one of its ~370,000 cables (gpunet's own check on
what a fabric that matches the plan reports, less one cable, one moved and one at the wrong speed),
a fleet doctor of every node (one node's compute link down), a localization naming a lossy
leaf-spine cable, and a bench run of 256 nodes all-pairs (32,640 constructed measurements stored
through the bench store). Per run it times the whole of `gpunet report` after the plan is loaded:
reading and checking each result file, drawing, writing the page. Then Chromium (headless, no
network) loads the page in a fresh tab and reports, by the page's own Paint Timing entry, when the
first contentful paint reached the screen. It prints each run, the medians, the page's size, and
whether each target was met: written in under 10 s, under 10 MB, first paint in under 3 s.

Usage::

    python benchmarks/report_scale.py
    python benchmarks/report_scale.py --nodes 2048 --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from plan_scale import build_spec  # type: ignore[import-not-found]

from gpunet.bench.store import Measurement, add_measurements, start_run
from gpunet.design import design
from gpunet.fabric.cabling import check_cabling, ends
from gpunet.fabric.observed import End, Observation, Seen
from gpunet.fleet.doctor import FleetDoctorReport, FoldedFinding
from gpunet.localize.report import LocalizeReport, Suspect, cable_fix
from gpunet.model.nodeset import fold
from gpunet.model.plan import Plan
from gpunet.report.build import ReportFiles, build_report, write_report
from gpunet.report.model import plan_digest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.report.browser: the Chromium driver
from tests.report.browser import Browser, chromium

TARGETS = {"seconds": 10.0, "megabytes": 10.0, "first_paint_s": 3.0}
BENCH_NODES = 256


def cabling(plan: Plan, path: Path) -> None:
    moved, missing, slow = 5_000, len(plan.links) // 2, len(plan.links) - 7
    links = []
    for n, link in enumerate(plan.links):
        a, b = ends(link)
        if n == missing:
            continue
        if n == moved:
            b = End(b.device, str(int(b.port) + 1))
        gbps = float(link.gbps) / 2 if n == slow else float(link.gbps)
        links.append(Seen(a, b, gbps=gbps))
    looked = {e.device for link in plan.links for e in ends(link)}
    report = check_cabling(plan, Observation("LLDP", links, looked), [p.name for p in plan.planes])
    path.write_text(report.model_dump_json())


def doctor(plan: Plan, path: Path) -> None:
    names = [n.name for n in plan.nodes]
    down = next(n for n in plan.nodes if n.gpus)
    ib = next(i.name for i in down.interfaces if i.plane == "compute")
    findings = (
        FoldedFinding(check="GN-LINK-01", verdict="fail", subject=ib, nodes=down.name, count=1,
                      observed="operstate down, carrier False", variants=1, expected="up, carrier",
                      fix=f"ip link set dev {ib} up; check the cable and transceiver (ethtool {ib})"),
        FoldedFinding(check="GN-SSH-01", verdict="pass", subject="sshd", nodes=fold(names), count=len(names),
                      observed="keys only", variants=1, expected="", fix=""))
    path.write_text(FleetDoctorReport(nodes=len(names), findings=findings, unreachable={}).model_dump_json())


def localize(plan: Plan, path: Path) -> None:
    link = next(link for link in plan.links if link.tier == "leaf_spine" and link.plane == "compute")
    cable = f"{link.a.device}:{link.a.port} {link.b.device}:{link.b.port}"
    suspect = Suspect(cable=cable, plane="compute", source="counters", confidence=0.94,
                      evidence=(f"{link.a.device}:{link.a.port}: SymbolErrorCounter +250 in 30 s",),
                      fix=cable_fix(plan, cable))
    path.write_text(LocalizeReport(suspects=(suspect,)).model_dump_json())


def bench(plan: Plan, path: Path) -> None:
    nodes = [n.name for n in plan.nodes if n.gpus][:BENCH_NODES]
    measurements = [Measurement(source=a, destination=b, plane="compute", metric="throughput",
                                value=390.0 - (i * 7 + j) % 40, unit="Gb/s", expected=396.0,
                                status="ok" if (i * 7 + j) % 40 < 30 else "low")
                    for i, a in enumerate(nodes) for j, b in enumerate(nodes) if i < j]
    run = start_run(path, plan_hash=plan_digest(plan), tool="iperf3", pattern="all-pairs",
                    arguments=f"plane=compute seconds=10 nodes={fold(nodes)}")
    add_measurements(path, run, measurements)


def results(plan: Plan, directory: Path) -> ReportFiles:
    for name, write in (("cabling.json", cabling), ("doctor.json", doctor), ("localize.json", localize),
                        ("bench.sqlite", bench)):
        write(plan, directory / name)
    return ReportFiles(doctor=(directory / "doctor.json",), cabling=directory / "cabling.json",
                       localize=directory / "localize.json", bench_db=directory / "bench.sqlite")


def first_paint(page: Path) -> float:
    with Browser(timeout=120) as browser:
        tab = browser.open(1600, 1000)
        browser.load(tab, page)
        return browser.first_paint(tab) / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=12_500)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    plan = design(build_spec(args.nodes))
    print(f"{args.nodes:,} nodes: {len(plan.links):,} cables, {len(plan.switches):,} switches "
          f"(designed in {time.perf_counter() - started:.1f} s, not counted); load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="gn-report-scale-") as scratch:
        files = results(plan, Path(scratch))
        sizes = {p.name: p.stat().st_size for p in Path(scratch).iterdir()}
        print("results: " + ", ".join(f"{name} {size / 2**20:.1f} MiB" for name, size in sorted(sizes.items())))
        page = Path(scratch) / "report.html"
        seconds, cpu, paints = [], [], []
        for run in range(args.runs):
            start, start_cpu = time.perf_counter(), time.process_time()
            write_report(build_report(plan, files), page)
            seconds.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)  # this process's own CPU: what the load does not add
            paints.append(first_paint(page) if chromium() else float("nan"))
            print(f"run {run + 1}: written in {seconds[-1]:.2f} s ({cpu[-1]:.2f} s of CPU), first paint "
                  f"{paints[-1]:.3f} s (load {os.getloadavg()[0]:.2f})")
        megabytes = page.stat().st_size / 1e6
    summary = {"nodes": args.nodes, "cables": len(plan.links), "seconds": statistics.median(seconds),
               "cpu_seconds": statistics.median(cpu), "megabytes": round(megabytes, 2),
               "first_paint_s": statistics.median(paints)}
    met = {k: summary[k] < limit for k, limit in TARGETS.items()}
    print(f"median: written in {summary['seconds']:.2f} s ({summary['cpu_seconds']:.2f} s of CPU; target "
          f"{TARGETS['seconds']:g} s), "
          f"{megabytes:.2f} MB (target {TARGETS['megabytes']:g}), first paint {summary['first_paint_s']:.3f} s "
          f"(target {TARGETS['first_paint_s']:g})")
    print(json.dumps(summary | {"met": met}))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
