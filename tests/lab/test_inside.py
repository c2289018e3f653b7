"""Looking into a lab namespace from a thread (lab/inside.py): the parsers on what Linux 6.18
answered in namespaces of ours (sock_diag's listeners; IPv6 addresses in duplicate-address
detection, then settled), and, as root, the thread's excursion itself: a sysctl written there and
not here, sockets seen there, an echo answered or not, a hostname pinned."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpunet.errors import LabError
from gpunet.lab import inside
from tests.labs import lab_id

# sock_diag's answers to `_listeners_request` in a namespace with listeners on 198.18.255.1:22,
# 127.0.0.1:631 and [::]:2222, and a connection to the first (recorded on Linux 6.18: the dump of
# listeners holds no connection)
DIAG_INET = bytes.fromhex(
    "7c00000014000200010000009c560000020a0000027700007f0000010000000000000000000000000000000000000000000000"
    "000000000000000000e89c00000000000000000000000000008000000000000000f65f3b02050008000000000008000f000000"
    "00000c001500010000000000000006001600520000007c00000014000200010000009c560000020a000000160000c612ff0100"
    "00000000000000000000000000000000000000000000000000000000000000e99c000000000000000000000100000080000000"
    "00000000f35f3b02050008000000000008000f00000000000c001500010000000000000006001600520000001400000003000200"
    "010000009c56000000000000")
DIAG_INET6 = bytes.fromhex(
    "8400000014000200010000009c5600000a0a000008ae000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000ea9c00000000000000000000000000008000000000000000f45f3b02050008000000000005000b0000000000"
    "08000f00000000000c001500010000000000000006001600120000001400000003000200010000009c56000000000000")
# rtnetlink's answer to `_routes_request` in a namespace of two veth ports, gna up and gnc link-down
# (its peer down), with a /31 on each, 198.18.4.1/32 via gna, 198.18.4.2/32 via gnc and 198.18.4.17/32
# over both (`ip route add ... nexthop via 198.18.2.1 dev gna nexthop via 198.18.2.3 dev gnc`):
# recorded on Linux 6.18, the local table's routes in it too
ROUTE_DUMP = bytes.fromhex(
    "3c0000001800020001000000866d0000021f0000fe02fd010000000008000f00fe00000008000100c612020008000700c6120200"
    "08000400030000003c0000001800020001000000866d0000021f0000fe02fd011000000008000f00fe00000008000100c6120202"
    "08000700c61202020800040005000000340000001800020001000000866d000002200000fe03fd010000000008000f00fe000000"
    "08000100c612040108000400030000003c0000001800020001000000866d000002200000fe0300011000000008000f00fe000000"
    "08000100c612040208000500c61202030800040005000000500000001800020001000000866d000002200000fe03000100000000"
    "08000f00fe00000008000100c612041124000900100000000300000008000500c6120201100010000500000008000500c6120203"
    "3c0000001800020001000000866d000002080000ff02fe020000000008000f00ff000000080001007f000000080007007f000001"
    "08000400010000003c0000001800020001000000866d000002200000ff02fe020000000008000f00ff000000080001007f000001"
    "080007007f00000108000400010000003c0000001800020001000000866d000002200000ff02fd030000000008000f00ff000000"
    "080001007fffffff080007007f00000108000400010000003c0000001800020001000000866d000002200000ff02fe0200000000"
    "08000f00ff00000008000100c612020008000700c612020008000400030000003c0000001800020001000000866d000002200000"
    "ff02fe020000000008000f00ff00000008000100c612020208000700c61202020800040005000000140000000300020001000000"
    "866d000000000000")
IF_INET6_SETTLING = """\
fe80000000000000d89c87fffe880cbc 02 40 20 c0     gnc0
20010db8000000000000000000000007 02 40 00 c0     gnc0
00000000000000000000000000000001 01 80 10 80       lo
"""
IF_INET6_SETTLED = IF_INET6_SETTLING.replace(" c0 ", " 80 ")


def test_listening_sockets_are_read_from_the_kernels_own_answer() -> None:
    assert inside.diag_listeners(DIAG_INET) == {("198.18.255.1", 22), ("127.0.0.1", 631)}
    assert inside.diag_listeners(DIAG_INET6) == {("::", 2222)}
    assert inside.diag_listeners(b"") == set()
    assert inside.diag_listeners(DIAG_INET[:100]) == set()  # a record cut short is no listener


def test_an_error_answer_is_an_error_not_an_empty_namespace() -> None:
    refused = struct.pack("=IHHIIi", 36, 2, 0, 1, 0, -1) + bytes(16)  # NLMSG_ERROR, EPERM
    with pytest.raises(LabError, match="sock_diag refused the dump: Operation not permitted"):
        inside.diag_listeners(refused)


def test_route_widths_count_the_next_hops_the_kernel_forwards_by() -> None:
    assert inside.kernel_route_widths(ROUTE_DUMP) == {
        "198.18.2.0/31": 1, "198.18.2.2/31": 0,  # the main table only: no local or broadcast route
        "198.18.4.1/32": 1, "198.18.4.2/32": 0,  # a route out of a link-down port forwards nothing
        "198.18.4.17/32": 1}  # two next hops, one link-down


def test_a_route_dump_cut_short_or_refused_is_an_error_not_routes_missing() -> None:
    with pytest.raises(LabError, match="did not end"):
        inside.kernel_route_widths(ROUTE_DUMP[:-20])
    refused = struct.pack("=IHHIIi", 36, 2, 0, 1, 0, -1) + bytes(16)  # NLMSG_ERROR, EPERM
    with pytest.raises(LabError, match="rtnetlink refused the route dump: Operation not permitted"):
        inside.kernel_route_widths(refused)
    no_errno = struct.pack("=IHHIIi", 36, 2, 0, 1, 0, -(1 << 31)) + bytes(16)
    with pytest.raises(LabError, match=r"refused the route dump: error -2147483648"):
        inside.kernel_route_widths(no_errno)
    with pytest.raises(LabError, match=r"sock_diag refused the dump: error -2147483648"):
        inside.diag_listeners(no_errno)


def test_addresses_in_duplicate_address_detection_are_unsettled_then_settled() -> None:
    assert inside.unsettled_inet6(IF_INET6_SETTLING) == ["gnc0 fe80::d89c:87ff:fe88:cbc/64 tentative",
                                                         "gnc0 2001:db8::7/64 tentative"]
    assert inside.unsettled_inet6(IF_INET6_SETTLED) == []
    assert inside.unsettled_inet6(IF_INET6_SETTLING, only="lo") == []
    # IFA_F_DADFAILED (0x08) with the tentative flag kept, as the kernel leaves a failed address
    failed = "20010db8000000000000000000000005 02 40 00 c8     gnc0\n"
    assert inside.unsettled_inet6(failed) == ["gnc0 2001:db8::5/64 dadfailed"]


@pytest.mark.parametrize("line", ["garbage", "zz010db8000000000000000000000005 02 40 00 c8 gnc0",
                                  "20010db8 02 40 00 c8 gnc0", "20010db8000000000000000000000005 02 40 00 c8"])
def test_an_address_line_of_another_shape_is_looked_at_again_never_taken_as_settled(line: str) -> None:
    assert inside.unsettled_inet6(line + "\n")[0].startswith("unreadable if_inet6 line")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.binary(max_size=400))
def test_the_parsers_never_raise_on_any_input(text: str, answer: bytes) -> None:
    inside.unsettled_inet6(text)
    try:
        inside.diag_listeners(answer)
    except LabError as exc:  # an error message with a non-zero code: said, never a crash
        assert "sock_diag refused" in str(exc)
    for dump in (answer, ROUTE_DUMP[:len(answer)] + answer):
        try:
            widths = inside.kernel_route_widths(dump)
        except LabError as exc:
            assert "route dump" in str(exc)
        else:
            assert all(0 <= width <= len(dump) for width in widths.values())


def test_a_sysctl_name_becomes_its_path_under_proc_sys_and_nothing_else() -> None:
    assert str(inside.sysctl_path("net.ipv4.ip_forward")) == "/proc/sys/net/ipv4/ip_forward"
    assert str(inside.sysctl_path("net.ipv4.neigh.swp3.proxy_delay")) == "/proc/sys/net/ipv4/neigh/swp3/proxy_delay"
    # an interface name with a dot keeps it, as sysctl(8) reads the name
    assert str(inside.sysctl_path("net.ipv4.conf.eth0.100.rp_filter")) == "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"
    for bad in ("kernel.hostname", "net.ipv4.conf...x", "net.ipv4.conf.a/b.rp_filter", "net..ipv4", "net.ipv4.conf.."):
        with pytest.raises(LabError, match="not a network sysctl"):
            inside.sysctl_path(bad)


@pytest.mark.parametrize("name", ["../../proc/1/ns/net", "gnab", "gnab-", "x-gpu1", "gnab-../x", "gnabcde-gpu1"])
def test_only_a_lab_namespace_name_is_entered(name: str) -> None:
    with pytest.raises(LabError, match="not a lab namespace name"), inside.inside(name):
        pass


def test_the_echo_has_a_valid_internet_checksum() -> None:
    packet = inside._echo(0x1234, 7, b"gpunet lab ready")
    assert inside._checksum(packet) == 0  # a correct checksum sums the whole packet to zero


# --- as root: a namespace of this test's own ------------------------------------------------------------

@pytest.fixture(scope="module")
def namespace() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces (CI runs these as root)")
    name = f"gn{lab_id('in')}-probe"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for line in ("link set lo up", "addr add 198.18.255.1/32 dev lo"):
            subprocess.run(["ip", "-n", name, *line.split()], check=False)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


@pytest.mark.lab
def test_a_sysctl_written_in_the_namespace_is_there_and_not_here(namespace: str) -> None:
    here = open("/proc/sys/net/ipv4/ip_forward").read()  # noqa: SIM115 (a one-line read)
    wanted = "0" if here.strip() == "1" else "1"
    inside.write_sysctls(namespace, {"net.ipv4.ip_forward": wanted})
    seen = subprocess.run(["ip", "netns", "exec", namespace, "sysctl", "-n", "net.ipv4.ip_forward"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert seen == wanted and open("/proc/sys/net/ipv4/ip_forward").read() == here  # noqa: SIM115
    with pytest.raises(LabError, match=r"net\.ipv4\.conf\.gnnothere\.rp_filter"):
        inside.write_sysctls(namespace, {"net.ipv4.conf.gnnothere.rp_filter": "0"})


@pytest.mark.lab
def test_a_listener_there_is_seen_and_one_here_is_not(namespace: str) -> None:
    with inside.inside(namespace):
        there = socket.socket()
    with socket.socket() as here, there:
        here.bind(("127.0.0.1", 0))
        here.listen()
        there.bind(("198.18.255.1", 22))
        there.listen()
        seen = inside.tcp_listeners(namespace)
        assert ("198.18.255.1", 22) in seen and ("127.0.0.1", here.getsockname()[1]) not in seen


@pytest.mark.lab
def test_an_echo_is_answered_where_the_target_is_and_not_where_it_is_not(namespace: str) -> None:
    assert inside.answers(namespace, "198.18.255.1", "198.18.255.1", timeout_s=10)  # a loaded host answers late
    assert not inside.answers(namespace, "198.18.255.1", "198.18.254.9", timeout_s=0.3)  # no route: at once


@pytest.mark.lab
def test_the_routes_read_there_are_the_namespaces_main_table(namespace: str) -> None:
    subprocess.run(["ip", "-n", namespace, "route", "replace", "198.18.254.0/24", "dev", "lo"], check=True)
    widths = inside.route_widths(namespace)
    shown = subprocess.run(["ip", "-n", namespace, "-j", "route", "show", "table", "main"], capture_output=True,
                           text=True, check=True).stdout
    assert widths.get("198.18.254.0/24") == 1
    assert set(widths) == {r["dst"] if "/" in r["dst"] else f"{r['dst']}/32" for r in json.loads(shown)}


@pytest.mark.lab
def test_threads_return_to_their_own_namespace_even_when_the_block_raises(namespace: str) -> None:
    home = os.readlink("/proc/thread-self/ns/net")
    seen: list[str] = []

    def excursion() -> None:
        with pytest.raises(ValueError), inside.inside(namespace):
            seen.append(os.readlink("/proc/thread-self/ns/net"))
            raise ValueError("in the block")
        seen.append(os.readlink("/proc/thread-self/ns/net"))

    worker = threading.Thread(target=excursion)
    worker.start()
    worker.join()
    assert seen[0] != home and seen[1] == home and os.readlink("/proc/thread-self/ns/net") == home
