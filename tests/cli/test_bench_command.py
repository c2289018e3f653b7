"""`gpunet bench show | compare | run --png` through the real Typer app, on a results database
written by the store (no lab: `run` gets its measurements from a stand-in for gpunet.api.bench.run)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpunet.api import bench as bench_api
from gpunet.bench.health import EndHealth
from gpunet.bench.store import Measurement, save_run
from gpunet.cli.main import app


def stand_in(measured: Callable[..., tuple[int, list[Measurement]]],
             congestion: str | None = "cubic") -> Callable[..., bench_api.BenchOutcome]:
    """A stand-in for gpunet.api.bench.run that hands its arguments over as keywords, and says it
    ran with `congestion`."""
    def run(wanted: object, *, plan: Path | None, lab: str | None, db: Path,
            progress: object = None) -> bench_api.BenchOutcome:
        run_id, results = measured(**dataclasses.asdict(wanted), plan_source=plan,  # type: ignore[call-overload]
                                   lab=lab, db=db, progress=progress)
        return bench_api.BenchOutcome(run_id, results, congestion)
    return run


runner = CliRunner()
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def m(source: str, destination: str, value: float, status: str = "ok", *, reason: str | None = None,
      attempts: int = 1) -> Measurement:
    return Measurement(source=source, destination=destination, plane="compute", metric="throughput", value=value,
                       unit="Gb/s", expected=10.0, status=status, raw="{}", reason=reason, attempts=attempts,
                       health=(EndHealth(node=source, role="client", seconds=4.0, cpu_pressure=0.9 if reason else 0.01,
                                         busy=0.5, steal=0.0, cpus=2),))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Run 1 the baseline; run 2 with a-c 7 % down (warn), b-c 30 % down (fail), a-b gone."""
    path = tmp_path / "bench.sqlite"
    save_run(path, plan_hash="h", tool="iperf3", pattern="all-pairs", arguments="plane=compute",
             measurements=[m("a", "b", 9.0), m("a", "c", 9.0), m("b", "c", 9.0)])
    save_run(path, plan_hash="h", tool="iperf3", pattern="all-pairs", arguments="plane=compute",
             measurements=[m("a", "c", 8.37), m("b", "c", 6.3, "low")])
    return path


def test_show_prints_the_stored_matrix(db: Path) -> None:
    result = runner.invoke(app, ["bench", "show", "2", "--db", str(db)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "run 2: iperf3 all-pairs, plane=compute" in result.stdout
    lines = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()
             if line.strip() and line.split()[0] in ("a", "b", "c")}
    assert lines == {"a": ["84"], "b": ["63"], "c": ["84", "63"]}  # a-b was not measured: empty


def test_show_json_and_png(db: Path, tmp_path: Path) -> None:
    png = tmp_path / "heat.png"
    result = runner.invoke(app, ["bench", "show", "1", "--db", str(db), "--png", str(png), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["run"]["pattern"] == "all-pairs" and len(body["measurements"]) == 3
    assert body["measurements"][0]["percent_of_expected"] == pytest.approx(90.0)
    assert png.read_bytes().startswith(PNG_SIGNATURE)


def test_compare_flags_the_regression_and_exits_1(db: Path) -> None:
    result = runner.invoke(app, ["bench", "compare", "1", "2", "--db", str(db), "--json"])
    assert result.exit_code == 1, result.output
    rows = {(r["source"], r["destination"]): r for r in json.loads(result.stdout)}
    assert {k: r["verdict"] for k, r in rows.items()} == {("a", "b"): "missing", ("a", "c"): "warn",
                                                          ("b", "c"): "fail"}
    assert rows["b", "c"]["variance"] == pytest.approx(-0.3)
    table = runner.invoke(app, ["bench", "compare", "1", "2", "--db", str(db)], terminal_width=200)
    assert "-30.0 %" in table.stdout and "-7.0 %" in table.stdout and "1 fail, 1 missing, 1 warn" in table.stdout


def test_compare_by_a_looser_rules_file_still_fails_on_the_missing_pair(db: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - metric: throughput\n    warn_below: -0.05\n    fail_below: -0.50\n")
    result = runner.invoke(app, ["bench", "compare", "1", "2", "--db", str(db), "--rules", str(rules), "--json"])
    assert result.exit_code == 1, result.output  # a-b is missing: the run no longer covers the fabric
    assert sorted(r["verdict"] for r in json.loads(result.stdout)) == ["missing", "warn", "warn"]
    save_run(db, plan_hash="h", tool="iperf3", pattern="all-pairs", arguments="plane=compute",
             measurements=[m("a", "b", 8.9), m("a", "c", 8.37), m("b", "c", 6.3, "low")])
    covered = runner.invoke(app, ["bench", "compare", "1", "3", "--db", str(db), "--rules", str(rules)])
    assert covered.exit_code == 0, covered.output


def test_compare_shows_an_inconclusive_pair_apart_and_says_why(db: Path) -> None:
    why = "server c: runnable tasks waited for a CPU 96 % of the window (limit 50 %)"
    save_run(db, plan_hash="h", tool="iperf3", pattern="all-pairs", arguments="plane=compute",
             measurements=[m("a", "b", 9.0), m("a", "c", 9.0), m("b", "c", 5.0, "inconclusive", reason=why)])
    result = runner.invoke(app, ["bench", "compare", "1", "3", "--db", str(db)])
    assert result.exit_code == 0, result.output  # not a regression: nothing to judge it by
    assert "1 inconclusive, 2 ok" in result.stdout
    assert f"inconclusive b -> c: current: {why}" in result.stdout


def test_compare_with_a_bad_rules_file_or_run_exits_2(db: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - metric: throughput\n    fail_belw: -0.1\n")
    result = runner.invoke(app, ["bench", "compare", "1", "2", "--db", str(db), "--rules", str(rules)])
    assert result.exit_code == 2 and "rules.yaml:3:5: rules.0.fail_belw: unknown key" in result.stderr
    unknown = runner.invoke(app, ["bench", "compare", "1", "7", "--db", str(db)])
    assert unknown.exit_code == 2 and "no bench run 7 in" in unknown.stderr
    missing_db = runner.invoke(app, ["bench", "show", "1", "--db", str(tmp_path / "none.sqlite")])
    assert missing_db.exit_code == 2 and "does not exist" in missing_db.stderr


def test_run_draws_the_heat_map(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def measured(**arguments: object) -> tuple[int, list[Measurement]]:
        results = [m("a", "b", 9.5), m("b", "a", 4.0, "low")]
        run = save_run(arguments["db"], plan_hash="h", tool="iperf3",  # type: ignore[arg-type]
                       pattern=str(arguments["pattern"]), arguments="", measurements=results)
        return run, results

    monkeypatch.setattr(bench_api, "run", stand_in(measured))  # nothing is measured, no node dialled
    png = tmp_path / "run.png"
    result = runner.invoke(app, ["bench", "run", "--pattern", "rail", "--db", str(db), "--png", str(png)],
                           terminal_width=200)
    assert result.exit_code == 1, result.output  # b -> a is low
    assert "run 3 saved" in result.stdout and png.read_bytes().startswith(PNG_SIGNATURE)
    shown = json.loads(runner.invoke(app, ["bench", "show", "3", "--db", str(db), "--json"]).stdout)
    assert shown["run"]["pattern"] == "rail"


def test_many_nodes_print_the_worst_pairs_not_a_matrix(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite"
    pairs = [m(f"gpu{a}", f"gpu{b}", 9.0) for a in range(1, 21) for b in range(a + 1, 21)]
    pairs[7] = m("gpu1", "gpu9", 2.0, "low")
    save_run(path, plan_hash="h", tool="iperf3", pattern="all-pairs", arguments="", measurements=pairs)
    result = runner.invoke(app, ["bench", "show", "1", "--db", str(path)], terminal_width=160)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines() if line.strip().startswith("gpu")]
    assert rows[0][:2] == ["gpu1", "gpu9"] and "low" in rows[0]  # the worst first
    assert len(rows) == 20 and "1 low, 189 ok" in result.stdout


def test_an_nccl_run_shows_its_job_line_and_has_no_heat_map(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite"
    job = Measurement(source="gpu[1-2]", destination="all_reduce_perf", plane="compute", metric="busbw",
                      value=70.7, unit="GB/s", status="ok")
    save_run(path, plan_hash="h", tool="all_reduce_perf", pattern="job", arguments="", measurements=[job])
    shown = runner.invoke(app, ["bench", "show", "1", "--db", str(path)])
    assert "all_reduce_perf over gpu[1-2]: average bus bandwidth 70.7 GB/s ok" in shown.stdout
    drawn = runner.invoke(app, ["bench", "show", "1", "--db", str(path), "--png", str(tmp_path / "x.png")])
    assert drawn.exit_code == 2 and "no matrix to draw" in drawn.output and not (tmp_path / "x.png").exists()


def test_run_says_its_rounds_on_stderr_and_its_retries_and_health_in_json(db: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    why = "server b: runnable tasks waited for a CPU 93 % of the window (limit 50 %)"
    calls: dict[str, object] = {}

    def measured(**arguments: object) -> tuple[int, list[Measurement]]:
        calls.update(arguments)
        say = arguments["progress"]
        for done, what in enumerate(["round 1/2: 1 pairs", "round 2/2: 1 pairs", "2 rounds measured",
                                     "retry 1/2: a -> b"]):
            say(done, 2, what)  # type: ignore[operator]
        results = [m("a", "b", 9.5, attempts=2), m("a", "c", 9.6, "inconclusive", reason=why, attempts=2),
                   m("b", "c", 9.7)]
        return save_run(arguments["db"], plan_hash="h", tool="iperf3", pattern="all-pairs",  # type: ignore[arg-type]
                        arguments="plane=compute", measurements=results), results

    monkeypatch.setattr(bench_api, "run", stand_in(measured))  # nothing is measured, no node dialled
    result = runner.invoke(app, ["bench", "run", "--db", str(db), "--json", "--retry-inconclusive", "2"])
    assert result.exit_code == 1, result.output  # an inconclusive pair is not a pass
    assert calls["retry_inconclusive"] == 2
    assert result.stderr.splitlines() == ["round 1/2: 1 pairs", "round 2/2: 1 pairs", "2 rounds measured",
                                          "retry 1/2: a -> b"]
    body = json.loads(result.stdout)
    assert (body["retried"], body["still_inconclusive"]) == (2, 1)
    assert calls["congestion"] == "plan" and body["congestion"] == "cubic"  # the plane's choice, recorded
    rows = {(r["source"], r["destination"]): r for r in body["measurements"]}
    assert rows["a", "c"]["status"] == "inconclusive" and rows["a", "c"]["reason"] == why
    assert rows["a", "c"]["health"][0]["cpu_pressure"] == 0.9 and rows["a", "b"]["attempts"] == 2
    table = runner.invoke(app, ["bench", "show", "3", "--db", str(db)])
    assert "96?" in table.stdout and f"inconclusive a -> c: {why}" in table.stdout


def test_history_has_the_plane_and_piped_tables_do_not_wrap(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite"
    long = "gpu-rack17-chassis03-node0042"
    save_run(path, plan_hash="h", tool="iperf3", pattern="all-pairs", arguments="plane=storage seconds=3 nodes=all",
             measurements=[m(long, f"{long}-peer", 9.0), m("a", "b", 4.0, "low"), m("a", "c", 9.0, "inconclusive")])
    shown = runner.invoke(app, ["bench", "history", "--db", str(path)])
    header, row = (line.split() for line in shown.stdout.splitlines() if line.split()[:1] in (["run"], ["1"]))
    assert header == ["run", "started", "tool", "pattern", "plane", "pairs", "flagged", "congested", "inconclusive"]
    assert row[2:] == ["iperf3", "all-pairs", "storage", "3", "1", "0", "1"]
    compared = runner.invoke(app, ["bench", "compare", "1", "1", "--db", str(path)])
    lines = [line for line in compared.stdout.splitlines() if long in line]
    assert len(lines) == 1 and len(lines[0]) > 80 and lines[0].split()[:2] == [long, f"{long}-peer"]


def test_show_of_a_large_run_lists_its_worst_pairs_from_the_database(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite"
    names = [f"gpu{i}" for i in range(1, 143)]  # 10 011 pairs: past what `show` loads whole
    pairs = [m(a, b, 9.0) for i, a in enumerate(names) for b in names[i + 1:]]
    pairs[5000] = m(pairs[5000].source, pairs[5000].destination, 1.0, "low")
    pairs[7] = m(pairs[7].source, pairs[7].destination, 9.9, "inconclusive", reason="client gpu1: ...")
    save_run(path, plan_hash="h", tool="iperf3", pattern="all-pairs", arguments="", measurements=pairs)
    result = runner.invoke(app, ["bench", "show", "1", "--db", str(path), "--png", str(tmp_path / "x.png")])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines() if line.strip().startswith("gpu")]
    assert rows[0][:2] == [pairs[5000].source, pairs[5000].destination] and "low" in rows[0]
    assert "inconclusive" in rows[1] and len(rows) == 20
    assert "1 inconclusive, 1 low, 10009 ok" in result.stdout
    assert (tmp_path / "x.png").read_bytes().startswith(PNG_SIGNATURE)


def test_run_on_a_terminal_shows_a_bar_not_lines(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console  # noqa: PLC0415

    from gpunet.cli import bench as bench_cli  # noqa: PLC0415

    terminal = io.StringIO()
    monkeypatch.setattr(bench_cli, "stderr", Console(file=terminal, force_terminal=True, width=100))

    def measured(**arguments: object) -> tuple[int, list[Measurement]]:
        arguments["progress"](0, 3, "round 1/3: 4 pairs")  # type: ignore[operator]
        return 1, [m("a", "b", 9.5)]

    monkeypatch.setattr(bench_api, "run", stand_in(measured))  # nothing is measured, no node dialled
    result = runner.invoke(app, ["bench", "run", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert result.stderr == "" and "round 1/3: 4 pairs" in terminal.getvalue()  # drawn by the bar


def test_run_says_which_congestion_control_it_used(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, object] = {}

    def measured(**arguments: object) -> tuple[int, list[Measurement]]:
        calls.update(arguments)
        return 1, [m("a", "b", 9.5)]

    monkeypatch.setattr(bench_api, "run", stand_in(measured))
    planned = runner.invoke(app, ["bench", "run", "--db", str(db)], terminal_width=200)
    assert planned.exit_code == 0, planned.output
    assert "TCP congestion control: cubic (the plane's choice in the Plan)" in planned.stdout
    monkeypatch.setattr(bench_api, "run", stand_in(measured, congestion=None))
    hosts = runner.invoke(app, ["bench", "run", "--db", str(db), "--congestion", "system", "--json"])
    assert calls["congestion"] == "system" and json.loads(hosts.stdout)["congestion"] == "system"


def test_bench_run_detached_is_the_same_command_found_by_name(tmp_path: Path) -> None:
    """`bench run --detach NAME` starts this very command line (less --detach) in this directory with
    this user's database, and returns; `fleet status NAME` comes back to it. The plan here does not
    exist, so the detached sweep ends at once with bench's own error, which its log shows."""
    env = os.environ | {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path), "TMUX_TMPDIR": str(tmp_path)}
    gpunet = [sys.executable, "-m", "gpunet"]
    started = subprocess.run([*gpunet, "bench", "run", "missing-plan.json", "--detach", "sweep-a"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=60, check=False)
    assert started.returncode == 0, started.stderr
    assert "gpunet fleet status sweep-a" in started.stdout
    status = subprocess.run([*gpunet, "fleet", "status", "sweep-a", "--wait", "30", "--json"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=60, check=False)
    (group,) = json.loads(status.stdout)["groups"]
    assert (group["state"], group["rc"]) == ("done", 2), group
    assert "missing-plan.json" in group["output"]
    record = json.loads((tmp_path / "state" / "gpunet" / "runs" / "sweep-a.json").read_text())
    assert "--detach" not in record["command"] and str(tmp_path / "state" / "gpunet" / "bench.sqlite") in \
        record["command"]


def test_the_worst_pairs_caption_and_reasons_count_what_is_there(tmp_path: Path) -> None:
    """A chain of 18 nodes (17 pairs) is no "20 worst of 17"; and inconclusive pairs past the
    table are counted, not dropped with it."""
    path = tmp_path / "b.sqlite"
    chain = [m(f"gpu{i}", f"gpu{i + 1}", 9.0) for i in range(1, 18)]
    save_run(path, plan_hash="h", tool="iperf3", pattern="ring", arguments="", measurements=chain)
    names = [f"gpu{i}" for i in range(1, 21)]
    pairs = [m(a, b, 9.0, "inconclusive", reason=f"client {a}: busy")
             for i, a in enumerate(names) for b in names[i + 1:]]
    save_run(path, plan_hash="h", tool="iperf3", pattern="all-pairs", arguments="", measurements=pairs[:30])
    small = runner.invoke(app, ["bench", "show", "1", "--db", str(path)])
    assert "all 17 pairs, worst first" in small.stdout and "worst of" not in small.stdout, small.stdout
    many = runner.invoke(app, ["bench", "show", "2", "--db", str(path)])
    assert "the 20 worst of 30 pairs" in many.stdout
    assert many.stdout.count("inconclusive gpu") == 20 and "... and 10 more inconclusive" in many.stdout
