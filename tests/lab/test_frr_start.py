"""start_frr with real FRR daemons in namespaces of this test's own: each switch is started and
configured on its own, and what goes wrong is named by switch (a line FRR refuses, a daemon that
does not start), while the other switches come up all the same."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest

from gpunet.errors import LabError
from gpunet.lab.frr import frr_missing, frr_switches, start_frr, stop_frr, vtysh_argv
from gpunet.lab.state import lab_dir
from tests.labs import lab_id

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(frr_missing() is not None, reason=f"no FRR here: {frr_missing()}")]
GOOD = """frr defaults datacenter
hostname {name}
!
router bgp 4210000001
 bgp router-id 198.18.255.1
 no bgp ebgp-requires-policy
exit
!
"""


@pytest.fixture
def switches() -> Iterator[tuple[str, list[str]]]:
    """A lab id and three namespaces of it (no lab state: only what start_frr needs), removed after."""
    lab = lab_id("fs")
    names = [f"gn{lab}-sw{i}" for i in range(3)]
    for name in names:
        subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        yield lab, names
    finally:
        stop_frr(lab_dir(lab), set(names))
        for name in names:
            subprocess.run(["ip", "netns", "del", name], check=False, timeout=30)
        shutil.rmtree(lab_dir(lab), ignore_errors=True)


def test_each_switch_is_configured_and_a_refused_line_is_named_by_its_switch(
        switches: tuple[str, list[str]]) -> None:
    lab, names = switches
    confs = {ns: GOOD.format(name=ns) for ns in names}
    confs[names[1]] = GOOD.format(name=names[1]) + "router bgp 4210000001\n gpunet-no-such-command 7\nexit\n"
    with pytest.raises(LabError) as refused:
        start_frr(lab_dir(lab), confs)
    said = str(refused.value)
    assert f"{names[1]} refused the rendered frr.conf" in said, said
    assert names[0] not in said and names[2] not in said, said
    assert sorted(frr_switches(lab_dir(lab), lab)) == names
    for ns in (names[0], names[2]):  # the others were started and configured all the same
        running = running_config(lab, ns)
        assert "router bgp 4210000001" in running and "bgp router-id 198.18.255.1" in running, running


def test_a_daemon_that_cannot_start_is_named(switches: tuple[str, list[str]]) -> None:
    lab, names = switches
    subprocess.run(["ip", "netns", "del", names[2]], check=True, timeout=30)  # nsenter has nowhere to go
    with pytest.raises(LabError, match=rf"zebra in {names[2]} did not start") as failed:
        start_frr(lab_dir(lab), {ns: GOOD.format(name=ns) for ns in names})
    assert names[0] not in str(failed.value) and names[1] not in str(failed.value), failed.value
    for ns in names[:2]:
        assert "router bgp 4210000001" in running_config(lab, ns)


def running_config(lab: str, ns: str) -> str:
    return subprocess.run(vtysh_argv(lab_dir(lab), ns, "-c", "show running-config"), capture_output=True,
                          text=True, timeout=60, check=True).stdout
