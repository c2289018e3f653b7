"""Labs for tests (DESIGN.md #12): ids allocated like tmp_path, and one lab per shape shared by
every test of a pytest process that asks for that shape, healed between tests.

* `lab_id(hint)` gives an id that no other test process on this machine holds (parallel workers,
  a second developer's run): the hint and two more characters, reserved by a file that names this
  process until it exits. A reservation whose process is gone is taken over.
* `SharedLabs.get(shape)` builds the shape's lab in this process (a pytest-xdist worker) and hands
  the same lab to every module that asks, one shape at a time (asking for another takes it down:
  five workers keeping three each would hold most of the machine's 16 lab slots); `healed` undoes
  the faults a test left. Tests that change a lab in ways heal cannot undo (apply, lab up/down
  themselves) keep a lab of their own.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpunet.lab.build import lab_down, lab_up
from gpunet.lab.faults import heal
from gpunet.lab.state import LAB_PLAN, LabState, Routing, lab_dir, labs_root, read_state
from gpunet.model.io import read_plan
from gpunet.model.plan import Plan

RESERVATIONS = ".test-ids"
ALPHABET = string.ascii_lowercase + string.digits
_held: list[Path] = []


def lab_id(hint: str) -> str:
    """A lab id unique on this machine while this process lives: `hint` (1-2 lowercase letters or
    digits) followed by two characters. Without root (lab tests skip) the hint and "00"."""
    if len(hint) > 2 or not hint.isalnum():
        raise ValueError(f"lab id hint {hint!r}: 1-2 letters or digits")
    folder = labs_root() / RESERVATIONS
    if os.geteuid() != 0:  # the labs' root is root's (a root run may have made it): nothing to reserve
        return f"{hint}00"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return f"{hint}00"
    for a, b in itertools.product(ALPHABET, repeat=2):
        candidate = f"{hint}{a}{b}"
        if not _reserve(folder / candidate):
            continue  # another process's, or one this process already handed out: never released here
        if not (labs_root() / candidate).exists():
            return candidate
        _release(folder / candidate)
    raise RuntimeError(f"no free lab id with hint {hint!r} under {folder}")


def _reserve(path: Path) -> bool:
    """Take the reservation file, or a stale one (its process gone)."""
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            if not _stale(path):
                return False
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(str(os.getpid()))
        _held.append(path)
        return True
    return False


def _stale(path: Path) -> bool:
    try:
        pid = int(path.read_text() or "0")
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError, FileNotFoundError):
        return True
    except PermissionError:
        return False
    return False


def _release(path: Path) -> None:
    if path in _held:
        _held.remove(path)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@atexit.register
def _release_all() -> None:
    for path in list(_held):
        _release(path)


@dataclass(frozen=True)
class Shape:
    """What a shared lab is built from: a plan, how many servers of it, the shaping scale, and its
    routing (None: FRR where it is installed, as `lab up`; "static" for a faster build)."""

    plan: Callable[[], Plan]
    max_nodes: int = 16
    scale: float = 1.0
    routing: Routing | None = None


_shape_ids: dict[str, str] = {}


def shared_lab_id(shape: str) -> str:
    """The id this process's lab of `shape` has (or will have): one id per shape per process, so a
    module can name its lab at import and share it with every other module of the same shape."""
    if shape not in _shape_ids:
        _shape_ids[shape] = lab_id(shape[:2])
    return _shape_ids[shape]


@dataclass
class SharedLabs:
    """This process's shared lab: one shape at a time, built on first use, taken down when another
    shape is asked for and at the end."""

    shapes: dict[str, Shape]
    up: dict[str, LabState] = field(default_factory=dict)

    def get(self, shape: str) -> LabState:
        """This process's lab of `shape`, the others taken down first: modules run one after another
        in a worker, and a lab kept for a module that may never come would hold one of the machine's
        16 lab slots while five workers build theirs."""
        if shape not in self.up:
            self.close()
            wanted = self.shapes[shape]
            self.up[shape] = lab_up(wanted.plan(), shared_lab_id(shape), max_nodes=wanted.max_nodes,
                                    scale=wanted.scale, routing=wanted.routing)
        return self.up[shape]

    def heal_all(self) -> None:
        """Undo the faults a test left on any shared lab: the next test starts from the plan."""
        for state in self.up.values():
            current = read_state(state.lab_id)
            if current is not None and current.faults:
                heal(state.lab_id, None)

    def close(self) -> None:
        for state in self.up.values():
            lab_down(state.lab_id)
        self.up.clear()


def shared_lab(shape: str) -> Callable[..., LabState]:
    """A module's `lab` fixture: this process's lab of `shape`, healed after every test (conftest)."""

    @pytest.fixture(scope="module")
    def lab(shared_labs: SharedLabs) -> LabState:
        return shared_labs.get(shape)

    return lab


def shared_lab_plan() -> Callable[..., Plan]:
    """A module's `plan` fixture: the plan its `lab` runs, in the lab's own addresses."""

    @pytest.fixture(scope="module")
    def plan(lab: LabState) -> Plan:
        return read_plan(lab_dir(lab.lab_id) / LAB_PLAN)

    return plan
