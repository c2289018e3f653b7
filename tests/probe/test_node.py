"""probe_node's timing: the configuration reads and doctor's quiet peer probes run during the
sampling interval, not after it (doctor --peers costs little more than its interval)."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpunet.probe.node import probe_node

RECORDED = Path(__file__).parent.parent / "fixtures" / "sysfs" / "veth-pair"


class Recorder:
    """A command runner that notes whether `ip` (addresses, routes) was run, answering nothing."""

    def __init__(self) -> None:
        self.ip_ran = threading.Event()

    def __call__(self, argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
                 timeout: float = 120) -> subprocess.CompletedProcess[str]:
        if argv[0] == "ip":
            self.ip_ran.set()
        return subprocess.CompletedProcess(list(argv), 1, "", "not here")


def test_configuration_reads_and_the_quiet_probes_overlap_the_interval() -> None:
    """The interval cannot end until the probes and the configuration reads have run: run after
    it, as they were, they would never start and the fake interval would give up."""
    runner, probes_ran, waited = Recorder(), threading.Event(), []

    def interval(seconds: float) -> None:
        waited.append(probes_ran.wait(5) and runner.ip_ran.wait(5))

    state = probe_node(runner, RECORDED, interval=1.0, clock=interval, meanwhile=probes_ran.set)
    assert waited == [True]
    assert state.interval_s == 1.0 and state.interfaces


def test_an_exception_in_the_probes_is_not_lost() -> None:
    def broken() -> None:
        raise RuntimeError("probe crashed")

    with pytest.raises(RuntimeError, match="probe crashed"):
        probe_node(Recorder(), RECORDED, interval=0, meanwhile=broken)
