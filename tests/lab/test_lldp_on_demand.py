"""lldpd in a lab only once something reads LLDP (issue 31): `lab up` starts none and says so;
the first `cabling check --lab` starts it in every server and switch and waits until every cable
end has heard its neighbour, a cable already taken down excepted (it reads as missing, at once,
not after the readiness deadline); a second check finds it running."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from gpunet.api.fabric import CablingSource, cabling_check
from gpunet.design import design
from gpunet.fabric.cabling import cable_name
from gpunet.lab.build import lab_down, lab_up
from gpunet.lab.faults import apply_fault
from gpunet.lab.inside import NETNS_DIR
from gpunet.lab.lldp_lab import LLDP_ON_DEMAND, LLDP_RUNNING
from gpunet.lab.netns import pids_in_namespaces
from gpunet.lab.state import read_state
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from tests.labs import lab_id

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(shutil.which("lldpd") is None, reason="needs lldpd (Debian package lldpd; .ci/run "
                                                                       "installs it)")]
LAB = lab_id("ld")


def lldpd_in(namespaces: set[str]) -> set[str]:
    """Those of the namespaces where an lldpd process runs."""
    by_inode = {(NETNS_DIR / ns).stat().st_ino: ns for ns in namespaces}
    found = set()
    for pid in pids_in_namespaces(namespaces):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "lldpd":
                found.add(by_inode[Path(f"/proc/{pid}/ns/net").stat().st_ino])
        except (OSError, KeyError):
            continue
    return found


def test_the_first_cabling_check_starts_lldpd_and_a_cable_down_reads_missing() -> None:
    plan = design(parse_spec(example_text("small-ethernet"))[0])
    try:
        state = lab_up(plan, LAB, max_nodes=4, routing="static")
        namespaces = set(state.namespaces)
        assert not state.lldp and LLDP_ON_DEMAND in state.notes
        assert state.readiness is not None and "lldp" not in state.readiness.conditions
        assert lldpd_in(namespaces) == set()  # nothing started for LLDP yet
        down = next(link for link in plan.links if link.tier == "node_leaf" and link.a.device in state.servers)
        apply_fault(LAB, f"{down.a.device}:{down.a.port}", "down")
        started = time.monotonic()
        report = cabling_check(CablingSource(lab=LAB), None, [])
        took = time.monotonic() - started
        assert [(f.kind, f.cables) for f in report.findings] == [("missing", (cable_name(down),))]
        # not held until the 60 s readiness deadline by the cable that is down (below it with room
        # for a loaded host's lldpd starts)
        assert took < 50, took
        after = read_state(LAB)
        assert after is not None and after.lldp and LLDP_RUNNING in after.notes
        assert lldpd_in(namespaces) == namespaces  # in every server and switch
        again = cabling_check(CablingSource(lab=LAB), None, [])
        assert again.findings == report.findings and lldpd_in(namespaces) == namespaces
    finally:
        lab_down(LAB)

