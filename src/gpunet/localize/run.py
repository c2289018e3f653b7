"""`gpunet localize` as one call: probe the lab's routed planes, blame cables, say what it saw."""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence

from gpunet.errors import UsageError
from gpunet.fabric.counters import EthPortErrors, parse_ibqueryerrors, parse_ip_link_stats
from gpunet.fabric.observed import End
from gpunet.fabric.prometheus import parse_prometheus_vector
from gpunet.inputs import read_stream, text_of
from gpunet.lab.build import COUNTERS_NOTE, LAB_PLAN, node_argv
from gpunet.lab.ibsim import run_tool, sim_plan
from gpunet.lab.state import LabState, lab_dir, read_state
from gpunet.localize.counters import counter_suspects, eth_counter_suspects
from gpunet.localize.probing import HopMap, PlaneProbe, ProbeSettings, probe_plane
from gpunet.localize.report import LocalizeReport, PlaneSummary, Suspect, merge, probing_suspect
from gpunet.localize.tomography import blame
from gpunet.model.io import read_plan
from gpunet.model.plan import Plan
from gpunet.runner import run_local


def lab_hop_map(state: LabState, plan: Plan) -> HopMap:
    """Every switch namespace's addresses: port addresses name (switch, port), others the switch."""
    ports: dict[str, End] = {}
    devices: dict[str, str] = {}
    switches = {s.name for s in plan.switches}
    for ns, lines in state.addresses.items():
        device = ns.removeprefix(f"gn{state.lab_id}-")
        if device not in switches:
            continue
        for line in lines:  # "addr add 198.18.4.5/31 dev p3"
            words = line.split()
            address, interface = words[2].split("/")[0], words[-1]
            devices[address] = device
            if interface.startswith("p") and interface[1:].isdigit():
                ports[address] = End(device, interface[1:])
    return HopMap(plan, ports, devices)


def routed_planes(plan: Plan, wanted: Sequence[str]) -> list[str]:
    """The planes asked for, or every plane with more than one tier of switches (ECMP paths)."""
    tiers: dict[str, int] = {c.plane: c.tiers for c in plan.capacity}
    unknown = [w for w in wanted if w not in tiers]
    if unknown:
        raise UsageError(f"no plane {', '.join(unknown)} in the plan ({', '.join(tiers)})")
    return list(wanted) or [plane for plane, n in tiers.items() if n > 1]


def localize_lab(lab_id: str, planes: Sequence[str] = (), settings: ProbeSettings | None = None) -> LocalizeReport:
    started = time.monotonic()
    state = read_state(lab_id)
    if state is None:
        raise UsageError(f"no lab {lab_id!r}; `gpunet lab up` builds one")
    plan = read_plan(lab_dir(lab_id) / LAB_PLAN)
    hop_map = lab_hop_map(state, plan)
    tiers: dict[str, int] = {c.plane: c.tiers for c in plan.capacity}
    before = lab_switch_counters(state, plan)
    probes = [probe_plane(plan, plane, lambda node, argv: node_argv(lab_id, node, argv), hop_map,
                          settings=settings or ProbeSettings(), max_hops=2 * tiers[plane])
              for plane in routed_planes(plan, planes)]
    counters = eth_counter_suspects(plan, before, lab_switch_counters(state, plan), time.monotonic() - started)
    return _report(plan, probes, [COUNTERS_NOTE, *counters.notes], time.monotonic() - started, counters.suspects)


def lab_switch_counters(state: LabState, plan: Plan) -> list[EthPortErrors]:
    """`ip -s -s -j link` in every switch namespace: its ports' counters, as a Linux switch OS shows them."""
    found: list[EthPortErrors] = []
    for switch in plan.switches:
        ns = f"gn{state.lab_id}-{switch.name}"
        if ns not in state.namespaces:
            continue
        done = run_local(["ip", "netns", "exec", ns, "ip", "-s", "-s", "-j", "link"], check=False, timeout=30)
        if done.returncode == 0:
            found += parse_ip_link_stats(done.stdout, switch.name)
    return found


def localize_prometheus(plan: Plan, url: str, window: float, now: float | None = None) -> LocalizeReport:
    """IF-MIB error counters as snmp_exporter exports them, from a Prometheus server's HTTP API:
    the values now and `window` seconds ago."""
    started = time.monotonic()
    at = time.time() if now is None else now
    after, stale = parse_prometheus_vector(prometheus_query(url, at), at)
    before, _ = parse_prometheus_vector(prometheus_query(url, at - window), at - window) if window else ((), [])
    reading = eth_counter_suspects(plan, before if window else None, after, window or None)
    return LocalizeReport(suspects=tuple(reading.suspects), seconds=round(time.monotonic() - started, 2),
                          notes=(f"switch port counters from Prometheus at {url}", *stale, *reading.notes))


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


def localize_ibsim(sim_id: str, before: str | None = None, window: float = 0.0) -> LocalizeReport:
    """ibqueryerrors on the simulated fabric: after `before` (a saved sample), or two samples
    `window` seconds apart, or one."""
    plan = sim_plan(sim_id)
    first = before
    if first is None and window > 0:
        first = _ibqueryerrors(sim_id)
        time.sleep(window)
    return localize_counters(plan, _ibqueryerrors(sim_id), first, window or None,
                             notes=[f"InfiniBand port counters from ibqueryerrors on ibsim {sim_id}"])


def _ibqueryerrors(sim_id: str) -> str:
    done = run_tool(sim_id, ["ibqueryerrors"], timeout=300)
    if "## Summary" not in done.stdout:  # it exits 1 when it found errors: the summary says it finished
        raise UsageError(f"ibqueryerrors in ibsim {sim_id} exited {done.returncode}: {done.stderr.strip()[:200]}")
    return done.stdout


def _report(plan: Plan, probes: list[PlaneProbe], notes: list[str], seconds: float,
            counted: Sequence[Suspect] = ()) -> LocalizeReport:
    suspects: list[Suspect] = []
    for probe in probes:
        suspects += [probing_suspect(plan, probe.plane, b) for b in blame(probe.samples)]
        notes += probe.notes
        uncovered = sorted(probe.cables - probe.covered)
        if uncovered:
            notes.append(f"{probe.plane}: {len(uncovered)} of {len(probe.cables)} cables carried no learned probe "
                         f"(e.g. {uncovered[0]}): a fault there cannot be seen by probing")
    ranked = merge(suspects, list(counted))
    summaries = tuple(PlaneSummary(plane=p.plane, flows=p.flows, learned=p.learned,
                                   packets=sum(s.sent for s in p.samples), lost=sum(s.lost for s in p.samples),
                                   cables=len(p.cables), covered=len(p.covered & p.cables)) for p in probes)
    return LocalizeReport(suspects=tuple(ranked), planes=summaries, notes=tuple(notes), seconds=round(seconds, 2))
