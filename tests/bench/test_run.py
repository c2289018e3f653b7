"""Rounds and the retry round of inconclusive pairs, with the measurement injected (the lab tests
measure for real): what replaces what, one pair at a time, and the progress said meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from gpunet.bench.run import BenchSetup, run_rounds
from gpunet.bench.schedule import Pair
from gpunet.bench.store import Measurement
from tests.lab.helpers import small_plan

SATURATED = "server {}: runnable tasks waited for a CPU 90 % of the window (limit 50 %)"


def setup(retries: int) -> BenchSetup:
    return BenchSetup(plan=small_plan(), on_node=lambda node, command: list(command), retries=retries)


class Scripted:
    """Each pair's statuses attempt by attempt (ok when not scripted); counts retries running at once."""

    def __init__(self, script: dict[Pair, Sequence[str]]) -> None:
        self.script, self.calls = script, list[tuple[Pair, int]]()
        self.running = self.most_retries_at_once = 0
        self.lock = threading.Lock()

    def __call__(self, bench: BenchSetup, pair: Pair, attempt: int) -> Measurement:
        with self.lock:
            self.calls.append((pair, attempt))
            self.running += 1
            if attempt > 1:
                self.most_retries_at_once = max(self.most_retries_at_once, self.running)
        status = self.script.get(pair, ["ok"] * 9)[attempt - 1]
        with self.lock:
            self.running -= 1
        return Measurement(source=pair[0], destination=pair[1], plane="compute", metric="throughput",
                           value=9.0 + attempt / 10, unit="Gb/s", expected=10.0, status=status, attempts=attempt,
                           reason=SATURATED.format(pair[1]) if status == "inconclusive" else None)


ROUNDS = [[("gpu1", "gpu2"), ("gpu3", "gpu4")], [("gpu1", "gpu3"), ("gpu2", "gpu4")]]


def test_inconclusive_pairs_are_measured_again_one_at_a_time_and_replaced_only_when_conclusive() -> None:
    measure = Scripted({("gpu1", "gpu2"): ["inconclusive", "ok"], ("gpu3", "gpu4"): ["inconclusive"] * 2,
                        ("gpu2", "gpu4"): ["inconclusive", "low"]})
    said: list[str] = []
    stored: list[list[Measurement]] = []
    results = run_rounds(setup(retries=1), ROUNDS, progress=lambda done, total, what: said.append(what),
                         on_round=stored.append, measure=measure)
    assert [(m.source, m.destination, m.status, m.attempts) for m in results] == [
        ("gpu1", "gpu2", "ok", 2), ("gpu3", "gpu4", "inconclusive", 2), ("gpu1", "gpu3", "ok", 1),
        ("gpu2", "gpu4", "low", 2)]
    assert results[0].value == 9.2 and results[1].value == 9.1  # the retry's value, the earlier one kept
    assert results[1].reason == f"{SATURATED.format('gpu4')}; again on attempt 2: {SATURATED.format('gpu4')}"
    assert said == ["round 1/2: 2 pairs", "round 2/2: 2 pairs", "2 rounds measured", "retry 1/3: gpu1 -> gpu2",
                    "retry 2/3: gpu3 -> gpu4", "retry 3/3: gpu2 -> gpu4"]
    assert [len(ms) for ms in stored] == [2, 2, 1, 1, 1] and stored[2] == [results[0]]
    assert measure.most_retries_at_once == 1


def test_retry_rounds_as_many_as_asked() -> None:
    script = {("gpu1", "gpu2"): ["inconclusive"] * 2 + ["ok"]}
    never = run_rounds(setup(retries=0), ROUNDS, measure=Scripted(script))
    assert (never[0].status, never[0].attempts) == ("inconclusive", 1)
    twice = Scripted(script)
    results = run_rounds(setup(retries=2), ROUNDS, measure=twice)
    assert (results[0].status, results[0].attempts, results[0].value) == ("ok", 3, 9.3)
    assert [call for call in twice.calls if call[1] > 1] == [(("gpu1", "gpu2"), 2), (("gpu1", "gpu2"), 3)]

