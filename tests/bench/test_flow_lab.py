"""bench in the lab with the pause counters faked only at the counter file: the second server's NIC statistics are
replayed from two recorded mlx5 `ethtool -S` outputs through the probe layer's root (the lab server's
own tree), the first read before the pair runs, the second after. Two pairs on cables shaped to 40 %:
the one whose end paused reads "flow control" (congested), the other plain "low" (root; `lab` marker;
lab id r7, torn down whatever happens)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunet.bench import bench_nodes, pair_interfaces
from gpunet.bench.flow import CONGESTED
from gpunet.bench.run import BenchSetup, run_rounds
from gpunet.lab.build import node_argv
from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.sshd import server_root
from gpunet.lab.state import lab_dir
from gpunet.model.io import read_plan
from gpunet.probe.flow import REPLAY
from tests.lab.helpers import built_lab

pytestmark = pytest.mark.lab
LAB = "r7"
FIXTURES = Path(__file__).parent.parent / "fixtures" / "ethtool_stats"
RECORDED = [(FIXTURES / case / "output.txt").read_text() for case in (
    "mlx5_xdp_kernel5.15_zero_counters_removed", "mlx5_xdp_kernel6.5_zero_counters_removed")]


class Replay:
    """A FIFO at the counter file: each read gets the next recorded output, before then after, over
    and over (a retried pair reads two more)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
        self.path, self.stop = path, threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        turn = 0
        while not self.stop.is_set():
            with self.path.open("w") as fifo:  # blocks until the sample's cat opens it
                if not self.stop.is_set():
                    fifo.write(RECORDED[turn % 2])
            turn += 1
            # Let that cat see the end before the next open: opened while it still reads, the next
            # output would join this one. The next sample comes seconds later (the client runs between).
            self.stop.wait(0.5)

    def close(self) -> None:
        self.stop.set()
        os.close(os.open(self.path, os.O_RDONLY | os.O_NONBLOCK))  # frees a writer waiting for a reader
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def lab() -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("the lab needs root (network namespaces)")
    with built_lab(LAB, max_nodes=4):
        yield


def test_a_low_pair_whose_end_paused_reads_flow_control_not_low(lab: None) -> None:
    plan = read_plan(lab_dir(LAB) / "plan.json")
    setup = BenchSetup(plan=plan, on_node=lambda n, c: node_argv(LAB, n, c), plane="compute", seconds=2,
                       scale=1.0, retries=2, counter_root=lambda n: str(server_root(lab_dir(LAB), n)))
    a, b, c, d = bench_nodes(plan, "compute", None)[:4]  # the lab's four servers
    paused, quiet = (a, b), (c, d)
    cables = [f"{p[1]}:{pair_interfaces(plan, 'compute', p)[1].name}" for p in (paused, quiet)]
    device = pair_interfaces(plan, "compute", paused)[1].name
    replay = Replay(server_root(lab_dir(LAB), b) / REPLAY / device)
    try:
        for cable in cables:
            apply_fault(LAB, cable, "rate", "40mbit")
        first, second = run_rounds(setup, [[paused, quiet]])
    finally:
        replay.close()
        heal(LAB)
    print(f"paused pair: {first.status} ({first.reason}); quiet pair: {second.status}")  # shown with -s
    # Each pair is judged only where the host's own load left it conclusive (the servers share its CPUs).
    if second.status != "inconclusive":
        assert second.status == "low" and all(not end.growth for end in second.counters), second
    if first.status == "inconclusive":
        pytest.skip(f"the host's own load left the paused pair inconclusive: {first.reason}")
    assert first.status == CONGESTED and first.reason and first.reason.startswith(f"flow control: {b} "), first
    assert first.value < 0.85 * (first.expected or 0)
    server = next(end for end in first.counters if end.node == b)
    assert server.growth[f"{device}:tx_pause_ctrl_phy"] == 44414017 - 5745055
