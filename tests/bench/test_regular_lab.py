"""Regular fabric tests, end to end in the default example's lab (8 servers: 6 on the 8-rail
compute plane, a leaf a rail, 8 cables from each leaf to each of 2 spines; root, `lab` marker):
the rendered service's command run by hand three times, one pair class a run, covers what the
coverage report claims run by run; a baseline from those runs; `lab fault --rate` on one
leaf–spine cable under the first class's leaf, and a fourth run of that class sees the slow path:
judged low, it fails the class against the baseline and fires the rendered alert in a real
Prometheus scraping the exporter in a lab server (`--bench-db`); on a host so loaded that every
pair hitting it had a saturated end, it is said beside the saturation and not judged (DESIGN #17),
and Prometheus shows those inconclusive pairs."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpunet.api.bench_regular import ScheduleRequest, schedule, set_baseline
from gpunet.bench import Fabric
from gpunet.bench.aggregate import AggregateKey, aggregate
from gpunet.bench.history import save_aggregates, set_expected
from gpunet.bench.schedule import RailPair
from gpunet.bench.slices import crossed_by
from gpunet.bench.store import Measurement, load_run, save_run
from gpunet.cli.main import app
from gpunet.lab.build import LAB_PLAN, lab_dir
from gpunet.lab.state import LabState
from gpunet.reach import Reach
from gpunet.render.bench_schedule import SERVICE_PATH
from tests.lab.helpers import server_process
from tests.labs import shared_lab, shared_lab_id
from tests.monitor.live_prometheus import rendered_config, running_prometheus, until

pytestmark = [pytest.mark.lab, pytest.mark.slow]
LAB = shared_lab_id("default8")
EXPORTER_NODE = "gpu001"

lab = shared_lab("default8")


def _command(tmp_path: Path) -> tuple[list[str], dict[str, Any]]:
    """The service's ExecStart, less the gpunet executable, and the coverage report."""
    found = schedule(ScheduleRequest(seconds=2, slice_size="class", hours="1,3,5", period="week",
                                     db_path=str(tmp_path / "bench.sqlite")), plan=None, lab=LAB, out=None)
    line = next(x for x in found.files[SERVICE_PATH].splitlines() if x.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))[1:], found.report


def _pairs(rows: list[dict[str, Any]]) -> list[RailPair]:
    return [RailPair(r["source"], r["destination"], r["rail"], r["to_rail"], r["path"]) for r in rows]


def _bench(argv: list[str]) -> dict[str, Any]:
    result = CliRunner().invoke(app, [*argv, "--json"])
    assert result.exit_code in (0, 1), result.output
    return dict(json.loads(result.stdout))


def test_three_scheduled_runs_cover_what_the_report_claims_and_a_slow_cable_fires_the_alert(
        lab: LabState, tmp_path: Path) -> None:
    plan = Reach.of_lab(LAB).plan()
    assert plan is not None
    fabric = Fabric.of(plan, "compute")
    argv, report = _command(tmp_path)
    assert argv[:2] == ["bench", "run"] and f"next/{report['slices']}" in argv
    seen = set()
    for k, row in enumerate(report["rotation"][:3], start=1):
        measured = _pairs(_bench(argv)["measurements"])
        crossed = crossed_by(fabric, "compute", measured)
        assert [c.label for c in crossed.classes] == row["classes"]  # one pair class a run, the one claimed
        assert sorted(crossed.rails) == row["rails"]
        assert sorted(map(list, crossed.groups)) == row["leaf_spine_groups"]
        seen |= crossed.groups
        assert len(seen) == row["cumulative"]["leaf_spine_groups"], k
    db = tmp_path / "bench.sqlite"
    runner = CliRunner()
    assert runner.invoke(app, ["bench", "baseline", "1", "2", "3", "--db", str(db)]).exit_code == 0
    first_class = report["rotation"][0]
    cable = _uplink_under(plan, fabric, first_class["classes"][0])
    faulted = runner.invoke(app, ["lab", "fault", "--lab", LAB, cable, "--rate", "2mbit"])
    assert faulted.exit_code == 0, faulted.output
    try:
        fourth = _slow_path_run([a if a != f"next/{report['slices']}" else f"1/{report['slices']}" for a in argv])
    finally:
        assert runner.invoke(app, ["lab", "heal", "--lab", LAB]).exit_code == 0
    label = first_class["classes"][0]
    slow = [r for r in fourth if "a path below the rest" in (r["reason"] or "")]
    assert all(r["status"] in ("low", "inconclusive") for r in slow), fourth  # seen, never ok
    # unseen only where the host's load said nothing could be judged (CI: every pair's ends saturated)
    assert slow or any(r["status"] == "inconclusive" for r in fourth), fourth
    checked = runner.invoke(app, ["bench", "check", "--db", str(db), "--json"])
    verdict = {v["label"]: v for v in json.loads(checked.stdout)}[label]
    rail = label.split("/")[2].removeprefix("rail")
    if any(r["status"] == "low" for r in fourth):
        assert checked.exit_code == 1 and verdict["verdict"] == "fail", verdict
        alert = _in_prometheus(tmp_path, db, lambda api: _firing(api, "GpunetBenchPairsFlagged"))
        assert (alert["labels"]["path"], alert["labels"]["rail"]) == ("cross-leaf", rail)
    else:  # a loaded host: every pair that hit the slow cable had a saturated end, said and not judged
        assert verdict["verdict"] != "fail", verdict
        query = f'gpunet_bench_class_inconclusive_pairs{{path="cross-leaf", rail="{rail}"}}'
        found = _in_prometheus(tmp_path, db, lambda api: _query(api, query))
        assert float(found["value"][1]) == sum(r["status"] == "inconclusive" for r in fourth)


def _slow_path_run(argv: list[str], tries: int = 3) -> list[dict[str, Any]]:
    """The first class's slice run again until a pair is flagged: a pair's 32 streams hash over its
    leaf's 16 uplinks with fresh ports each run, and miss the one slow cable now and then (1 in 8);
    on a loaded host a pair that hits it may be inconclusive instead (an end saturated)."""
    for _ in range(tries):
        rows: list[dict[str, Any]] = _bench(argv)["measurements"]
        print("\n".join(f"{r['source']}>{r['destination']} {r['status']} {r['reason']}" for r in rows))  # with -s
        if any(r["status"] == "low" for r in rows):
            break
    return rows


def _uplink_under(plan: Any, fabric: Fabric, label: str) -> str:
    """One leaf–spine cable of the leaf the class's sources hang from (the class sends up through it)."""
    plane, path, rail = label.split("/")
    assert (plane, path) == ("compute", "cross-leaf")
    leaf = next(n.leaf for n in fabric.nics if n.rail == int(rail.removeprefix("rail")))
    cable = next(c for c in plan.links if c.tier == "leaf_spine" and c.a.device == leaf)
    return f"{cable.a.device}:{cable.a.port}"


def _in_prometheus(tmp_path: Path, db: Path, ask: Callable[[str], dict[str, Any] | None]) -> dict[str, Any]:
    """What `ask` finds in a real Prometheus (its API's URL given) scraping the exporter in
    EXPORTER_NODE with the bench database, within live_prometheus's patience."""
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus missing (Debian package prometheus): the alert is held by its promtool unit test")
    config = rendered_config(tmp_path / "prom", LAB, [EXPORTER_NODE])
    exporter = [sys.executable, "-m", "gpunet", "exporter", "--plan", str(lab_dir(LAB) / LAB_PLAN), "--node",
                EXPORTER_NODE, "--bench-db", str(db)]
    with server_process(LAB, EXPORTER_NODE, *exporter), running_prometheus(config, tmp_path / "prom/db") as api:
        return dict(until(lambda: ask(api)))


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())["data"]


def _firing(api: str, name: str) -> dict[str, Any] | None:
    return next((a for a in _get(f"{api}/alerts")["alerts"]
                 if a["labels"]["alertname"] == name and a["state"] == "firing"), None)


def _query(api: str, promql: str) -> dict[str, Any] | None:
    found = _get(f"{api}/query?query={urllib.parse.quote(promql)}")["result"]
    return found[0] if found else None



def test_the_rendered_bench_alerts_fire_in_prometheus_scraping_the_lab_exporter(lab: LabState, tmp_path: Path) -> None:
    """Whatever the host's load does to a measurement: a database whose rail-0 class regressed 20 %
    against its baseline with a pair flagged, and whose rotation's cover names a class never
    measured, fires GpunetBenchRegression, GpunetBenchPairsFlagged and GpunetBenchClassNotMeasured."""
    db = tmp_path / "bench.sqlite"
    pair = {"plane": "compute", "metric": "throughput", "unit": "Gb/s", "expected": 0.4, "rail": 0,
            "to_rail": 1, "path": "cross-leaf"}
    runs = [save_run(db, plan_hash="h", tool="iperf3", pattern="fabric", arguments="plane=compute",
                     measurements=[Measurement(source="gpu001", destination="gpu002", value=value, status=status,
                                               **pair) for value, status in shape])
            for shape in ([(0.39, "ok")], [(0.31, "low"), (0.31, "ok")])]
    for run_id in runs:
        save_aggregates(db, run_id, aggregate(load_run(db, run_id)[1]))
    set_baseline(db, runs[:1])
    set_expected(db, "compute", [AggregateKey("class", "compute", "throughput", "same-leaf", 5)])
    fired = _in_prometheus(tmp_path, db, lambda api: _all_firing(api, BENCH_ALERTS))
    assert {(a["labels"]["alertname"], a["labels"]["path"], a["labels"]["rail"]) for a in fired["alerts"]} == {
        ("GpunetBenchRegression", "cross-leaf", "0"), ("GpunetBenchPairsFlagged", "cross-leaf", "0"),
        ("GpunetBenchClassNotMeasured", "same-leaf", "5")}


BENCH_ALERTS = ("GpunetBenchRegression", "GpunetBenchPairsFlagged", "GpunetBenchClassNotMeasured")


def _all_firing(api: str, names: tuple[str, ...]) -> dict[str, Any] | None:
    found = [a for a in _get(f"{api}/alerts")["alerts"] if a["labels"]["alertname"] in names and a["state"] == "firing"]
    return {"alerts": found} if {a["labels"]["alertname"] for a in found} == set(names) else None
