"""A lab's state file is read back as untrusted input: a tampered one never makes `lab down`,
`fault` or `heal` touch what the lab did not create (pure: no namespaces are built)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpunet.cli.main import app
from gpunet.errors import LabError
from gpunet.lab import faults
from gpunet.lab.blueprint import build_blueprint
from gpunet.lab.build import _state
from gpunet.lab.state import Fault, free_slot, read_state, write_state
from tests.lab.helpers import small_plan

LAB = "q"


@pytest.fixture
def state_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUNET_LAB_ROOT", str(tmp_path))
    write_state(_state(build_blueprint(small_plan(), LAB, 0), 0, "digest", 1.0, "up", lldp=False))
    return tmp_path / LAB / "state.json"


def tamper(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_written_state_reads_back(state_file: Path) -> None:
    state = read_state(LAB)
    assert state is not None and state.host_if == "gnqh" and len(state.servers) == 8


@pytest.mark.parametrize(("change", "needle"), [
    (lambda d: d["routes"].__setitem__("gnq-gpu1", ["netns exec gnq-gpu1 touch /tmp/PWNED dev ens1"]), "routes"),
    (lambda d: d.__setitem__("host_if", "eth0"), "'eth0'"),
    (lambda d: d.__setitem__("lab_id", "b"), "'b'"),
    (lambda d: d["namespaces"].__setitem__("gnb-gpu1", "server"), "'gnb-gpu1'"),
    (lambda d: d["notes"].append("[/bold] x\x1b]8;;http://x\x07"), "notes"),
    (lambda d: d["faults"].append({"cable": "a b", "kind": "delay", "value": "--help\nx"}), "value"),
])
def test_a_tampered_state_is_refused_where_it_is_read(state_file: Path, change: Any, needle: str) -> None:
    tamper(state_file, change)
    with pytest.raises(LabError, match=r"unreadable|not lab q's") as caught:
        read_state(LAB)
    assert needle in str(caught.value)


def test_a_state_file_that_is_a_directory(state_file: Path) -> None:
    state_file.unlink()
    state_file.mkdir()
    result = CliRunner().invoke(app, ["lab", "status", "--lab", LAB])
    # gpunet cannot read its own lab: it could not run (3), not a finding, not bad input
    assert result.exit_code == 3 and "unreadable" in result.output and result.exception.__class__ is SystemExit


def test_a_fault_on_no_cable_of_the_lab_is_healed_by_dropping_it(state_file: Path) -> None:
    state = read_state(LAB)
    assert state is not None
    write_state(state.model_copy(update={"faults": (Fault(cable="ghost:x other:1", kind="down"),)}))
    ran: list[Sequence[str]] = []

    def fake(argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    assert [f.cable for f in faults.heal(LAB, run=fake)] == ["ghost:x other:1"]
    assert ran == [] and read_state(LAB).faults == ()  # type: ignore[union-attr]


@pytest.mark.parametrize("value", ["--help\nx y", "10", "5 ms", "1e3ms", ""])
def test_a_delay_that_tc_would_not_read_is_refused(value: str) -> None:
    with pytest.raises(LabError, match="--delay"):
        faults.check_fault_value("delay", value)


def test_a_lab_another_version_built_keeps_its_address_block(state_file: Path) -> None:
    """A state with a field this gpunet does not know (a newer version's lab) cannot be acted on, but
    its slot is still read, so a new lab never takes the addresses it holds; a state without a
    readable slot stops the new lab instead of guessing."""
    tamper(state_file, lambda d: d.__setitem__("a_later_versions_field", 1))
    with pytest.raises(LabError, match="unreadable"):
        read_state(LAB)
    assert free_slot("n") == 1 and free_slot(LAB) == 0
    tamper(state_file, lambda d: d.__setitem__("slot", "x"))
    with pytest.raises(LabError, match=f"cannot tell which addresses lab {LAB} holds"):
        free_slot("n")
