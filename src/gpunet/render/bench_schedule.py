"""Regular fabric tests: a systemd timer and service for the admin host that run `gpunet bench run`
on the next slice of the fabric's cover at the hours given, and, where the cluster runs Slurm, a
job script and its submitter, so a slice's nodes are taken only once they are idle.

The files are static: the rotation lives in the bench database (`--slice next/N` runs the slice
after the last one stored), so every run of the same unit measures the next slice."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpunet.errors import UsageError
from gpunet.render.common import header
from gpunet.render.quote import systemd_text, systemd_word, token

UNIT = "gpunet-bench"
SERVICE_PATH, TIMER_PATH = f"systemd/{UNIT}.service", f"systemd/{UNIT}.timer"
SBATCH_PATH, SUBMIT_PATH = f"slurm/{UNIT}.sbatch", f"slurm/{UNIT}-submit.sh"
SLURM_TIME = re.compile(r"(?:[0-9]{1,3}-)?[0-9]{1,3}(?::[0-9]{2}){0,2}")  # sbatch --time: [D-]H[:M[:S]] or M
PLAIN_PATH = re.compile(r"/[A-Za-z0-9_./@+-]*")
START_MARGIN_S = 600  # beyond the slice's estimate before systemd stops a hung run


@dataclass(frozen=True)
class ScheduleUnits:
    """What the units run and when."""

    gpunet: str  # the gpunet executable on the admin host
    plan: str  # plan.json there
    db: str  # the bench database there
    plane: str
    seconds: int  # per measurement
    slice_size: str  # SliceSize.text
    slices: int
    hours: tuple[int, ...]
    period: str
    longest_s: int  # the longest slice's estimate
    site: str = ""
    partition: str | None = None  # Slurm: run each slice as a job in this partition
    time_limit: str = "02:00:00"
    install_dir: str = "/etc/gpunet"  # where the Slurm scripts are copied on the admin host
    lab: str | None = None  # a lab's units reach its servers with --lab instead of the plan


def render_schedule(units: ScheduleUnits) -> dict[str, str]:
    """The service and timer, and with a partition the Slurm job script and its submitter, by path."""
    _check_paths(units)
    files = {SERVICE_PATH: render_service(units), TIMER_PATH: render_timer(units)}
    if units.partition is not None:
        files |= {SBATCH_PATH: render_sbatch(units), SUBMIT_PATH: render_submit(units)}
    return files


def _check_paths(units: ScheduleUnits) -> None:
    for what, path in (("--gpunet", units.gpunet), ("--plan-path", units.plan), ("--db-path", units.db),
                       ("--install-dir", units.install_dir)):
        if not PLAIN_PATH.fullmatch(path) or "/../" in f"{path}/":
            raise UsageError(f"{what} {path[:60]!r}: an absolute path of letters, digits and _ . / @ + - (the units "
                             "and scripts name it as one word)")


def _source(units: ScheduleUnits) -> list[str]:
    if units.lab is None:
        return ["--plan", units.plan]
    if not re.fullmatch(r"[a-z0-9]{1,4}", units.lab):
        raise UsageError(f"--lab {units.lab[:20]!r}: a lab id (1-4 lowercase letters or digits)")
    return ["--lab", units.lab]


def bench_argv(units: ScheduleUnits, slice_: str) -> list[str]:
    """The `gpunet bench run` the service (or the Slurm job) runs."""
    return [units.gpunet, "bench", "run", *_source(units), "--plane", units.plane, "--duration",
            str(units.seconds), "--slice", slice_, "--slice-size", units.slice_size, "--db", units.db]


def next_argv(units: ScheduleUnits) -> list[str]:
    """The command that prints the next slice and its nodes (`K/N NODESET`), for the submitter."""
    return [units.gpunet, "bench", "schedule", "--next", *_source(units), "--plane", units.plane,
            "--duration", str(units.seconds), "--slice-size", units.slice_size, "--slices", str(units.slices),
            "--db", units.db]


def render_service(units: ScheduleUnits) -> str:
    where = f" at {units.site}" if units.site else ""
    if units.partition is None:
        command = bench_argv(units, f"next/{units.slices}")
    else:
        command = ["/bin/sh", f"{units.install_dir}/{UNIT}-submit.sh"]
    lines = [
        header("systemd service").rstrip(),
        "# One slice of the fabric's cover a run, the slices in rotation (the database keeps which ran last).",
        "# Exit 1 (pairs flagged) is a result, not a failure of the unit: alerts report it.",
        "[Unit]",
        f"Description={systemd_text(f'gpunet bench: next slice of the {units.plane} plane{where}', 'site')}",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=oneshot",
        "ExecStart=" + " ".join(systemd_word(w, "bench command") for w in command),
        "SuccessExitStatus=1",
        f"TimeoutStartSec={units.longest_s * 2 + START_MARGIN_S if units.partition is None else 'infinity'}",
        "Nice=5",
    ]
    return "\n".join(lines) + "\n"


def render_timer(units: ScheduleUnits) -> str:
    lines = [
        header("systemd timer").rstrip(),
        f"# {units.slices} slices of {units.slice_size} in rotation; {len(units.hours)} run(s) a day: every slice runs "
        f"within a {units.period} when {units.slices} <= {len(units.hours) * (7 if units.period == 'week' else 1)}.",
        "[Unit]",
        f"Description=gpunet bench: regular fabric tests ({units.plane} plane)",
        "",
        "[Timer]",
        *(f"OnCalendar=*-*-* {hour:02d}:00:00" for hour in units.hours),
        "Persistent=true",
        f"Unit={UNIT}.service",
        "",
        "[Install]",
        "WantedBy=timers.target",
    ]
    return "\n".join(lines) + "\n"


def _slurm_values(units: ScheduleUnits) -> tuple[str, str]:
    partition = token(units.partition or "", "--partition")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", partition):
        raise UsageError(f"--partition {partition[:60]!r}: a Slurm partition name (letters, digits, _ . -)")
    if not SLURM_TIME.fullmatch(units.time_limit):
        raise UsageError(f"--time {units.time_limit[:40]!r}: a Slurm time limit, [D-]HH[:MM[:SS]] or minutes")
    return partition, units.time_limit


def render_sbatch(units: ScheduleUnits) -> str:
    """The job: exclusive use of the slice's nodes (the submitter names them), so it waits in the
    queue until they are idle; the slice it runs comes in GPUNET_SLICE."""
    partition, time_limit = _slurm_values(units)
    command = " ".join(_sh(w) for w in bench_argv(units, "@SLICE@")).replace(_sh("@SLICE@"), '"$GPUNET_SLICE"')
    return "\n".join([
        "#!/bin/bash",
        f"#SBATCH --job-name={UNIT}",
        f"#SBATCH --partition={partition}",
        f"#SBATCH --time={time_limit}",
        "#SBATCH --exclusive",
        "#SBATCH --dependency=singleton",
        header("Slurm job script").rstrip(),
        "# Submitted by gpunet-bench-submit.sh with --nodelist (the slice's nodes) and GPUNET_SLICE=K/N.",
        "set -eu",
        'case "${GPUNET_SLICE:-}" in',
        "  [1-9]*/[1-9]*) ;;",
        '  *) echo "GPUNET_SLICE=K/N is not set: submit with gpunet-bench-submit.sh" >&2; exit 2 ;;',
        "esac",
        f"exec {command}",
    ]) + "\n"


def render_submit(units: ScheduleUnits) -> str:
    """Asks gpunet which slice is next and on which nodes, then submits the job on those nodes and
    waits for it (the service lasts as long as the job: the timer never stacks a second one)."""
    _slurm_values(units)
    return "\n".join([
        "#!/bin/sh",
        header("Slurm submitter").rstrip(),
        "set -eu",
        f"next=$({' '.join(_sh(w) for w in next_argv(units))})",
        'slice=${next%% *}',
        'nodes=${next#* }',
        f'exec sbatch --wait --nodelist="$nodes" --export=ALL,GPUNET_SLICE="$slice" {_sh(units.install_dir)}/'
        f"{UNIT}.sbatch",
    ]) + "\n"


def _sh(word: str) -> str:
    """A shell word: the values here are plain paths and names, quoted all the same."""
    return "'" + word.replace("'", "'\\''") + "'"
