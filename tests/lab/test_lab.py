"""The lab for real: namespaces, veths, tc, nftables, iperf3 and sshd (root; `lab` marker)."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import permutations
from pathlib import Path

import pytest

import gpunet.spec
from gpunet.api import plan_spec
from gpunet.errors import LabError
from gpunet.lab.build import lab_down, lab_up
from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.frr import crash_log_folder
from gpunet.lab.sshd import ssh_argv
from gpunet.lab.state import LabState, lab_dir, read_state
from tests.lab.conftest import SMALL_LAB_ID
from tests.lab.helpers import (
    built_lab,
    iperf3,
    lab_address,
    lab_range_route,
    leftovers,
    run_in,
    small_plan,
    tx_bytes,
)
from tests.labs import lab_id

pytestmark = pytest.mark.lab
OTHER_LAB, FAILING_LAB, KILLED_LAB = lab_id("zs"), lab_id("zf"), lab_id("zk")
DOWN_LAB, REFUSING_LAB = lab_id("zd"), lab_id("zr")
EXAMPLES_DIR = Path(gpunet.spec.__file__).parent / "examples"
LAB = SMALL_LAB_ID
NODES = [f"gpu{i}" for i in range(1, 9)]
PLANE_IF = {"management": "eth0", "compute": "ens1"}


@pytest.fixture
def lab(small_lab: LabState) -> LabState:
    return small_lab


def ping(src: str, dst: str, *extra: str, wait: int = 10) -> bool:
    """One echo answered within `wait` s (short where none is to come: a loaded host answers late)."""
    return run_in(LAB, src, "ping", "-c", "1", "-W", str(wait), *extra, dst).returncode == 0


def test_every_server_reaches_every_other_on_each_plane(lab: LabState) -> None:
    pairs = [(a, b, plane) for a, b in permutations(NODES, 2) for plane in PLANE_IF]
    with ThreadPoolExecutor(max_workers=16) as pool:
        ok = list(pool.map(lambda p: ping(p[0], lab_address(lab, p[1], PLANE_IF[p[2]])), pairs))
    failed = [p for p, good in zip(pairs, ok, strict=True) if not good]
    assert not failed
    assert len(pairs) == 8 * 7 * 2


def test_flows_between_leaves_use_both_spines(lab: LabState) -> None:
    spines = [f"gn{LAB}-comp-spine001", f"gn{LAB}-comp-spine002"]
    before = [sum(tx_bytes(s).values()) for s in spines]
    iperf3(LAB, "gpu1", "gpu5", lab_address(lab, "gpu5", "ens1"), "-P", "16", seconds=2)
    moved = [sum(tx_bytes(s).values()) - b for s, b in zip(spines, before, strict=True)]
    # 16 flows hashed on L4 ports over 4 uplinks (2 per spine): both spines carry flows. With 8 the
    # chance that every flow hashes onto one spine was 1/128 a run, which a suite run met; with 16 it
    # is 1/32768. A spine that carries one flow of 16 moves about 6 % of the bytes.
    assert min(moved) > 0.02 * sum(moved), moved


def test_server_names_and_hosts_file(lab: LabState) -> None:
    assert run_in(LAB, "gpu3", "hostname").stdout.strip() == "gpu3"
    resolved = run_in(LAB, "gpu3", "getent", "hosts", "gpu7-comp").stdout.split()
    assert resolved[0] == lab_address(lab, "gpu7", "ens1")


def test_ssh_with_the_lab_key_runs_a_command(lab: LabState) -> None:
    address = lab.mgmt_addresses["gpu2"]
    done = subprocess.run(ssh_argv(lab_dir(LAB), address, ["hostname"]), capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "gpu2"


def test_nothing_outside_the_lab_is_reachable_from_the_host(lab: LabState) -> None:
    assert "unreachable 198.18.0.0/15" in lab_range_route()
    for outside in ("198.19.255.1", lab_address(lab, "gpu1", "ens1")):  # compute is not routed to the host
        got = subprocess.run(["ip", "route", "get", outside], capture_output=True, text=True, check=False)
        # EHOSTUNREACH is what an `unreachable` route answers; no packet is sent to learn it.
        assert got.returncode != 0 and "No route to host" in got.stderr, got
    inside = subprocess.run(["ip", "route", "get", lab.mgmt_addresses["gpu1"]], capture_output=True, text=True,
                            check=True)
    assert f"dev {lab.host_if}" in inside.stdout


def egress_path(lab: LabState, src: str, dst: str) -> list[str]:
    """The cables an ICMP packet src -> dst takes, asked of each switch's FIB (`ip route get`
    with the same L4 hash inputs): ['comp-leaf001:5', ...] as switch:port ends."""
    path, here, iif = [], "comp-leaf" + ("001" if int(src[3:]) <= 4 else "002"), f"swp{(int(src[3:]) - 1) % 4 + 1}"
    src_ip, dst_ip = lab_address(lab, src, "ens1"), lab_address(lab, dst, "ens1")
    for _ in range(4):
        got = subprocess.run(["ip", "-n", f"gn{LAB}-{here}", "-j", "route", "get", dst_ip, "from", src_ip,
                              "iif", iif, "ipproto", "icmp"], capture_output=True, text=True, check=True)
        dev = __import__("json").loads(got.stdout)[0]["dev"]
        path.append(f"{here}:{dev.removeprefix('swp')}")
        peer = next((v for v in lab.veths if v.a_ns == f"gn{LAB}-{here}" and v.a_if == dev), None)
        if peer is None or not peer.b_ns.split("-", 1)[1].startswith("comp-"):
            return path
        here, iif = peer.b_ns.split("-", 1)[1], peer.b_if
    return path


def test_mtu_fault_breaks_full_size_pings_only_on_paths_through_it(lab: LabState) -> None:
    big = ("-M", "do", "-s", str(9000 - 28))
    inter_leaf = [(a, b) for a in NODES[:4] for b in NODES[4:]]
    assert all(ping(a, lab_address(lab, b, "ens1"), *big) for a, b in inter_leaf)
    target = "comp-leaf001:5"  # leaf001's first uplink, to spine001
    apply_fault(LAB, target, "mtu", "1500")
    try:
        # Only the request has DF set: Linux sends echo replies with DF clear, so a reply crossing
        # the narrow cable is fragmented, not dropped. The request's path decides.
        crossing = {(a, b) for a, b in inter_leaf if target in egress_path(lab, a, b)}
        results = {(a, b): ping(a, lab_address(lab, b, "ens1"), *big, wait=5) for a, b in inter_leaf}
        assert crossing, "the ECMP hash sent no test flow through the faulted cable"
        assert {p for p, good in results.items() if not good} == crossing
        assert all(ping(a, lab_address(lab, b, "ens1"), "-M", "do", "-s", "1400") for a, b in crossing)
        assert all(ping(a, lab_address(lab, b, "ens1"), *big) for a, b in [("gpu1", "gpu2"), ("gpu5", "gpu8")])
    finally:
        heal(LAB, target)
    assert all(ping(a, lab_address(lab, b, "ens1"), *big) for a, b in inter_leaf)


def test_loss_fault_raises_retransmissions_only_through_it(lab: LabState) -> None:
    apply_fault(LAB, "gpu1:ens1", "loss", "2")
    try:
        hit = iperf3(LAB, "gpu1", "gpu2", lab_address(lab, "gpu2", "ens1"), "-b", "50M", seconds=3)
        spared = iperf3(LAB, "gpu3", "gpu4", lab_address(lab, "gpu4", "ens1"), "-b", "50M", seconds=3)
    finally:
        heal(LAB, "gpu1:ens1")
    hit_rtx, spared_rtx = hit["end"]["sum_sent"]["retransmits"], spared["end"]["sum_sent"]["retransmits"]
    assert hit_rtx >= 10, (hit_rtx, spared_rtx)
    # a path without the fault retransmits a few times at most (a shaper's queue overflowing when
    # the host stalls: 3 and 6 beside the faulty path's 56 and 41 in loaded runs), the faulty one
    # several times as often
    assert spared_rtx * 4 <= hit_rtx, (hit_rtx, spared_rtx)


@pytest.mark.parametrize(("cable", "client", "server", "mbit"), [
    (None, "gpu1", "gpu2", 100.0),  # 100G compute links at 1 Mbit/s per Gbit/s
    ("gpu3:ens1", "gpu3", "gpu4", 40.0),  # a rate fault reshapes one cable
])
def test_shaped_links_deliver_their_rate(lab: LabState, cable: str | None, client: str, server: str,
                                         mbit: float) -> None:
    if cable:
        apply_fault(LAB, cable, "rate", f"{mbit:g}mbit")
    try:
        report = iperf3(LAB, client, server, lab_address(lab, server, "ens1"), seconds=4)
    finally:
        if cable:
            heal(LAB, cable)
    got = report["end"]["sum_received"]["bits_per_second"] / 1e6
    assert abs(got - mbit) <= 0.15 * mbit, (got, mbit)


def test_down_fault_cuts_the_link_and_heal_restores_it(lab: LabState) -> None:
    dst = lab_address(lab, "gpu6", "ens1")
    apply_fault(LAB, "gpu6:ens1", "down")
    try:
        assert not ping("gpu7", dst, wait=2)
    finally:
        heal(LAB)
    assert ping("gpu7", dst)


def test_up_is_idempotent(lab: LabState) -> None:
    again = lab_up(small_plan(), LAB)
    assert again.plan_digest == lab.plan_digest and again.namespaces == lab.namespaces


def test_labs_side_by_side_keep_their_own_blocks(lab: LabState) -> None:
    with built_lab(OTHER_LAB) as other:
        assert other.block != lab.block and other.host_if != lab.host_if
        for state in (lab, other):
            alive = subprocess.run(["ping", "-c", "1", "-W", "10", state.mgmt_addresses["gpu1"]],
                                   capture_output=True, check=False)
            assert alive.returncode == 0
        assert run_in(OTHER_LAB, "gpu1", "hostname").stdout.strip() == "gpu1"
    assert leftovers(OTHER_LAB) == []
    assert "unreachable 198.18.0.0/15" in lab_range_route()  # lab zt is still up


def test_three_labs_built_at_once_each_get_their_own_block_and_go_at_once() -> None:
    """Each lab has its own lock; only the slot, the host route and the host's limits are taken one
    lab at a time: three `lab up` at once end with three labs, each reachable, and three `lab down`
    at once leave nothing of any."""
    ids = [lab_id("zp") for _ in range(3)]
    plan = small_plan()
    try:
        with ThreadPoolExecutor(3) as pool:
            states = list(pool.map(lambda i: lab_up(plan, i, max_nodes=4, routing="static"), ids))
        assert len({s.slot for s in states}) == 3 and len({s.block for s in states}) == 3
        for state in states:
            alive = subprocess.run(["ping", "-c", "1", "-W", "10", state.mgmt_addresses["gpu1"]],
                                   capture_output=True, check=False)
            assert alive.returncode == 0, state.lab_id
    finally:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lab_down, ids))
    assert all(leftovers(i) == [] for i in ids)


def test_teardown_after_a_failure_midway_leaves_nothing() -> None:
    with pytest.raises(RuntimeError), built_lab(FAILING_LAB):
        assert leftovers(FAILING_LAB)  # the lab exists here
        raise RuntimeError("a test failing midway")
    assert leftovers(FAILING_LAB) == []


def test_down_after_kill_9_of_up_cleans_up() -> None:
    """`lab up` of a 32-server slice killed -9 while building, then `lab down`."""
    up = subprocess.Popen([sys.executable, "-m", "gpunet", "lab", "up", "--lab", KILLED_LAB, "--max-nodes", "32",
                           str(EXAMPLES_DIR / "multi-unit-large.yaml")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = lab_dir(KILLED_LAB) / "state.json"
    deadline = time.monotonic() + 60
    while not any(n.startswith(f"gn{KILLED_LAB}-") for n in _netns_now()) and time.monotonic() < deadline:
        time.sleep(0.01)
    up.kill()
    up.wait()
    try:
        assert state.exists() and '"status": "building"' in state.read_text(), "killed too late to prove it"
        assert leftovers(KILLED_LAB)
    finally:
        subprocess.run([sys.executable, "-m", "gpunet", "lab", "down", "--lab", KILLED_LAB], check=True,
                       capture_output=True)
    assert leftovers(KILLED_LAB) == []


def _netns_now() -> list[str]:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout.split()


def test_module_lab_is_gone_after_down() -> None:
    """Runs last in this module: the fixture lab's own teardown path, checked the same way, and the
    crash-log folder each FRR daemon keeps under /var/tmp/frr (named by its PID before `-d` forked it)."""
    with built_lab(DOWN_LAB) as state:
        pids = list((lab_dir(DOWN_LAB) / "frr").glob("*/*.pid"))
        crash_logs = [crash_log_folder(int(pid.read_text()), pid.stem) for pid in pids]
        assert state.routing != "frr" or (pids and all(f is not None and f.is_dir() for f in crash_logs))
    assert leftovers(DOWN_LAB) == []
    assert [folder for folder in crash_logs if folder is not None and folder.exists()] == []
    lab_down(DOWN_LAB)  # idempotent
    assert leftovers(DOWN_LAB) == []


def test_up_refuses_to_adopt_a_namespace_it_did_not_make() -> None:
    subprocess.run(["ip", "netns", "add", f"gn{REFUSING_LAB}-gpu1"], check=True)
    try:
        with pytest.raises(LabError, match=f"gn{REFUSING_LAB}-gpu1 already exist"):
            lab_up(small_plan(), REFUSING_LAB)
        assert f"gn{REFUSING_LAB}-gpu1" in _netns_now()  # left alone
        assert read_state(REFUSING_LAB) is None  # nothing recorded, nothing built
        assert not [n for n in _netns_now() if n.startswith(f"gn{REFUSING_LAB}-") and n != f"gn{REFUSING_LAB}-gpu1"]
    finally:
        subprocess.run(["ip", "netns", "del", f"gn{REFUSING_LAB}-gpu1"], check=True)


def test_a_slice_of_a_three_tier_plan_routes_across_pods() -> None:
    """multi-unit-large (1024 nodes, 3 tiers) sliced to 12 servers: leaves in two pods, spines
    and cores kept; the first and last servers sit in different pods."""
    plan = plan_spec(EXAMPLES_DIR / "multi-unit-large.yaml")
    with built_lab("zp", plan=plan, max_nodes=12) as state:
        tiers = {kind for kind in state.namespaces.values()}
        assert tiers == {"server", "router"}
        cores = [n for n in state.namespaces if "-comp-core" in n]
        assert cores
        nodes = sorted(n for n in state.servers if n.startswith("gpu"))
        first, last = nodes[0], nodes[-1]
        target = lab_address(state, last, "ib0")
        assert run_in("zp", first, "ping", "-c", "1", "-W", "10", target).returncode == 0
        before = sum(sum(tx_bytes(c).values()) for c in cores)
        run_in("zp", first, "ping", "-c", "20", "-i", "0.01", "-q", target)
        assert sum(sum(tx_bytes(c).values()) for c in cores) > before  # the inter-pod path crossed a core
    assert leftovers("zp") == []
