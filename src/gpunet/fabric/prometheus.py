"""A Prometheus HTTP API answer (/api/v1/query, an instant vector) of snmp_exporter's IF-MIB error
series, read as input: the JSON bounded (gpunet.files.inputs), then validated against typed models, so
a field missing or of the wrong type is a ParseError naming where, never a traceback and never a
count. A sample whose time is not a finite number within [now - max_age, now + FUTURE_SLACK_S]
is stale: left out and said (NaN compares false with everything, so "older than" alone let it
through, and a time in the future is no reading of now)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, StrictFloat, StrictInt, StrictStr, ValidationError

from gpunet.errors import ParseError
from gpunet.files.inputs import load_json
from gpunet.model.base import Frozen

TOOL = "prometheus"
IF_MIB = {"ifInErrors": "rx_errors", "ifInDiscards": "rx_dropped", "ifOutDiscards": "tx_dropped",
          "ifOutErrors": "tx_errors"}
FUTURE_SLACK_S = 60.0  # an instant query's samples carry the query's time; a minute covers clock steps


PORT_LABELS = ("ifName", "ifDescr")  # snmp_exporter's if_mib lookups that name the port itself
ALIAS_LABEL = "ifAlias"  # the port's description: often its far end ("gpu002:ens1"), a free text


class IfMibPort(Frozen):
    """One switch port's IF-MIB counters as Prometheus labels them: what may name the switch (the
    chosen label's value, then `instance` as scraped: a name, an address or address:port), what
    names the port (ifName, ifDescr: those present) and its description (ifAlias)."""

    switch_names: tuple[str, ...]
    port_names: tuple[str, ...]
    counters: dict[str, int]
    alias: str = ""

    @property
    def shown(self) -> str:
        return f"{self.switch_names[0]} {self.port_names[0] if self.port_names else self.alias}"


class _Typed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Series(_Typed):
    metric: dict[str, StrictStr]
    value: tuple[StrictFloat | StrictInt | StrictStr, StrictStr]  # [time, "number"]; the time may be "NaN"


class _Vector(_Typed):
    resultType: Literal["vector"]
    result: list[_Series]


class _Answer(_Typed):
    status: Literal["success"]
    data: _Vector


def parse_prometheus_vector(text: str, now: float, max_age_s: float = 300.0, label: str = "instance"
                            ) -> tuple[tuple[IfMibPort, ...], list[str]]:
    """Per port, the IF-MIB counters as counts, and notes on what was left out. The switch is named
    by `label` where a series has it, else by `instance`; which planned switch that is, is the
    caller's to say (localize.snmp)."""
    answer = _answer(load_json(text, TOOL))
    ports: dict[tuple[tuple[str, ...], tuple[str, ...], str], dict[str, int]] = {}
    stale: list[str] = []
    for series in answer.data.result:
        stamp, count = _time(series.value[0]), _count(series.value[1])  # every sample is one, named or not
        name = IF_MIB.get(series.metric.get("__name__", ""))
        switch = tuple(dict.fromkeys(v for v in (series.metric.get(label), series.metric.get("instance")) if v))
        port = tuple(dict.fromkeys(v for v in (series.metric.get(k) for k in PORT_LABELS) if v))
        alias = series.metric.get(ALIAS_LABEL, "")
        if name is None or not switch or not (port or alias):
            continue
        why = staleness(stamp, now, max_age_s)
        if why:
            stale.append(f"{host_of(switch[0])} {port[0] if port else alias} ({why})")
            continue
        ports.setdefault((switch, port, alias), {})[name] = count
    notes = [f"{len(stale)} stale series left out, e.g. {stale[0]}"] if stale else []
    return tuple(IfMibPort(switch_names=s, port_names=p, alias=a, counters=c) for (s, p, a), c in ports.items()), notes


def host_of(instance: str) -> str:
    """`instance` without a :port ("10.0.0.5:9116" -> "10.0.0.5", "[2001:db8::5]:161" -> the
    address); a bare IPv6 address or a name is itself."""
    if instance.startswith("["):
        return instance[1:].split("]", 1)[0]
    host, colon, port = instance.rpartition(":")
    return host if colon and port.isdigit() and ":" not in host else instance


def staleness(stamp: float, now: float, max_age_s: float) -> str:
    """Why a sample's time makes it no reading of `now` ("" when it is one)."""
    if not math.isfinite(stamp):
        return f"time {stamp}: not a time"
    if stamp > now + FUTURE_SLACK_S:
        return f"time {stamp - now:.0f} s in the future"
    if now - stamp > max_age_s:
        return f"older than {max_age_s:g} s"
    return ""


def _answer(document: object) -> _Answer:
    """The answer validated; a failed query says Prometheus' own reason."""
    if not isinstance(document, dict):
        raise ParseError(TOOL, 1, "the query did not succeed: not an object")
    if document.get("status") != "success":
        reason = document.get("error", "no status")
        raise ParseError(TOOL, 1, f"the query did not succeed: {str(reason)[:200]}")
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise ParseError(TOOL, 1, f"expected an instant vector, got {str(kind)[:40]!r}")
    try:
        return _Answer.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        what = "a sample that is not [time, \"number\"]" if "value" in first["loc"] else "a field of the wrong type"
        raise ParseError(TOOL, 1, f"{what} at {where}: {first['msg']}") from None


def _time(stamp: float | str) -> float:
    try:
        return float(stamp)
    except ValueError:
        raise ParseError(TOOL, 1, f"a sample that is not [time, \"number\"]: time {str(stamp)[:40]!r}") from None


def _count(text: str) -> int:
    """A sample's value as a count: finite, not negative, of bounded length."""
    try:
        number = float(text) if len(text) <= 64 else math.nan
    except ValueError:
        raise ParseError(TOOL, 1, f"a sample that is not [time, \"number\"]: value {text[:40]!r}") from None
    if not math.isfinite(number) or number < 0:  # NaN, infinite or negative: no count
        raise ParseError(TOOL, 1, f"a sample that is no count: {text[:40]!r}")
    return int(number)
