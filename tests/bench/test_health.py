"""An end's CPU health over a measurement's window, from two recorded /proc samples
(tests/fixtures/proc_cpu/<case>/{before,after}.txt, expected.json), and the verdict a saturated
end gives a pair."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpunet.bench.expected import slow_path
from gpunet.bench.health import (
    CPU_PRESSURE_LIMIT,
    STEAL_LIMIT,
    EndHealth,
    end_health,
    idle_floor,
    parse_cpu_sample,
    saturated,
    tool_cpu_limit,
    verdict,
    window_health,
    with_tool_cpu,
)
from gpunet.bench.iperf3 import parse_iperf3_json
from gpunet.errors import ParseError

FIXTURES = Path(__file__).parent.parent / "fixtures"
CASES = sorted(p.name for p in (FIXTURES / "proc_cpu").iterdir() if p.is_dir())


def sample(case: str, which: str) -> str:
    return (FIXTURES / "proc_cpu" / case / f"{which}.txt").read_text()


@pytest.mark.parametrize("case", CASES)
def test_health_from_two_recorded_samples(case: str) -> None:
    got = end_health("gpu3", "server", sample(case, "before"), sample(case, "after"))
    assert got.model_dump(mode="json") == json.loads((FIXTURES / "proc_cpu" / case / "expected.json").read_text())


def test_three_burners_on_two_cpus_saturate_the_end_and_a_quiet_window_does_not() -> None:
    busy = end_health("gpu3", "server", sample("busy", "before"), sample("busy", "after"))
    quiet = end_health("gpu3", "server", sample("quiet", "before"), sample("quiet", "after"))
    # By hand from the recorded counters: PSI some 1 064 970 µs over 2.01 s; 401 of 402 jiffies busy.
    assert busy.cpu_pressure == pytest.approx(1.06497 / 2.01, abs=1e-3) and busy.busy == pytest.approx(401 / 402,
                                                                                                      abs=1e-3)
    assert busy.saturation() == "server gpu3: runnable tasks waited for a CPU 53 % of the window (limit 50 %)"
    assert quiet.cpu_pressure is not None and quiet.cpu_pressure < CPU_PRESSURE_LIMIT and quiet.saturation() is None


def test_without_psi_the_end_says_so_and_is_not_judged_on_pressure() -> None:
    end = end_health("gpu3", "client", sample("no_psi", "before"), sample("no_psi", "after"))
    assert end.cpu_pressure is None and end.busy is not None and end.steal == 0.0
    assert end.unreadable is not None and "no /proc/pressure/cpu" in end.unreadable
    assert end.saturation() is None


def test_a_sample_that_could_not_be_read_or_parsed_is_unreadable_not_a_guess() -> None:
    missing = end_health("gpu3", "client", None, sample("quiet", "after"))
    assert missing.unreadable == "could not read /proc on gpu3" and missing.cpu_pressure is None
    garbage = end_health("gpu3", "client", "ssh: connect to host gpu3 port 22: Connection refused\n",
                         sample("quiet", "after"))
    assert garbage.unreadable is not None and "no /proc/uptime line" in garbage.unreadable
    backwards = window_health("gpu3", "client", parse_cpu_sample(sample("quiet", "after")),
                              parse_cpu_sample(sample("quiet", "before")))
    assert backwards.unreadable == "the /proc counters did not advance" and backwards.busy is None


def test_steal_past_its_limit_saturates() -> None:
    before = parse_cpu_sample("100.00 150.00\ncpu  1000 0 100 5000 0 0 0 0 0 0\ncpu0 1000 0 100 5000 0 0 0 0 0 0\n")
    after = parse_cpu_sample("101.00 150.50\ncpu  1050 0 110 5020 0 0 0 20 0 0\ncpu0 1050 0 110 5020 0 0 0 20 0 0\n")
    end = window_health("vm1", "client", before, after)
    assert end.steal == pytest.approx(20 / 100) and end.steal >= STEAL_LIMIT and end.cpus == 1
    assert end.saturation() == "client vm1: the hypervisor stole 20 % of its CPU time (limit 10 %)"


def test_an_end_without_an_idle_cpu_is_saturated_even_with_nothing_queued() -> None:
    """One CPU-bound task a CPU: PSI stays low (only the work the tool displaces waits), the CPUs
    never idle. The floor is one idle CPU on average, 5 % of the CPUs below 20."""
    burners = EndHealth(node="gpu3", role="server", seconds=2.0, cpu_pressure=0.08, busy=0.999, steal=0.0, cpus=2)
    assert burners.saturation() == "server gpu3: its CPUs were busy 100 % of the window (under 0.1 CPU idle on average)"
    assert idle_floor(2) == 0.1 and idle_floor(8) == 0.4 and idle_floor(128) == 1.0
    big = burners.model_copy(update={"cpus": 128, "busy": 0.95})  # 6.4 CPUs idle on average: room for the tool
    assert big.saturation() is None and big.model_copy(update={"busy": 0.995}).saturation() is not None
    assert burners.model_copy(update={"busy": 0.94}).saturation() is None


def test_iperf3s_own_cpu_figure_marks_a_cpu_bound_end() -> None:
    """The recorded loopback run whose server used 92.8 % of its core (iperf3 3.12, one thread)."""
    result = parse_iperf3_json((FIXTURES / "iperf3_json" / "cpu_bound" / "output.txt").read_text())
    quiet = end_health("gpu2", "server", sample("quiet", "before"), sample("quiet", "after"))
    server = with_tool_cpu(quiet, result.server_cpu_percent, result.version, streams=4)
    client = with_tool_cpu(quiet.model_copy(update={"node": "gpu1", "role": "client"}), result.client_cpu_percent,
                           result.version, streams=4)
    assert server.tool_cpu == 92.8 and server.tool_cpu_limit == 90.0
    assert server.saturation() == "server gpu2: the tool used 93 % of a core (limit 90 %: CPU-bound)"
    assert client.tool_cpu == 59.1 and client.saturation() is None


def test_the_cpu_bound_limit_follows_iperf3s_threads() -> None:
    assert tool_cpu_limit("iperf 3.12", streams=32, cpus=64) == 90.0  # one thread for every stream
    assert tool_cpu_limit("iperf 3.16", streams=32, cpus=8) == 720.0  # a thread a stream, 8 CPUs to run them
    assert tool_cpu_limit("iperf 3.17.1", streams=4, cpus=64) == 360.0
    assert tool_cpu_limit(None, streams=32, cpus=None) == 90.0


def test_a_saturated_end_makes_a_short_pair_inconclusive_but_one_at_the_expected_rate_passes() -> None:
    healthy = EndHealth(node="gpu1", role="client", seconds=4.0, cpu_pressure=0.02, busy=0.2, steal=0.0)
    loaded = EndHealth(node="gpu3", role="server", seconds=4.0, cpu_pressure=0.97, busy=1.0, steal=0.0)
    saturation = "server gpu3: runnable tasks waited for a CPU 97 % of the window (limit 50 %)"
    assert verdict(60.0, 100.0, (healthy, healthy)) == ("low", None)
    assert verdict(99.0, 100.0, (healthy, healthy)) == ("ok", None)
    assert verdict(60.0, 100.0, (healthy, loaded)) == (
        "inconclusive", f"{saturation} (60 % of expected: the host may have set it)")
    # A loaded host only lowers a measurement: one at the expected rate judges the link, the load said.
    assert verdict(100.0, 100.0, (healthy, loaded)) == ("ok", f"at the expected rate although {saturation}")
    assert verdict(85.0, 100.0, (healthy, loaded))[0] == "ok"
    assert verdict(None, 100.0, (healthy, loaded)) == ("failed", saturation)  # it measured nothing: failed
    both = saturated((loaded.model_copy(update={"node": "gpu1", "role": "client"}), loaded))
    assert both is not None and both.startswith("client gpu1: ") and "; server gpu3: " in both


def test_a_slow_equal_cost_path_flags_a_pair_at_its_rate_unless_an_end_was_saturated() -> None:
    healthy = EndHealth(node="gpu1", role="client", seconds=4.0, cpu_pressure=0.02, busy=0.2, steal=0.0)
    loaded = EndHealth(node="gpu3", role="server", seconds=4.0, cpu_pressure=0.97, busy=1.0, steal=0.0)
    path = slow_path((0.4,) * 3 + (13.0,) * 29)
    assert path is not None and path.startswith("a path below the rest: 3 of 32 streams under 25 % of their mean")
    assert verdict(99.0, 100.0, (healthy, healthy), path) == ("low", path)
    status, reason = verdict(99.0, 100.0, (healthy, loaded), path)
    assert status == "inconclusive" and reason is not None and path in reason and "gpu3" in reason
    assert verdict(60.0, 100.0, (healthy, healthy), path) == ("low", None)  # short in all: the total says it


def test_streams_shared_unevenly_are_not_a_slow_path() -> None:
    """A healthy pair's slowest stream of 32 measured 0.5-0.7 of the mean in the lab; fewer than 4
    streams say nothing about paths apart."""
    assert slow_path((6.5,) * 4 + (12.9,) * 28) is None
    assert slow_path((0.1, 10.0, 10.0)) is None
    assert slow_path(()) is None


def test_unreadable_health_does_not_make_a_pair_inconclusive_but_a_low_one_says_so() -> None:
    unknown = EndHealth(node="gpu1", role="client", unreadable="could not read /proc on gpu1")
    healthy = EndHealth(node="gpu2", role="server", seconds=4.0, cpu_pressure=0.02, busy=0.2, steal=0.0)
    assert verdict(60.0, 100.0, (unknown, healthy)) == (
        "low", "end health not read, the host not ruled out (gpu1: could not read /proc on gpu1)")
    assert verdict(99.0, 100.0, (unknown, healthy)) == ("ok", None)


@pytest.mark.parametrize("text", ["", "cpu 1 2 3\n", "12.5 3.0\n", "12.5 3.0\ncpu  1 2 x 4 5 6 7 8\n"])
def test_a_sample_without_uptime_or_a_whole_cpu_line_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match=r"/proc cpu sample: line 1"):
        parse_cpu_sample(text)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(CASES), st.data())
def test_mangled_samples_raise_nothing_but_parse_error(case: str, data: st.DataObject) -> None:
    text = sample(case, "before")
    cut = data.draw(st.integers(0, len(text)))
    for variant in (text[:cut], text[:cut] + data.draw(st.text(max_size=20)) + text[cut:]):
        with contextlib.suppress(ParseError):
            parse_cpu_sample(variant)
