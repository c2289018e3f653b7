"""`lab up` returns a lab ready to be judged (root; `lab` and `slow` markers): ten fresh labs of the
default example's 8 servers, built while two busy loops take both cores of a small host, each
judged by `gpunet doctor --peers` on one of its servers the moment `lab up` returns. Every run
must be clean: a fail there is a lab that was called ready too early (or a lab that breaks its own
probes), never a finding about the plan."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpunet.design import design
from gpunet.lab.build import LAB_PLAN, lab_down, lab_up
from gpunet.lab.state import LabState, lab_dir
from gpunet.model.plan import Plan
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from tests.lab.helpers import leftovers, run_in
from tests.labs import lab_id

pytestmark = [pytest.mark.lab, pytest.mark.slow]
LABS = (lab_id("rd"), lab_id("rd"))  # two labs at a time: each built and judged while the other is
CYCLES = 10
BUSY_LOOPS = 2


@pytest.fixture
def busy_host() -> Iterator[None]:
    """Two `while True: pass` processes for the whole test, killed by their PIDs after it."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(BUSY_LOOPS)]
    try:
        yield
    finally:
        for loop in loops:
            os.kill(loop.pid, signal.SIGKILL)
            loop.wait(timeout=10)


def default_eight() -> Plan:
    return design(parse_spec(example_text("scalable-unit"))[0])


def doctor_fails(lab: str, server: str) -> tuple[float, list[str]]:
    """`gpunet doctor --peers` in a lab server against the lab's plan: its fail findings, named."""
    started = time.monotonic()
    done = run_in(lab, server, sys.executable, "-m", "gpunet", "doctor", "--plan", str(lab_dir(lab) / LAB_PLAN),
                  "--peers", "--json", timeout=300)
    took = time.monotonic() - started
    try:
        findings = json.loads(done.stdout)["findings"]
    except (ValueError, KeyError):
        return took, [f"doctor exited {done.returncode} without a report: {done.stderr[-300:]}"]
    return took, [f"{f['check']} {f['subject']}: {f['observed'][:80]}" for f in findings if f["verdict"] == "fail"]


def check_readiness(state: LabState) -> None:
    assert state.readiness is not None
    expected = {"addresses", "sshd", "routes"} | ({"lldp"} if state.lldp else set()) | (
        {"bgp"} if state.routing == "frr" else set())
    assert set(state.readiness.conditions) == expected
    assert all(t.checked > 0 and t.ready_s <= state.readiness.ready_s for t in state.readiness.conditions.values())


def one_cycle(plan: Plan, cycle: int) -> tuple[bool, str]:
    """A fresh lab up, judged by doctor on one of its servers the moment up returns, then down."""
    lab = LABS[cycle % len(LABS)]
    started = time.monotonic()
    try:
        # every other lab routed by FRR (where installed): both routings must be judged-ready at once;
        # every third with lldpd started by `lab up` (--lldp), its wait for LLDP part of being ready
        state = lab_up(plan, lab, max_nodes=8, routing=None if cycle % 2 else "static", lldp=cycle % 3 == 0)
        up_s = time.monotonic() - started
        check_readiness(state)
        servers = sorted(state.servers)
        server = servers[cycle % len(servers)]
        took, fails = doctor_fails(lab, server)
    finally:
        lab_down(lab)
    assert state.readiness is not None
    return not fails, (f"run {cycle + 1:2}: {'clean' if not fails else 'FAIL '} doctor --peers on "
                       f"{server} ({took:.1f} s) after lab up ({state.routing}) {up_s:.1f} s (ready "
                       f"{state.readiness.ready_s:.2f} s after building {state.readiness.built_s:.2f} s)"
                       + "".join(f"\n        {f}" for f in fails[:5]))


def test_doctor_right_after_up_is_clean_in_every_one_of_ten_fresh_labs(busy_host: None) -> None:
    """Two labs at a time (each lab has its own lock: one is built while the other is judged), five
    fresh labs each, alternating routings."""
    plan = default_eight()
    with ThreadPoolExecutor(len(LABS)) as pool:
        streams = [pool.submit(lambda first: [one_cycle(plan, c) for c in range(first, CYCLES, len(LABS))], first)
                   for first in range(len(LABS))]
        outcomes = [outcome for stream in streams for outcome in stream.result()]
    clean = sum(ok for ok, _ in outcomes)
    print("\n" + "\n".join(line for _, line in outcomes) + f"\nclean in {clean} of {CYCLES} runs")  # shown with -s
    assert clean == CYCLES, "\n".join(line for ok, line in outcomes if not ok)
    assert all(leftovers(lab) == [] for lab in LABS)
