"""The health of a measurement's ends: how much each end's CPUs were contended over the
measurement's window, read from /proc on that end just before and just after it (CPU pressure,
PSI `some`; busy and steal time from /proc/stat), and the tool's own CPU figure (iperf3 -J). A
measurement taken while an end was saturated is evidence about that host, not about the link:
such a pair is `inconclusive`, with the end and the figure that says why. Parsing and judging are
pure; the runner reads the samples through the same transport that runs the tool on the node."""

from __future__ import annotations

import re
from typing import Literal

from gpunet.bench.expected import BELOW_EXPECTED
from gpunet.errors import ParseError
from gpunet.model.base import Frozen

# One command, both files: on a kernel without PSI (before 4.20, or booted psi=0) cat still prints
# /proc/uptime and /proc/stat and reports the missing file on stderr only.
CPU_SAMPLE_ARGV = ("cat", "--", "/proc/uptime", "/proc/stat", "/proc/pressure/cpu")
TOOL = "/proc cpu sample"

# PSI `some` is the share of the window in which a runnable task waited for a CPU (system-wide:
# each CPU's share weighted by its busy time). At one half, work queued through half the busy time:
# more demand than the host has CPUs (3 CPU-bound tasks on 2 CPUs read 0.53, tests/fixtures/
# proc_cpu/busy), so the tool and the softirqs that move its packets may have lost time enough to
# pass the 15 % margin under which a pair is flagged. Lower, bursts of other work are not called
# saturation: an inconclusive pair is not judged at all, so calling it too eagerly hides a bad link
# as surely as a flag blames a good one. The lab's 2-core host over measurement windows: idle
# 0.00-0.05; beside other test suites mostly 0.1-0.45, at times 0.55-0.7; a CPU burner a core 0.93-1.0.
CPU_PRESSURE_LIMIT = 0.5
# No CPU to spare: idle under one CPU on average over the window (under 5 % of the CPUs on hosts of
# fewer than 20). PSI alone misses the host whose CPUs each run one CPU-bound task and nothing queues
# behind them: the tool then runs only by preempting that work (it is the work displaced that waits,
# a few % of PSI), at the scheduler's discretion, and a saturated host is what that is.
IDLE_CPUS_FLOOR, IDLE_SHARE_FLOOR = 1.0, 0.05
# Steal is CPU time the hypervisor gave to another guest: invisible to the tool, lost all the same.
# Past a tenth of the CPU time, a sender that needs all its CPU loses up to that share of its rate:
# most of the 15 % margin under which a pair is flagged.
STEAL_LIMIT = 0.10
# iperf3 before 3.16 runs all its streams in one thread: near a whole core (its -J figure is % of
# one core over the test) it is CPU-bound and measures the host. From 3.16 each stream has its own
# thread, so the bound is that many cores (at most the end's CPUs).
TOOL_CPU_LIMIT = 90.0
USER_HZ_FIELDS = 8  # user nice system idle iowait irq softirq steal (guest time is inside user)
IDLE, IOWAIT, STEAL = 3, 4, 7
UPTIME = re.compile(r"^([0-9]{1,12}(?:\.[0-9]{1,9})?) [0-9]{1,15}(?:\.[0-9]{1,9})?$")
PSI_SOME = re.compile(r"^some avg10=\S+ avg60=\S+ avg300=\S+ total=([0-9]{1,20})$")
JIFFIES = re.compile(r"[0-9]{1,20}")  # ASCII digits, a 64-bit count at most


class CpuSample(Frozen):
    """One reading of an end's CPUs: its clock, the aggregate jiffies, and the PSI stall counter."""

    uptime: float  # seconds since boot, the end's own clock for the window
    jiffies: tuple[int, ...]  # the `cpu` line of /proc/stat, first USER_HZ_FIELDS fields
    cpus: int  # the cpuN lines: CPUs online
    stall_us: int | None  # PSI cpu `some` total (µs); None: the kernel has no /proc/pressure/cpu


class EndHealth(Frozen):
    """One end of a measurement over its window. Fractions are 0..1; None where not read."""

    node: str
    role: Literal["client", "server"]
    seconds: float | None = None  # the window, by the end's clock
    cpu_pressure: float | None = None  # share of the window runnable tasks waited for a CPU (PSI some)
    busy: float | None = None  # share of CPU time not idle
    steal: float | None = None  # share of CPU time taken by the hypervisor
    cpus: int | None = None
    tool_cpu: float | None = None  # the tool's own CPU use, % of one core (iperf3 -J)
    tool_cpu_limit: float = TOOL_CPU_LIMIT  # % of one core at which the tool is CPU-bound there
    unreadable: str | None = None  # what could not be read there, and why: not judged on it

    def saturation(self) -> str | None:
        """Why this end was saturated over the window, or None."""
        where = f"{self.role} {self.node}"
        if self.cpu_pressure is not None and self.cpu_pressure >= CPU_PRESSURE_LIMIT:
            return (f"{where}: runnable tasks waited for a CPU {_pct(self.cpu_pressure)} of the window "
                    f"(limit {_pct(CPU_PRESSURE_LIMIT)})")
        if self.busy is not None and self.cpus and (1 - self.busy) * self.cpus < idle_floor(self.cpus):
            return (f"{where}: its CPUs were busy {_pct(self.busy)} of the window (under "
                    f"{idle_floor(self.cpus):g} CPU idle on average)")
        if self.steal is not None and self.steal >= STEAL_LIMIT:
            return f"{where}: the hypervisor stole {_pct(self.steal)} of its CPU time (limit {_pct(STEAL_LIMIT)})"
        if self.tool_cpu is not None and self.tool_cpu >= self.tool_cpu_limit:
            return (f"{where}: the tool used {self.tool_cpu:.0f} % of a core (limit {self.tool_cpu_limit:.0f} %: "
                    "CPU-bound)")
        return None


def idle_floor(cpus: int) -> float:
    """CPUs that must stay idle on average for an end not to count as saturated."""
    return min(IDLE_CPUS_FLOOR, IDLE_SHARE_FLOOR * cpus)


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.0f} %"


def parse_cpu_sample(text: str) -> CpuSample:
    """`cat /proc/uptime /proc/stat /proc/pressure/cpu` as printed (the PSI file may be absent)."""
    uptime, jiffies, cpus, stall = None, None, 0, None
    for line in text.splitlines():
        fields = line.split()
        if match := UPTIME.match(line.strip()):
            uptime = float(match.group(1))
        elif fields[:1] == ["cpu"]:
            jiffies = _jiffies(fields[1:])
        elif fields and re.fullmatch(r"cpu[0-9]+", fields[0]):
            cpus += 1
        elif match := PSI_SOME.match(line.strip()):
            stall = int(match.group(1))
    if uptime is None or jiffies is None:
        raise ParseError(TOOL, 1, "no /proc/uptime line" if uptime is None else "no cpu line from /proc/stat")
    return CpuSample(uptime=uptime, jiffies=jiffies, cpus=max(cpus, 1), stall_us=stall)


def _jiffies(fields: list[str]) -> tuple[int, ...]:
    if len(fields) < USER_HZ_FIELDS or not all(JIFFIES.fullmatch(f) for f in fields[:USER_HZ_FIELDS]):
        raise ParseError(TOOL, 1, "the cpu line of /proc/stat has fewer than 8 counters")
    return tuple(int(f) for f in fields[:USER_HZ_FIELDS])


def window_health(node: str, role: Literal["client", "server"], before: CpuSample, after: CpuSample) -> EndHealth:
    """The end over the window between two samples; a counter that went backwards (a reboot, or
    samples swapped) is not a window and reads as unreadable."""
    seconds = after.uptime - before.uptime
    spent = [b - a for a, b in zip(before.jiffies, after.jiffies, strict=True)]
    total = sum(spent)
    if seconds <= 0 or total <= 0 or min(spent) < 0:
        return EndHealth(node=node, role=role, unreadable="the /proc counters did not advance")
    pressure = None
    if before.stall_us is not None and after.stall_us is not None:
        pressure = _fraction((after.stall_us - before.stall_us) / 1e6 / seconds)
    return EndHealth(node=node, role=role, seconds=round(seconds, 2), cpu_pressure=pressure,
                     busy=_fraction((total - spent[IDLE] - spent[IOWAIT]) / total),
                     steal=_fraction(spent[STEAL] / total), cpus=after.cpus,
                     unreadable=None if pressure is not None else "no /proc/pressure/cpu (a kernel without PSI): "
                                                                  "CPU pressure not judged")


def _fraction(value: float) -> float:
    return round(min(1.0, max(0.0, value)), 3)


def end_health(node: str, role: Literal["client", "server"], before: str | None, after: str | None) -> EndHealth:
    """An end from the two raw samples as read there (None: the read itself failed)."""
    if before is None or after is None:
        return EndHealth(node=node, role=role, unreadable=f"could not read /proc on {node}")
    try:
        return window_health(node, role, parse_cpu_sample(before), parse_cpu_sample(after))
    except ParseError as exc:
        return EndHealth(node=node, role=role, unreadable=str(exc))


def with_tool_cpu(end: EndHealth, percent: float | None, version: str | None, streams: int) -> EndHealth:
    """The end with the tool's own CPU figure for it and the bound that figure is judged by."""
    if percent is None:
        return end
    return end.model_copy(update={"tool_cpu": round(percent, 1),
                                  "tool_cpu_limit": tool_cpu_limit(version, streams, end.cpus)})


def saturated(ends: tuple[EndHealth, ...]) -> str | None:
    """Why the measurement cannot judge the link (each saturated end), or None."""
    reasons = [r for end in ends if (r := end.saturation())]
    return "; ".join(reasons) or None


def tool_cpu_limit(version: str | None, streams: int, cpus: int | None) -> float:
    """% of one core at which iperf3 is CPU-bound: one core before 3.16, one per stream thread
    (at most the end's CPUs) from 3.16."""
    numbers = re.findall(r"\d+", version or "")
    threaded = len(numbers) >= 2 and (int(numbers[0]), int(numbers[1])) >= (3, 16)
    return TOOL_CPU_LIMIT * (max(1, min(streams, cpus or streams)) if threaded else 1)


def verdict(value: float | None, expected: float, ends: tuple[EndHealth, ...],
            path: str | None = None) -> tuple[str, str | None]:
    """A pair's status and its reason: failed without a value; ok at BELOW_EXPECTED of what the
    Plan says or more, with no slow `path` (expected.slow_path), even where an end was saturated:
    a loaded host can only lower a measurement, so one at the expected rate judges the link all
    the same (the load is said). Short of that, inconclusive when an end was saturated (the host
    may have set it: the end and its figure said), else low."""
    reason = saturated(ends)
    if value is None:
        return "failed", reason
    short = value < BELOW_EXPECTED * expected
    if not short and path is None:
        return "ok", f"at the expected rate although {reason}" if reason else None
    if reason:
        shown = f"{100 * value / expected:.0f} % of expected" if expected > 0 else "measured"
        return "inconclusive", f"{reason} ({shown}{'' if short else f'; {path}'}: the host may have set it)"
    caveat = unknown_health(ends)
    why = None if short else path
    return "low", "; ".join(r for r in (why, caveat) if r) or None


def unknown_health(ends: tuple[EndHealth, ...]) -> str | None:
    """A low pair's caveat where an end's health could not be read: the host is not ruled out."""
    unread = [f"{end.node}: {end.unreadable}" for end in ends if end.unreadable]
    return f"end health not read, the host not ruled out ({'; '.join(unread)})" if unread else None
