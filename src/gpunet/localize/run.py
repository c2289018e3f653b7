"""`gpunet localize` as one call: probe a fabric's routed planes, or read its counters, blame
cables, say what it saw. Where the facts come from (a lab, a simulator, real nodes) is the
caller's `gpunet.reach`: these take a Plan and the callables that reach the machines."""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpunet.errors import CannotJudge, ParseError, UsageError
from gpunet.fabric.counters import EthPortErrors, parse_ibqueryerrors, parse_switch_counters
from gpunet.fabric.observed import End
from gpunet.fabric.prometheus import parse_prometheus_vector
from gpunet.files.inputs import read_stream, text_of
from gpunet.localize.counters import counter_suspects, eth_counter_suspects
from gpunet.localize.probing import HopMap, NodeCommand, PlaneProbe, ProbeSettings, probe_plane
from gpunet.localize.report import LocalizeReport, PlaneSummary, Suspect, merge, mtu_suspect, probing_suspect
from gpunet.localize.snmp import coverage, map_series
from gpunet.localize.tomography import blame
from gpunet.model.plan import Plan
from gpunet.model.switching import sonic_lanes


@dataclass(frozen=True)
class ProbeSite:
    """What probing a fabric needs from whoever reaches it: the Plan in the names and addresses of
    the machines probed, an argv on each node, where hop addresses sit (switch ports and switches),
    the switches' port counters and what the site itself wants said."""

    plan: Plan
    on_node: NodeCommand
    hop_ports: dict[str, tuple[str, str]]  # address -> (switch, port)
    hop_devices: dict[str, str]  # address -> switch
    switch_counters: Callable[[], list[EthPortErrors]]
    notes: tuple[str, ...] = ()

    def hop_map(self) -> HopMap:
        return HopMap(self.plan, {a: End(*end) for a, end in self.hop_ports.items()}, self.hop_devices)


def routed_planes(plan: Plan, wanted: Sequence[str]) -> list[str]:
    """The planes asked for, or every plane with more than one tier of switches (ECMP paths)."""
    tiers: dict[str, int] = {c.plane: c.tiers for c in plan.capacity}
    unknown = [w for w in wanted if w not in tiers]
    if unknown:
        raise UsageError(f"no plane {', '.join(unknown)} in the plan ({', '.join(tiers)})")
    return list(wanted) or [plane for plane, n in tiers.items() if n > 1]


def localize_probing(site: ProbeSite, planes: Sequence[str] = (), settings: ProbeSettings | None = None
                     ) -> LocalizeReport:
    """Every equal-cost path of the routed planes probed, the switches' counters read around it."""
    started = time.monotonic()
    plan, hop_map = site.plan, site.hop_map()
    tiers: dict[str, int] = {c.plane: c.tiers for c in plan.capacity}
    judged = routed_planes(plan, planes)
    before = on_planes(plan, site.switch_counters(), judged)
    probes = [probe_plane(plan, plane, site.on_node, hop_map, settings=settings or ProbeSettings(),
                          max_hops=2 * tiers[plane])
              for plane in judged]
    counters = eth_counter_suspects(plan, before, on_planes(plan, site.switch_counters(), judged),
                                    time.monotonic() - started)
    return _report(plan, probes, [*site.notes, *counters.notes], time.monotonic() - started, counters.suspects)


def on_planes(plan: Plan, ports: Sequence[EthPortErrors], planes: Sequence[str]) -> list[EthPortErrors]:
    """The ports of the switches of the planes judged: another plane's counters (a management
    switch's drops) are no evidence about these, and a note about them only confuses."""
    switches = {s.name for s in plan.switches if s.plane in planes}
    return [p for p in ports if p.device in switches]


def localize_prometheus(plan: Plan, url: str, window: float, now: float | None = None, label: str = "instance"
                        ) -> LocalizeReport:
    """IF-MIB error counters as snmp_exporter exports them, from a Prometheus server's HTTP API:
    the values now and `window` seconds ago, each series' switch named by `label` (else instance)."""
    started = time.monotonic()
    at = time.time() if now is None else now
    series, stale = parse_prometheus_vector(prometheus_query(url, at), at, label=label)
    after = map_series(plan, series)
    covered = coverage(plan, after, label)
    before = None
    if window:
        earlier, _ = parse_prometheus_vector(prometheus_query(url, at - window), at - window, label=label)
        before = map_series(plan, earlier).ports
        if not before:  # every count would be a total since the agent started, none a growth
            raise CannotJudge(f"no IF-MIB series of a planned switch {window:g} s ago: Prometheus had not scraped "
                              "the switches yet or keeps no history that old; give a shorter --window (or 0)")
    reading = eth_counter_suspects(plan, before, after.ports, window or None)
    return LocalizeReport(suspects=tuple(reading.suspects), seconds=round(time.monotonic() - started, 2),
                          notes=(f"switch port counters from Prometheus at {url}", *covered, *stale, *reading.notes))


# Any Linux NOS answers `ip -s -s -j link`; SONiC's own counters (the ASIC's, by front-panel port) are
# `portstat -j`, taken where the switch has it.
SWITCH_COUNTERS = ("sh", "-c", "if command -v portstat >/dev/null 2>&1; then exec portstat -j; fi; "
                   "exec ip -s -s -j link")


@dataclass(frozen=True)
class SwitchSample:
    """One reading of the switches' counters: what each printed, and why the others did not."""

    outputs: dict[str, str]
    failed: dict[str, str]


def switch_ports(plan: Plan, sample: SwitchSample) -> tuple[list[EthPortErrors], list[str]]:
    """The sample's ports (SONiC's by front-panel alias, its lanes from the planned speed); an
    output that is neither tool's is left out and said."""
    speeds = {s.name: s.port_gbps for s in plan.switches}
    ports: list[EthPortErrors] = []
    notes = []
    for switch, text in sorted(sample.outputs.items()):
        try:
            ports += parse_switch_counters(text, switch, sonic_lanes(speeds.get(switch, 1)))
        except ParseError as exc:
            notes.append(f"{switch}: its counters were not understood ({exc}): left out")
    return ports, notes


def localize_switches(plan: Plan, sample: Callable[[], SwitchSample], window: float, asked: int) -> LocalizeReport:
    """Switch port counters read from the switches themselves: two samples `window` seconds
    apart (or one), `asked` switches asked each time. None read is no verdict."""
    started = time.monotonic()
    first = sample() if window else None
    if window:
        time.sleep(window)
    last = sample()
    after, notes = switch_ports(plan, last)
    before = switch_ports(plan, first)[0] if first is not None else None
    read = sorted({p.device for p in after})
    if not read:
        why = "; ".join(f"{s}: {w}" for s, w in sorted(last.failed.items())[:3]) or "no switch answered"
        raise CannotJudge(f"no switch's port counters could be read over SSH ({why}): check --user/--key and that "
                          "the switches' management addresses in the plan answer SSH")
    reading = eth_counter_suspects(plan, before, after, window or None)
    failed = [f"{len(last.failed)} switch(es) not read: " + ", ".join(f"{s} ({w})" for s, w in
                                                                       sorted(last.failed.items())[:3])]
    return LocalizeReport(suspects=tuple(reading.suspects), seconds=round(time.monotonic() - started, 2),
                          notes=(f"switch port counters read over SSH from {len(read)} of {asked} switches",
                                 *(failed if last.failed else []), *notes, *reading.notes))


IF_MIB_QUERY = '{__name__=~"ifInErrors|ifOutErrors|ifInDiscards|ifOutDiscards"}'
MAX_ANSWER_BYTES = 64 * 2**20


def prometheus_query(url: str, at: float) -> str:
    """GET /api/v1/query at a time; http(s) only, bounded in time and size."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise UsageError(f"--prometheus {url!r}: an http:// or https:// address of a Prometheus server")
    query = urllib.parse.urlencode({"query": IF_MIB_QUERY, "time": f"{at:.3f}"})
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/query?{query}", timeout=30) as answer:
            body = read_stream(answer, MAX_ANSWER_BYTES, f"--prometheus {url}")
    except urllib.error.HTTPError as exc:
        body = read_stream(exc, MAX_ANSWER_BYTES, f"--prometheus {url}")  # Prometheus explains a bad query in JSON
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise UsageError(f"--prometheus {url}: {getattr(exc, 'reason', exc)}") from None
    return text_of(body, "prometheus")


def localize_counters(plan: Plan, after: str, before: str | None = None, seconds: float | None = None,
                      notes: Sequence[str] = ()) -> LocalizeReport:
    """From ibqueryerrors outputs: `after`, and `before` taken `seconds` earlier (or none)."""
    started = time.monotonic()
    reading = counter_suspects(plan, parse_ibqueryerrors(before) if before is not None else None,
                               parse_ibqueryerrors(after), seconds)
    return LocalizeReport(suspects=tuple(reading.suspects), notes=(*notes, *reading.notes),
                          seconds=round(time.monotonic() - started, 2))


def localize_infiniband(plan: Plan, read: Callable[[], str], before: str | None = None, window: float = 0.0,
                        source: str = "ibqueryerrors") -> LocalizeReport:
    """ibqueryerrors (`read` runs it) after `before` (a saved sample), or two samples `window`
    seconds apart, or one."""
    started = time.monotonic()
    first = before
    if first is None and window > 0:
        first = read()
        time.sleep(window)
    report = localize_counters(plan, read(), first, window or None,
                               notes=[f"InfiniBand port counters from ibqueryerrors on {source}"])
    return report.model_copy(update={"seconds": round(time.monotonic() - started, 2)})  # the window included


def _report(plan: Plan, probes: list[PlaneProbe], notes: list[str], seconds: float,
            counted: Sequence[Suspect] = ()) -> LocalizeReport:
    suspects: list[Suspect] = []
    for probe in probes:
        suspects += [probing_suspect(plan, probe.plane, b) for b in blame(probe.samples)]
        suspects += [mtu_suspect(probe.plane, cable, why, probe.mtu) for cable, why in probe.too_big.items()]
        notes += probe.notes
        uncovered = sorted(probe.cables - probe.covered)
        if uncovered:
            notes.append(f"{probe.plane}: {len(uncovered)} of {len(probe.cables)} cables carried no learned probe "
                         f"(e.g. {uncovered[0]}): a fault there cannot be seen by probing")
    ranked = merge(suspects, list(counted))
    summaries = tuple(PlaneSummary(plane=p.plane, flows=p.flows, learned=p.learned,
                                   packets=sum(s.sent for s in p.samples), lost=sum(s.lost for s in p.samples),
                                   cables=len(p.cables), covered=len(p.covered & p.cables),
                                   rate_limited=p.trace.retried, silent=p.trace.silent) for p in probes)
    return LocalizeReport(suspects=tuple(ranked), planes=summaries, notes=tuple(notes), seconds=round(seconds, 2))
