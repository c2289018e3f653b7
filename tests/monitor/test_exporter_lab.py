"""The exporter in a lab server, scraped over HTTP from the host across the lab's management
plane: counters follow iperf3 traffic, the retransmission ratio rises under injected loss, and
an MTU fault shows as Plan drift (root; `lab` marker)."""

from __future__ import annotations

import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpunet.lab.build import LAB_PLAN, lab_dir
from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.state import LabState
from tests.lab.helpers import iperf3, lab_address, server_process
from tests.labs import shared_lab, shared_lab_id

pytestmark = pytest.mark.lab
LAB = shared_lab_id("small")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


lab = shared_lab("small")


@pytest.fixture(scope="module")
def metrics_url(lab: LabState) -> Iterator[str]:
    """gpunet exporter in gpu1 with the lab's plan: it listens on gpu1's management address."""
    command = [sys.executable, "-m", "gpunet", "exporter", "--plan", str(lab_dir(LAB) / LAB_PLAN), "--node", "gpu1"]
    url = f"http://{lab_address(lab, 'gpu1', 'eth0')}:9842/metrics"
    with server_process(LAB, "gpu1", *command) as proc:
        _wait_for(url, proc.poll)
        yield url


def _wait_for(url: str, exited: object) -> None:
    deadline = time.monotonic() + 120  # a whole gpunet start, on a loaded host
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=10).close()
            return
        except OSError:
            assert callable(exited) and exited() is None, "the exporter exited"
            time.sleep(0.2)
    raise AssertionError(f"no answer from {url}")


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=60) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


COMPUTE = (("device", "ens1"), ("plane", "compute"))


def test_healthy_server_has_no_drift_and_every_collector_succeeds(metrics_url: str) -> None:
    samples = scrape(metrics_url)
    drift = {labels: value for (name, labels), value in samples.items() if name == "gpunet_plan_drift"}
    assert drift and not any(drift.values()), drift
    assert {dict(labels)["device"] for labels in drift} == {"eth0", "ens1"}
    assert all(value == 1 for (name, _), value in samples.items() if name == "gpunet_collector_success")


def test_counters_follow_iperf3_traffic(lab: LabState, metrics_url: str) -> None:
    before = scrape(metrics_url)
    report = iperf3(LAB, "gpu2", "gpu1", lab_address(lab, "gpu1", "ens1"), seconds=2)
    after = scrape(metrics_url)
    received = after[("gpunet_network_receive_bytes_total", COMPUTE)] - before[
        ("gpunet_network_receive_bytes_total", COMPUTE)]
    payload = report["end"]["sum_received"]["bytes"]
    assert payload <= received <= payload * 1.1, (payload, received)  # payload plus headers
    assert after[("gpunet_network_receive_packets_total", COMPUTE)] > before[
        ("gpunet_network_receive_packets_total", COMPUTE)] + payload / 9000


def _retransmission_ratio(lab: LabState, url: str) -> float:
    before = scrape(url)
    iperf3(LAB, "gpu1", "gpu2", lab_address(lab, "gpu2", "ens1"), seconds=3)
    after = scrape(url)
    sent = after[("gpunet_tcp_out_segments_total", ())] - before[("gpunet_tcp_out_segments_total", ())]
    resent = (after[("gpunet_tcp_retransmitted_segments_total", ())]
              - before[("gpunet_tcp_retransmitted_segments_total", ())])
    return resent / sent


def test_retransmission_ratio_rises_under_injected_loss(lab: LabState, metrics_url: str) -> None:
    clean = _retransmission_ratio(lab, metrics_url)
    apply_fault(LAB, "gpu1:ens1", "loss", "3")
    try:
        lossy = _retransmission_ratio(lab, metrics_url)
    finally:
        heal(LAB)
    assert clean < 0.002 and lossy > 0.01, (clean, lossy)


def test_an_mtu_fault_shows_as_drift(metrics_url: str) -> None:
    apply_fault(LAB, "gpu1:ens1", "mtu", "1500")
    try:
        samples = scrape(metrics_url)
    finally:
        heal(LAB)
    assert samples[("gpunet_plan_drift", (*COMPUTE[:1], ("kind", "mtu"), COMPUTE[1]))] == 1
    assert samples[("gpunet_network_mtu_bytes", COMPUTE)] == 1500
    assert scrape(metrics_url)[("gpunet_plan_drift", (*COMPUTE[:1], ("kind", "mtu"), COMPUTE[1]))] == 0


def test_peer_probes_measure_every_peer_on_every_plane(lab: LabState) -> None:
    address = lab_address(lab, "gpu2", "eth0")
    url = f"http://{address}:9843/metrics"
    command = [sys.executable, "-m", "gpunet", "exporter", "--plan", str(lab_dir(LAB) / LAB_PLAN), "--node", "gpu2",
               "--listen", f"{address}:9843", "--probe-peers", "--probe-interval", "1"]
    with server_process(LAB, "gpu2", *command) as proc:
        _wait_for(url, proc.poll)
        peers = {f"{plane}/gpu{i}" for plane in ("management", "compute") for i in range(1, 9) if i != 2}
        deadline = time.monotonic() + 60
        while True:  # a round of probes to every peer (one a second; a loaded host's rounds run late)
            samples = scrape(url)
            sent = {dict(labels)["plane"] + "/" + dict(labels)["peer"]: value
                    for (name, labels), value in samples.items() if name == "gpunet_peer_probes_total"}
            if set(sent) == peers or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert set(sent) == peers and all(v >= 1 for v in sent.values()), sent
    assert not any(v for (name, _), v in samples.items() if name == "gpunet_peer_probe_failures_total")
    answered = sum(v for (name, _), v in samples.items() if name == "gpunet_peer_rtt_seconds_count")
    assert answered == sum(sent.values())
