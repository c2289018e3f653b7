"""The adversarial review's lab items (issue 11, items 3, 7, 9 and 11), on a real lab (root)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunet.errors import LabError
from gpunet.lab.netns import ip_batch
from gpunet.lab.state import LabState
from tests.lab.helpers import SMALL, leftovers
from tests.labs import lab_id
from tests.zygote import run_gpunet

NAN_LAB, BARE_LAB = lab_id("zn"), lab_id("zs")

LAB = lab_id("zh")


def gpunet(*args: str) -> subprocess.CompletedProcess[str]:
    return run_gpunet(list(args))


def test_a_batch_line_with_a_line_break_stops_the_batch() -> None:
    """Item 3: a name with a newline would add its own `ip` command (pure: a fake runner)."""
    ran: list[str] = []

    def fake(argv: object, *, stdin: str | None = None, check: bool = True,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
        ran.append(stdin or "")
        return subprocess.CompletedProcess([], 0, "", "")

    with pytest.raises(LabError, match="line break"):
        ip_batch(fake, ["link set lo up", "link set dev sw1\nlink add gnevil type dummy up"])
    assert ran == []


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    up = gpunet("lab", "up", str(SMALL), "--lab", LAB, "--json")
    assert up.returncode == 0, up.stderr
    yield LabState.model_validate_json(up.stdout)
    down = gpunet("lab", "down", "--lab", LAB)
    assert down.returncode == 0 and leftovers(LAB) == [], down.stderr


def _faults() -> list[dict[str, str]]:
    faults: list[dict[str, str]] = json.loads(gpunet("lab", "status", "--lab", LAB, "--json").stdout)["faults"]
    return faults


@pytest.mark.lab
@pytest.mark.parametrize(("option", "value", "needle"), [
    ("--mtu", "99999999", "a whole number from 68 to 65535"),
    ("--rate", "0mbit", "a rate above 0"),
    ("--loss", "nan", "a percentage above 0"),
])
def test_11_an_impossible_fault_is_refused_and_never_listed(lab: LabState, option: str, value: str,
                                                             needle: str) -> None:
    done = gpunet("lab", "fault", "gpu4:ens1", option, value, "--lab", LAB)
    assert done.returncode == 2 and needle in done.stderr and "Usage: tc" not in done.stderr, done.stderr
    assert _faults() == []


@pytest.mark.lab
def test_11_a_fault_the_kernel_refuses_is_not_listed(lab: LabState) -> None:
    delay = gpunet("lab", "fault", "gpu4:ens1", "--delay", "10ms", "--lab", LAB)
    if delay.returncode == 0:  # a kernel with netem: applied, listed, healed
        assert [f["kind"] for f in _faults()] == ["delay"]
        assert gpunet("lab", "heal", "--lab", LAB).returncode == 0
    else:
        # the kernel lacks netem: gpunet could not do it (3), not a finding and not bad input
        assert delay.returncode == 3 and "netem" in delay.stderr and "not applied" in delay.stderr, delay.stderr
    assert _faults() == []
    mtu = gpunet("lab", "fault", "gpu4:ens1", "--mtu", "1400", "--lab", LAB)  # a real one still works
    assert mtu.returncode == 0 and [f["kind"] for f in _faults()] == ["mtu"]
    assert gpunet("lab", "heal", "--lab", LAB).returncode == 0 and _faults() == []


@pytest.mark.lab
def test_7_a_scale_of_nan_leaves_nothing_to_clean(tmp_path: Path) -> None:
    done = gpunet("lab", "up", str(SMALL), "--lab", NAN_LAB, "--scale", "nan")
    assert done.returncode == 2 and "--scale nan" in done.stderr
    assert leftovers(NAN_LAB) == []


@pytest.mark.lab
def test_9_a_plan_without_switches_is_a_message(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    assert gpunet("plan", str(SMALL), "-o", str(out)).returncode == 0
    data = json.loads((out / "plan.json").read_text())
    data["switches"], data["links"] = [], []
    (tmp_path / "bare.json").write_text(json.dumps(data))
    done = gpunet("lab", "up", str(tmp_path / "bare.json"), "--lab", BARE_LAB)
    # a plan no lab can be built of is bad input for `lab up` (2): the message says what to change
    assert done.returncode == 2 and "has none (direct cables)" in done.stderr and "Traceback" not in done.stderr
    assert leftovers(BARE_LAB) == []
