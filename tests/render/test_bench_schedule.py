"""The regular fabric tests' units against the tools that read them: `systemd-analyze verify` on
the service and timer, `bash -n` / `sh -n` on the Slurm job script and its submitter, `sbatch
--test-only` against a real slurmctld (lab marker); hostile values never become lines or words."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpunet.cli.main import app
from gpunet.errors import UsageError
from gpunet.render.bench_schedule import (
    SBATCH_PATH,
    SERVICE_PATH,
    SUBMIT_PATH,
    TIMER_PATH,
    ScheduleUnits,
    render_schedule,
)
from gpunet.render.quote import systemd_word
from tests.render import validators as v

EXAMPLES = Path(__file__).parents[2] / "src/gpunet/spec/examples"

# An executable that exists here: systemd-analyze verify refuses an ExecStart it cannot find.
GPUNET = str(Path(sys.executable).with_name("gpunet")) if Path(sys.executable).with_name("gpunet").exists() \
    else sys.executable
UNITS = ScheduleUnits(gpunet=GPUNET, plan="/etc/gpunet/plan.json", db="/var/lib/gpunet/bench.sqlite",
                      plane="compute", seconds=3, slice_size="class", slices=16, hours=(1, 3, 5), period="week",
                      longest_s=8, site="su1", partition="gpu", time_limit="01:30:00")


@pytest.fixture
def tmp_plan() -> Path:
    """A spec is read as its plan (--plan takes either)."""
    return EXAMPLES / "scalable-unit.yaml"


def _written(tmp_path: Path, units: ScheduleUnits = UNITS) -> Path:
    for name, text in render_schedule(units).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def exec_start(service: str) -> list[str]:
    line = next(line for line in service.splitlines() if line.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("partition", [None, "gpu"])
def test_systemd_analyze_verify_accepts_the_units(tmp_path: Path, partition: str | None) -> None:
    systemd = _written(tmp_path, replace(UNITS, partition=partition)) / "systemd"
    done = v.run("systemd-analyze", "verify", str(systemd / "gpunet-bench.service"),
                 str(systemd / "gpunet-bench.timer"))
    assert done.returncode == 0 and not done.stderr.strip(), done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    service = _written(tmp_path, replace(UNITS, partition=None)) / SERVICE_PATH
    service.write_text(service.read_text().replace("Type=oneshot", "Type=oneshoot"))
    done = v.run("systemd-analyze", "verify", str(service))
    assert "oneshoot" in done.stdout + done.stderr


def test_the_service_runs_the_next_slice_and_the_timer_fires_at_each_hour() -> None:
    files = render_schedule(replace(UNITS, partition=None))
    assert exec_start(files[SERVICE_PATH]) == [
        GPUNET, "bench", "run", "--plan", "/etc/gpunet/plan.json", "--plane", "compute", "--duration", "3",
        "--slice", "next/16", "--slice-size", "class", "--db", "/var/lib/gpunet/bench.sqlite"]
    assert [line for line in files[TIMER_PATH].splitlines() if line.startswith("OnCalendar=")] == [
        "OnCalendar=*-*-* 01:00:00", "OnCalendar=*-*-* 03:00:00", "OnCalendar=*-*-* 05:00:00"]
    assert SBATCH_PATH not in files  # no partition, no Slurm


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_the_slurm_scripts_parse(tmp_path: Path) -> None:
    root = _written(tmp_path)
    for shell, path in (("bash", SBATCH_PATH), ("sh", SUBMIT_PATH)):
        done = v.run(shell, "-n", str(root / path))
        assert done.returncode == 0, done.stderr
    sbatch = (root / SBATCH_PATH).read_text()
    assert "#SBATCH --partition=gpu\n#SBATCH --time=01:30:00\n#SBATCH --exclusive\n" in sbatch
    assert exec_start(render_schedule(UNITS)[SERVICE_PATH]) == ["/bin/sh", "/etc/gpunet/gpunet-bench-submit.sh"]


def test_the_job_refuses_to_run_without_its_slice(tmp_path: Path) -> None:
    done = v.run("bash", str(_written(tmp_path) / SBATCH_PATH), env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "GPUNET_SLICE" in done.stderr


@pytest.mark.parametrize(("field", "value"), [
    ("partition", "gpu\n#SBATCH --uid=0"), ("partition", "gpu --uid=0"), ("partition", "g'pu"),
    ("time_limit", "1:00\nrm -rf /"), ("time_limit", "$(reboot)"),
    ("plan", "/etc/plan.json\nExecStartPre=/bin/rm"), ("plan", "/etc/my plan.json"), ("plan", "relative.json"),
    ("db", "/var/lib/$(id).sqlite"), ("db", "/var/../etc/shadow"), ("gpunet", "/usr/bin/gpunet;reboot"),
    ("install_dir", "/etc/gpunet'x"), ("lab", "ab\ncd"), ("lab", "x;y"),
])
def test_hostile_values_are_refused(field: str, value: str) -> None:
    with pytest.raises(UsageError):
        render_schedule(replace(UNITS, **{field: value}))


def test_a_site_name_stays_literal_text_on_one_line() -> None:
    service = render_schedule(replace(UNITS, site="a%nb"))[SERVICE_PATH]
    assert "Description=gpunet bench: next slice of the compute plane at a%%nb\n" in service
    with pytest.raises(UsageError):
        render_schedule(replace(UNITS, site="a\nExecStartPre=/bin/rm -rf /"))


@pytest.mark.parametrize(("word", "written"), [
    ("plain/path-1.json", "plain/path-1.json"), ("a b", '"a b"'), ("100%", '"100%%"'), ("$HOME", '"$$HOME"'),
    ('say "hi"\\', '"say \\"hi\\"\\\\"'),
])
def test_systemd_words(word: str, written: str) -> None:
    assert systemd_word(word, "x") == written


@pytest.mark.parametrize("word", ["", "a\nb", "a\0b", "a\x1bb"])
def test_systemd_words_refuse_control_characters(word: str) -> None:
    with pytest.raises(UsageError):
        systemd_word(word, "x")


def test_cli_writes_the_units_and_reports_the_coverage(tmp_path: Path, tmp_plan: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "schedule", "--plan", str(tmp_plan), "--hours", "1,3,5", "--json",
                                      "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["covered_within_period"] and report["slices"] == 16 and report["runs_per_period"] == 21
    assert sorted(report["written"]) == sorted([SERVICE_PATH, TIMER_PATH])
    assert "--slice next/16" in (tmp_path / "out" / SERVICE_PATH).read_text()
    short = CliRunner().invoke(app, ["bench", "schedule", "--plan", str(tmp_plan), "--hours", "1", "--period", "day"])
    assert short.exit_code == 1 and "NOT within a day" in short.stdout


def test_cli_refuses_bad_schedule_input(tmp_plan: Path) -> None:
    for extra in (["--period", "month"], ["--hours", "25"], ["--slice-size", "lots"], ["--plane", "nope"],
                  ["--partition", "gpu\nx"]):
        result = CliRunner().invoke(app, ["bench", "schedule", "--plan", str(tmp_plan), *extra])
        assert result.exit_code == 2, (extra, result.output)
