"""A large saved ibnetdiscover file is parsed in a Python process of its own while the plan is read
(fabric/collect.ib_file_reader, fabric/saved_ibnetdiscover): the same topology and the same
refusals as the inline reader, and no process left behind, whichever way the caller leaves or its
child ends. BACKGROUND_FROM_BYTES is set to 0 here so that the recorded fixtures take the path a
1M-GPU fabric's 256 MB file takes."""

from __future__ import annotations

import marshal
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunet.errors import PlanError, UsageError
from gpunet.fabric import collect, saved_ibnetdiscover

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ibnetdiscover"
RECORDED = sorted(FIXTURES.glob("*/output.txt"))
SRC = Path(collect.__file__).resolve().parents[2]
PIPE_HOLDS = 64 << 10  # Linux's default pipe capacity


@pytest.fixture
def always_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect, "BACKGROUND_FROM_BYTES", 0)


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Every child ib_file_reader starts, kept to look at (the same Popen)."""
    started: list[subprocess.Popen[bytes]] = []
    popen = subprocess.Popen

    def keep(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        child: subprocess.Popen[bytes] = popen(*args, **kwargs)  # type: ignore[call-overload]
        started.append(child)
        return child

    monkeypatch.setattr(collect.subprocess, "Popen", keep)
    yield started


def test_a_small_file_is_read_here_when_asked(children: list[subprocess.Popen[bytes]]) -> None:
    with collect.ib_file_reader(RECORDED[0]) as topology:
        assert topology() == collect.ib_from_file(RECORDED[0])
    assert children == []


@pytest.mark.parametrize("path", RECORDED, ids=[p.parent.name for p in RECORDED])
@pytest.mark.usefixtures("always_apart")
def test_the_child_gives_the_topology_the_inline_reader_gives(path: Path,
                                                              children: list[subprocess.Popen[bytes]]) -> None:
    with collect.ib_file_reader(path) as topology:
        assert topology() == collect.ib_from_file(path)
    (child,) = children
    assert child.returncode == 0


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
def test_a_path_that_is_no_regular_file_is_refused_here_in_the_readers_words(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError) as inline:
        collect.ib_from_file(fifo)
    with collect.ib_file_reader(fifo) as topology, pytest.raises(UsageError) as apart:
        topology()
    assert str(apart.value) == str(inline.value)


@pytest.mark.usefixtures("always_apart")
def test_the_child_is_ended_when_the_plan_read_fails(children: list[subprocess.Popen[bytes]]) -> None:
    with pytest.raises(PlanError), collect.ib_file_reader(RECORDED[0]):
        raise PlanError("plan.json: not a valid plan")
    (child,) = children
    assert child.returncode is not None  # waited for: no zombie, no process left


@pytest.mark.usefixtures("always_apart")
def test_a_child_that_dies_is_an_error_not_a_hang(children: list[subprocess.Popen[bytes]]) -> None:
    with collect.ib_file_reader(RECORDED[0]) as topology:
        (child,) = children
        os.kill(child.pid, signal.SIGKILL)  # before its interpreter has started: it cannot have answered
        with pytest.raises(UsageError, match=r"ended without an answer \(exit -9\)"):
            topology()


@pytest.mark.usefixtures("always_apart")
def test_a_callers_script_is_not_run_again_in_the_child(tmp_path: Path) -> None:
    """A library caller's script without a __main__ guard, run once: its top-level code runs once."""
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent(f"""
        from pathlib import Path
        from gpunet.fabric import collect
        collect.BACKGROUND_FROM_BYTES = 0
        print("top level")
        with collect.ib_file_reader(Path({str(RECORDED[0])!r})) as topology:
            print(len(topology().links))
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False,
                          env=os.environ | {"PYTHONPATH": str(SRC)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("top level") == 1
    assert int(done.stdout.split()[-1]) == len(collect.ib_from_file(RECORDED[0]).links)


def test_the_child_ends_itself_when_its_parent_is_gone() -> None:
    """The pipe only its parent holds the other end of at end of file: it stops at once with
    ORPHANED, even with its answer not yet taken (larger than a pipe holds: nobody reads it here,
    so the child could only end by its own watch)."""
    largest = FIXTURES / "topograph-dgx-h100-ndr-full-fabric" / "output.txt"
    rows = saved_ibnetdiscover.saved_rows(largest)
    assert len(marshal.dumps(("rows", rows.nodes, rows.links))) > PIPE_HOLDS
    parent_alive, held = os.pipe()
    with subprocess.Popen([sys.executable, "-c", collect.CHILD, str(SRC), str(parent_alive), str(largest)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(parent_alive,)) as child:
        os.close(parent_alive)
        os.close(held)  # as this process's death closes it
        assert child.wait(timeout=120) == saved_ibnetdiscover.ORPHANED
