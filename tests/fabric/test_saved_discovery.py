"""A large saved ibnetdiscover file is parsed in a process of its own while the plan is read
(fabric/collect.ib_file_reader): the same topology and the same refusals as the inline reader, and
no process left behind, whichever way the caller leaves. BACKGROUND_FROM_BYTES is set to 0 here so
that the recorded fixtures take the path a 1M-GPU fabric's 256 MB file takes."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest

from gpunet.errors import PlanError, UsageError
from gpunet.fabric import collect

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ibnetdiscover"
RECORDED = sorted(FIXTURES.glob("*/output.txt"))


@pytest.fixture
def always_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect, "BACKGROUND_FROM_BYTES", 0)


def test_a_small_file_is_read_here_when_asked(tmp_path: Path) -> None:
    path = RECORDED[0]
    with collect.ib_file_reader(path) as topology:
        assert multiprocessing.active_children() == []
        assert topology() == collect.ib_from_file(path)


@pytest.mark.parametrize("path", RECORDED, ids=[p.parent.name for p in RECORDED])
@pytest.mark.usefixtures("always_apart")
def test_the_child_gives_the_topology_the_inline_reader_gives(path: Path) -> None:
    with collect.ib_file_reader(path) as topology:
        (child,) = multiprocessing.active_children()
        assert topology() == collect.ib_from_file(path)
    assert not child.is_alive()
    assert multiprocessing.active_children() == []


@pytest.mark.usefixtures("always_apart")
def test_a_refused_line_is_said_as_the_inline_reader_says_it(tmp_path: Path) -> None:
    bad = tmp_path / "ibnetdiscover.txt"
    bad.write_text(RECORDED[0].read_text().replace("\n[", "\n[x", 1))
    with pytest.raises(UsageError) as inline:
        collect.ib_from_file(bad)
    with collect.ib_file_reader(bad) as topology, pytest.raises(UsageError) as apart:
        topology()
    assert str(apart.value) == str(inline.value)
    assert f"{bad}: line " in str(apart.value)


@pytest.mark.usefixtures("always_apart")
def test_the_child_is_ended_when_the_plan_read_fails() -> None:
    with pytest.raises(PlanError), collect.ib_file_reader(RECORDED[0]):
        (child,) = multiprocessing.active_children()
        raise PlanError("plan.json: not a valid plan")
    assert not child.is_alive()
    assert multiprocessing.active_children() == []


@pytest.mark.usefixtures("always_apart")
def test_a_child_that_dies_is_an_error_not_a_hang() -> None:
    with collect.ib_file_reader(RECORDED[0]) as topology:
        (child,) = multiprocessing.active_children()
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)  # before its interpreter has started: it cannot have answered
        with pytest.raises(UsageError, match=r"ended without an answer \(its process exited -9\)"):
            topology()
    assert multiprocessing.active_children() == []
