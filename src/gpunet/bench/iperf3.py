"""iperf3 -J: the result of one measurement, parsed (a pure function), and run between two
servers with a one-off server (-1) so nothing lingers."""

from __future__ import annotations

from typing import Any

from gpunet.errors import ParseError
from gpunet.files.inputs import load_json
from gpunet.model.base import Frozen


class Iperf3Result(Frozen):
    """Receiver-side goodput (what arrived), sender retransmissions, and the test's shape."""

    received_gbps: float
    sent_gbps: float
    retransmits: int | None  # None: not reported (UDP, or a platform without TCP_INFO)
    seconds: float
    streams: int
    reverse: bool
    bidir_received_gbps: float | None = None  # the reverse direction of a --bidir test
    error: str | None = None  # iperf3's own error ("unable to connect ..."): the run failed
    # end.cpu_utilization_percent: each process's CPU time over the test, % of one core; host is
    # the client (the side that printed the JSON), remote the server, whatever the direction.
    client_cpu_percent: float | None = None
    server_cpu_percent: float | None = None
    version: str | None = None  # "iperf 3.12": from 3.16 each stream has its own thread
    # What arrived of each stream (end.streams[].receiver): with ECMP each stream rides one path, so
    # a slow link on one of a pair's paths shows as its streams far below their siblings.
    stream_gbps: tuple[float, ...] = ()


def parse_iperf3_json(text: str) -> Iperf3Result:
    data = load_json(text, "iperf3 -J")
    if not isinstance(data, dict) or not isinstance(data.get("end"), dict):
        raise ParseError("iperf3 -J", 1, "no 'end' object")
    if data.get("error"):
        return Iperf3Result(received_gbps=0, sent_gbps=0, retransmits=None, seconds=0, streams=0,
                            reverse=False, error=str(data["error"]))
    return _result(data)


def _result(data: dict[str, Any]) -> Iperf3Result:
    start = data.get("start")
    test = start.get("test_start", {}) if isinstance(start, dict) else {}
    end = data["end"]
    test = test if isinstance(test, dict) else {}
    sent, received = _sum(end, "sum_sent"), _sum(end, "sum_received")
    bidir = end.get("sum_received_bidir_reverse")
    return Iperf3Result(
        received_gbps=_gbps(received), sent_gbps=_gbps(sent),
        retransmits=sent.get("retransmits") if isinstance(sent.get("retransmits"), int) else None,
        seconds=_number(received.get("seconds")), streams=int(_number(test.get("num_streams")) or 1),
        reverse=bool(test.get("reverse", 0)),
        bidir_received_gbps=_gbps(bidir) if isinstance(bidir, dict) else None,
        client_cpu_percent=_cpu(end, "host_total"), server_cpu_percent=_cpu(end, "remote_total"),
        version=_version(start), stream_gbps=_streams(end),
    )


def _streams(end: dict[str, Any]) -> tuple[float, ...]:
    """Each stream's receiver-side rate, where iperf3 reported every one."""
    streams = end.get("streams")
    if not isinstance(streams, list):
        return ()
    rates = [s.get("receiver") for s in streams if isinstance(s, dict)]
    if len(rates) != len(streams) or not all(isinstance(r, dict) and isinstance(r.get("bits_per_second"), int | float)
                                             for r in rates):
        return ()
    return tuple(_gbps(r) for r in rates if isinstance(r, dict))


def _version(start: object) -> str | None:
    version = start.get("version") if isinstance(start, dict) else None
    return version[:64] if isinstance(version, str) else None


def _cpu(end: dict[str, Any], key: str) -> float | None:
    cpu = end.get("cpu_utilization_percent")
    value = cpu.get(key) if isinstance(cpu, dict) else None
    return round(float(value), 3) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _sum(end: dict[str, Any], key: str) -> dict[str, Any]:
    value = end.get(key, end.get("sum"))
    if not isinstance(value, dict) or not isinstance(value.get("bits_per_second"), int | float):
        raise ParseError("iperf3 -J", 1, f"no end.{key}.bits_per_second")
    return value


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _gbps(section: dict[str, Any]) -> float:
    return round(float(section["bits_per_second"]) / 1e9, 6)
