"""doctor --peers --listen: which probes a node's listener waits for (the same probe generation its
peers run), and that it serves until they have all arrived, or gives up at its deadline. The
listener is driven with real sockets on loopback addresses (127.0.0.0/8) in this one process."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from gpunet.api.doctor import FLEET_TIMEOUT_S
from gpunet.model.flows import PROBE_PORT, Flow
from gpunet.model.plan import Node, Plan
from gpunet.probe import peers
from gpunet.probe.peers import PEERS_WAIT_S, PeerProbe, expected_probes, listen_for_peers, plan_probes
from tests.render.rendered import example_plan

PLAN = example_plan("scalable-unit")
EVERYONE = frozenset(n.name for n in PLAN.nodes)
ATTEMPT_S = 15.0  # a probe's own timeout: an answer from a loaded host's listener thread comes late


def node(plan: Plan, name: str) -> Node:
    found = plan.node(name)
    assert found is not None
    return found


def sent_to(plan: Plan, receiver: str, senders: frozenset[str]) -> set[PeerProbe]:
    """What the senders' own doctors would connect to the receiver with, from their plan_probes."""
    return {p for s in senders - {receiver} for p in plan_probes(plan, node(plan, s))
            if p.kind in ("tcp", "udp") and p.peer == receiver}


@pytest.mark.parametrize("receiver", ["stor01", "gpu001", "login01"])
def test_a_node_expects_exactly_what_its_peers_will_send_it(receiver: str) -> None:
    assert expected_probes(PLAN, node(PLAN, receiver), EVERYONE) == sent_to(PLAN, receiver, EVERYONE)


def test_the_storage_node_expects_each_gpu_node_on_each_storage_port() -> None:
    everything = expected_probes(PLAN, node(PLAN, "stor01"), EVERYONE)
    expected = [p for p in everything if p.port != PROBE_PORT]
    storage = {(p.peer, p.kind, p.port) for p in expected if p.plane == "storage"}
    gpus = [n.name for n in PLAN.nodes if n.role == "gpu"]
    ports = {("tcp", 111), ("udp", 111), ("tcp", 2049), ("udp", 2049), ("tcp", 20049), ("tcp", 988)}
    assert storage == {("stor01", kind, port) for kind, port in ports for _ in gpus}
    senders = {p.source for p in expected if p.plane == "storage"}
    assert senders == {i.address.split("/")[0] for g in gpus for i in node(PLAN, g).interfaces
                       if i.plane == "storage" and i.address}
    # localize's probe port: from every other node of the storage plane, storage servers included.
    probers = {p.source for p in everything if p.port == PROBE_PORT and p.plane == "storage"}
    assert probers == {i.address.split("/")[0] for n in PLAN.nodes if n.name != "stor01" for i in n.interfaces
                       if i.plane == "storage" and i.address}


def test_only_this_runs_nodes_are_awaited_and_none_where_they_leave_this_node_out() -> None:
    run = frozenset({"gpu001", "gpu002", "stor01"})
    expected = expected_probes(PLAN, node(PLAN, "stor01"), run)
    assert expected == sent_to(PLAN, "stor01", run) and expected
    sources = {i.address.split("/")[0] for g in ("gpu001", "gpu002") for i in node(PLAN, g).interfaces if i.address}
    assert {p.source for p in expected} <= sources
    assert expected_probes(PLAN, node(PLAN, "stor01"), run, skip_peers=frozenset({"stor01"})) == frozenset()
    assert expected_probes(PLAN, node(PLAN, "stor01"), frozenset({"stor01"})) == frozenset()


def test_a_peer_without_an_address_on_the_plane_is_not_awaited() -> None:
    stor01 = node(PLAN, "stor01")
    gpu001 = node(PLAN, "gpu001")
    unaddressed = gpu001.model_copy(update={"interfaces": tuple(
        i.model_copy(update={"address": None}) if i.plane == "storage" else i for i in gpu001.interfaces)})
    plan = PLAN.model_copy(update={"nodes": tuple(unaddressed if n.name == "gpu001" else n for n in PLAN.nodes)})
    expected = expected_probes(plan, node(plan, "stor01"), frozenset({"gpu001", "stor01"}))
    assert expected == sent_to(plan, "stor01", frozenset({"gpu001", "stor01"}))
    assert {p.plane for p in expected} == {"management"}
    assert any(p.plane == "storage" for p in expected_probes(PLAN, stor01, frozenset({"gpu001"})))


def test_the_listeners_deadline_ends_before_the_fleet_kills_the_node() -> None:
    assert PEERS_WAIT_S + peers.LINGER_S < FLEET_TIMEOUT_S - 30  # 30 s left for SSH and start-up


# --- the listener itself, on loopback -------------------------------------------------------------

RECEIVER, TCP_SENDER, UDP_SENDER = "127.0.0.1", "127.0.0.2", "127.0.0.3"


def free_port(kind: socket.SocketKind) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind((RECEIVER, 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def loopback() -> tuple[Plan, list[PeerProbe]]:
    """Three nodes of the example, their management addresses on loopback and their other planes
    unaddressed, and two flows to the first: tcp from the second, udp from the third."""
    names = ["gpu001", "gpu002", "gpu003"]
    nodes = tuple(node(PLAN, n).model_copy(update={"interfaces": tuple(
        i.model_copy(update={"address": f"{ip}/8" if i.plane == "management" else None})
        for i in node(PLAN, n).interfaces)}) for n, ip in zip(names, (RECEIVER, TCP_SENDER, UDP_SENDER), strict=True))
    tcp, udp = free_port(socket.SOCK_STREAM), free_port(socket.SOCK_DGRAM)
    flows = (Flow(service="job", protocol="tcp", ports=str(tcp), plane="management", from_nodes="gpu002",
                  to_nodes="gpu001"),
             Flow(service="echo", protocol="udp", ports=str(udp), plane="management", from_nodes="gpu003",
                  to_nodes="gpu001"))
    plan = PLAN.model_copy(update={"nodes": nodes, "flows": flows})
    probes = [p for s in names[1:] for p in plan_probes(plan, node(plan, s)) if p.kind in ("tcp", "udp")]
    sent = {(p.kind, p.source, p.target) for p in probes}
    assert sent == {("tcp", TCP_SENDER, RECEIVER), ("udp", UDP_SENDER, RECEIVER)}
    return plan, probes


@pytest.fixture(autouse=True)
def short_linger(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(peers, "LINGER_S", 0.0)
    yield


def listen_in_background(plan: Plan, expected: frozenset[PeerProbe],
                         wait_s: float) -> tuple[threading.Thread, list[float]]:
    """The receiver's listener with an empty body (its own probes done at once), in a thread; the
    list gets the seconds it took to return."""
    took: list[float] = []
    up = threading.Event()

    def listen() -> None:
        start = time.monotonic()
        with listen_for_peers(plan, node(plan, "gpu001"), expected, wait_s):
            up.set()
        took.append(time.monotonic() - start)

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    assert up.wait(10)
    return thread, took


def test_the_listener_serves_a_late_peer_and_returns_once_all_arrived(loopback: tuple[Plan, list[PeerProbe]]) -> None:
    plan, probes = loopback
    expected = expected_probes(plan, node(plan, "gpu001"), frozenset({"gpu001", "gpu002", "gpu003"}))
    assert expected == frozenset(probes)
    thread, took = listen_in_background(plan, expected, wait_s=30)
    time.sleep(1.0)  # the receiver's own probes are long done: before the fix it had stopped listening
    assert [peers._attempt(p, ATTEMPT_S) for p in probes] == [0, 0]  # open: tcp accepted, udp echoed
    thread.join(30)
    assert not thread.is_alive() and 1.0 <= took[0] < 20, took  # once both came, not at its 30 s


def test_the_listener_keeps_serving_while_one_probe_is_missing(loopback: tuple[Plan, list[PeerProbe]]) -> None:
    plan, probes = loopback
    thread, took = listen_in_background(plan, frozenset(probes), wait_s=30)
    tcp = next(p for p in probes if p.kind == "tcp")
    assert peers._attempt(tcp, ATTEMPT_S) == 0
    time.sleep(1.0)
    assert thread.is_alive()  # the udp peer has not come yet
    udp = next(p for p in probes if p.kind == "udp")
    assert peers._attempt(udp, ATTEMPT_S) == 0
    thread.join(30)
    assert not thread.is_alive() and took[0] < 20, took  # once both came, not at its 30 s


def test_the_listener_gives_up_at_its_deadline_when_a_peer_never_comes(loopback: tuple[Plan, list[PeerProbe]]) -> None:
    plan, probes = loopback
    thread, took = listen_in_background(plan, frozenset(probes), wait_s=1.5)
    assert peers._attempt(probes[0], ATTEMPT_S) == 0  # the other never comes
    thread.join(30)
    assert not thread.is_alive() and 1.5 <= took[0] < 15, took


def test_a_port_another_service_holds_is_not_awaited(loopback: tuple[Plan, list[PeerProbe]]) -> None:
    """sshd on 22 answers for itself: the listener cannot see its connections, so it does not wait for them."""
    plan, probes = loopback
    tcp = next(p for p in probes if p.kind == "tcp")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind((tcp.target, tcp.port))
        held.listen(1)
        thread, took = listen_in_background(plan, frozenset({tcp}), wait_s=30)
        thread.join(30)
    assert not thread.is_alive() and took[0] < 20, took  # once both came, not at its 30 s
