"""How often `gpunet localize` names the right cable: top-1, top-3 and false positives.

(a) Lab (root): the default example's 8 servers; --lab-trials trials with one random faulty cable
    (host-leaf or leaf-spine, compute or storage plane, among the cables the probes cover; loss
    0.5-5 %, nftables drops on both ends) and --lab-clean trials with none. Probing only: the
    lab's drops move no counter.
(b) Simulation: plans of 1 024 and 12 500 servers (plan_scale.spec_dict, 8 NDR rails each);
    `--big` adds 125 000 (1M GPUs, plan_scale's spec at that size). The same probe flows
    `localize` would send (its pairs across leaves, its flows per pair, 12 source ports at these
    sizes), each given one equal-cost path as ECMP would (a random uplink at each tier among those
    that lead to the destination by the fewest hops, down only towards it), kept as numpy columns
    (12 million flows at 1M GPUs); then per trial random faulty cables (single and double) with
    0.5-5 % loss, binomial losses per flow, a healthy link's background loss of 1e-5 per packet,
    the targeted follow-up probes, and the same blame: `candidates`, `blame` and `probing_suspect`
    on a tomography.Sweep, the code `localize` runs on what its probes counted. "With counters":
    the faulty cables' ports also count errors (as a lossy link does, far above the threshold) and
    healthy ports the odd symbol error (below it); suspects are merged as `localize` merges them.
    Per size it prints the blame's time per run (the candidates, picking the follow-up flows,
    the blame and the suspects; the losses this script draws left out), wall clock and the
    process's CPU time (on a shared machine the wall clock counts others' load too), apart from
    the design's and the sweep's, with the process's peak RSS and the load average. Issue 31's
    target: at 1M GPUs, the blame < 60 s. Trials: --sim-trials at 1 024 servers, a fifth (at least
    10) at 12 500, --big-trials (4) at 125 000; a quarter as many clean trials as faulty.

Top-1: the first named suspect is the faulty cable (double faults: the first two are both).
Top-3: it is among the first three suspects. False positive: a clean trial names a suspect.

--firewall loads gpunet's rendered nftables (render_nftables of the lab's plan) on every lab server
before the trials, as `apply` would; --icmp-ratelimit MS makes every lab switch rate-limit its ICMP
errors as a real switch does (the kernel's own net.ipv4.icmp_ratelimit, MS milliseconds a token
per destination, a burst of 6; icmp_msgs_per_sec 1000 and icmp_msgs_burst 50, the kernel's
defaults, switch-wide). The lab result then says how many hop answers were rate-limited.

    python benchmarks/localize_accuracy.py [--lab-trials 40 --lab-clean 10] [--sim-trials 100] [--no-lab]
        [--firewall] [--icmp-ratelimit 10] [--sizes 1024,12500] [--big [--big-trials 4]]
    flock /tmp/gpunet-big.lock python benchmarks/localize_accuracy.py --no-lab --sizes 12500 --big
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from plan_scale import build_spec  # type: ignore[import-not-found]

from gpunet.api.fabric import LocalizeSource, localize
from gpunet.design import design
from gpunet.fabric.cabling import cable_name
from gpunet.fabric.observed import End
from gpunet.lab.access import device_runners
from gpunet.lab.build import LAB_PLAN, lab_down, lab_up, node_argv
from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.state import lab_dir, read_state
from gpunet.localize.counters import MIN_DAMAGE
from gpunet.localize.probing import (
    HopMap,
    ProbeSettings,
    endpoints,
    flows_per_pair,
    make_flows,
    pairs,
    trace_paths,
)
from gpunet.localize.report import Suspect, merge, probing_suspect
from gpunet.localize.tomography import NO_LINK, Sweep, blame, candidates
from gpunet.model.io import read_plan
from gpunet.model.plan import Plan
from gpunet.reach import Reach
from gpunet.render.firewall import render_nftables
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec

BACKGROUND = 1e-5  # a healthy link's loss per packet
LOSS = (0.005, 0.05)
PLANE = "compute"
LAB = "la"
TIER_RANK = {"leaf": 0, "spine": 1, "core": 2}
BIG_SERVERS = 125_000  # 1M GPUs
BIG_TARGET_S = 60.0  # issue 31: the blame over a 1M-GPU sweep


@dataclass
class Score:
    trials: int = 0
    top1: int = 0
    top3: int = 0
    clean: int = 0
    false_positive: int = 0
    seconds: list[float] = field(default_factory=list)

    def add(self, faults: list[str], suspects: list[Suspect]) -> None:
        named = [s.cable for s in suspects if s.named]
        if not faults:
            self.clean += 1
            self.false_positive += bool(named)
            return
        self.trials += 1
        self.top1 += set(named[:len(faults)]) == set(faults)
        self.top3 += set(faults) <= {s.cable for s in suspects[:3]}

    def summary(self) -> dict[str, Any]:
        return {"trials": self.trials, "top1": _pct(self.top1, self.trials), "top3": _pct(self.top3, self.trials),
                "clean_trials": self.clean, "false_positive": _pct(self.false_positive, self.clean),
                "median_s": round(sorted(self.seconds)[len(self.seconds) // 2], 2) if self.seconds else None}


def _pct(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


class Ecmp:
    """Equal-cost (shortest up-then-down) paths through the plane's switch tiers, for every flow at
    once: up, at random among the uplinks that lead to the destination leaf by the fewest hops,
    then down at random towards it (parallel cables chosen at random too). Which leaves are below
    a switch is kept as a label per tier (a Clos's pods), not a set per switch: a 1M-GPU plane's
    cores would each hold every leaf."""

    def __init__(self, plan: Plan, link_id: dict[tuple[str, str], int]) -> None:
        tier = {s.name: TIER_RANK[s.tier] for s in plan.switches if s.plane == PLANE}
        names = sorted(tier, key=lambda d: (tier[d], d))
        self.index = {name: i for i, name in enumerate(names)}
        self.tier = np.array([tier[n] for n in names], dtype=np.int8)
        self.top = int(self.tier.max())
        up: list[list[tuple[int, int]]] = [[] for _ in names]
        down: list[list[tuple[int, int]]] = [[] for _ in names]
        for link in plan.links:
            if link.plane == PLANE and link.a.device in tier and link.b.device in tier:
                low, high = sorted((link.a.device, link.b.device), key=lambda d: tier[d])
                number = link_id[link.a.device, link.a.port]
                up[self.index[low]].append((number, self.index[high]))
                down[self.index[high]].append((number, self.index[low]))
        self.up, self.down = _table(up), _table(down)
        self.pod = self._pods(down)
        pods = int(self.pod.max()) + 1
        self.covers = np.zeros((len(names), pods), dtype=np.bool_)  # switch x pod: the pod is below it
        for number in range(len(names)):  # lowest tier first: a switch covers what its downlinks cover
            if self.tier[number] == 1:
                self.covers[number, self.pod[down[number][0][1]]] = True
            for _, below in down[number] if self.tier[number] > 1 else ():
                self.covers[number] |= self.covers[below]
        self.reach = self.covers.copy()  # switch x pod: the pod is below it or below a switch above it
        for number in range(len(names) - 1, -1, -1):  # highest tier first
            for _, above in up[number]:
                self.reach[number] |= self.reach[above]

    def _pods(self, down: list[list[tuple[int, int]]]) -> NDArray[np.int64]:
        """Each leaf's pod: the leaves below the same switches of the tier above (a Clos splits
        its leaves so; the tiers above may cover any pods)."""
        pod = np.full(len(self.tier), -1)
        interned: dict[frozenset[int], int] = {}
        for number in np.flatnonzero(self.tier == 1).tolist():
            leaves = frozenset(low for _, low in down[number])
            pod[list(leaves)] = interned.setdefault(leaves, len(interned))
        if sum(len(leaves) for leaves in interned) != int((self.tier == 0).sum()):
            raise SystemExit("localize_accuracy's ECMP needs a Clos: each leaf below the spines of one pod")
        return pod

    def below(self, here: NDArray[np.int64], dst: NDArray[np.int64], level: int) -> NDArray[np.bool_]:
        """Whether each destination leaf is below its switch, all of tier `level` (a leaf: is it)."""
        found: NDArray[np.bool_] = here == dst if level == 0 else self.covers[here, self.pod[dst]]
        return found

    def paths(self, src_leaf: NDArray[np.int64], dst_leaf: NDArray[np.int64], rng: np.random.Generator,
              chunk: int = 100_000) -> NDArray[np.int32]:
        """Each flow's switch-to-switch links in order, as columns (NO_LINK past a shorter path)."""
        hops = np.full((len(src_leaf), 2 * self.top), NO_LINK, dtype=np.int32)
        for start in range(0, len(src_leaf), chunk):
            end = start + chunk
            hops[start:end] = self._chunk(src_leaf[start:end], dst_leaf[start:end], rng)
        return hops

    def _chunk(self, src: NDArray[np.int64], dst: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.int32]:
        hops = np.full((len(src), 2 * self.top), NO_LINK, dtype=np.int32)
        length = np.zeros(len(src), dtype=np.int64)
        here = src.copy()
        pod = self.pod[dst]
        for level in range(self.top):  # up while the destination is not below
            at = np.flatnonzero(self.tier[here] == level)
            going = at[~self.below(here[at], dst[at], level)]
            links, highs = self.up[0][here[going]], self.up[1][here[going]]
            valid = highs >= 0
            direct: NDArray[np.bool_] = valid & self.covers[highs, pod[going, None]]
            leads: NDArray[np.bool_] = valid & self.reach[highs, pod[going, None]]
            fewest = np.where(np.any(direct, axis=1)[:, None], direct, leads)
            self._step(hops, length, here, going, options=(links, highs), pick=_any_of(fewest, rng))
        for level in range(self.top, 0, -1):  # down towards it
            going = np.flatnonzero(self.tier[here] == level)
            links, lows = self.down[0][here[going]], self.down[1][here[going]]
            towards = (lows >= 0) & self.below(lows, dst[going, None], level - 1)
            self._step(hops, length, here, going, options=(links, lows), pick=_any_of(towards, rng))
        return hops

    @staticmethod
    def _step(hops: NDArray[np.int32], length: NDArray[np.int64], here: NDArray[np.int64], going: NDArray[np.intp], *,
              options: tuple[NDArray[np.int32], NDArray[np.int64]], pick: NDArray[np.int64]) -> None:
        """The flows `going` take their picked option: its link onto their paths, its far end."""
        rows = np.arange(len(going))
        hops[going, length[going]] = options[0][rows, pick]
        here[going] = options[1][rows, pick]
        length[going] += 1


def _table(rows: list[list[tuple[int, int]]]) -> tuple[NDArray[np.int32], NDArray[np.int64]]:
    """(link, neighbour) lists as two padded arrays, -1 past each row's end."""
    width = max((len(r) for r in rows), default=0)
    links = np.full((len(rows), width), -1, dtype=np.int32)
    ends = np.full((len(rows), width), -1, dtype=np.int64)
    for i, row in enumerate(rows):
        if row:
            links[i, :len(row)], ends[i, :len(row)] = zip(*row, strict=True)
    return links, ends


def _any_of(allowed: NDArray[np.bool_], rng: np.random.Generator) -> NDArray[np.int64]:
    """Per row, a uniformly random column among the allowed ones (every row has one)."""
    if not allowed.any(axis=1).all():
        raise SystemExit("localize_accuracy's ECMP found no equal-cost hop for a flow")
    keys = rng.random(allowed.shape, dtype=np.float32)
    keys[~allowed] = -1.0
    picked: NDArray[np.int64] = keys.argmax(axis=1)
    return picked


@dataclass
class Fabric:
    """A plane's simulated probe sweep: every flow `localize` would send, its path as link ids."""

    plan: Plan
    links: list[str]  # link id -> cable name
    paths: NDArray[np.int32]  # flow -> link ids (NO_LINK past a shorter path)
    covered: list[int]  # the link ids some flow crosses
    link_of: dict[str, int]  # cable name -> link id
    settings: ProbeSettings


def build_fabric(plan: Plan, rng: np.random.Generator) -> Fabric:
    """The flows of `localize`'s sweep (its pairs, its flows per pair), each given an ECMP path."""
    cables = [link for link in plan.links if link.plane == PLANE]
    link_id = {(link.a.device, link.a.port): number for number, link in enumerate(cables)}
    ecmp = Ecmp(plan, link_id)
    chosen = pairs(endpoints(plan, PLANE))
    settings = ProbeSettings(flows_per_pair=flows_per_pair(plan, PLANE, len(chosen), ProbeSettings().flows_per_pair))
    per_pair = settings.flows_per_pair  # make_flows: this many source ports a pair, one flow each

    def column(values: list[int], dtype: type) -> NDArray[Any]:
        return np.repeat(np.array(values, dtype=dtype), per_pair)

    src_cable = column([link_id[s.cable.a.device, s.cable.a.port] for s, _ in chosen], np.int32)
    dst_cable = column([link_id[d.cable.a.device, d.cable.a.port] for _, d in chosen], np.int32)
    src_leaf = column([ecmp.index[s.leaf] for s, _ in chosen], np.int64)
    dst_leaf = column([ecmp.index[d.leaf] for _, d in chosen], np.int64)
    del chosen
    hops = ecmp.paths(src_leaf, dst_leaf, rng)
    paths = np.full((len(hops), hops.shape[1] + 2), NO_LINK, dtype=np.int32)
    paths[:, 0] = src_cable
    paths[:, 1:-1] = hops
    paths[np.arange(len(paths)), 1 + (hops != NO_LINK).sum(axis=1)] = dst_cable
    crossed = np.bincount(paths[paths != NO_LINK], minlength=len(cables))
    names = [cable_name(link) for link in cables]
    return Fabric(plan, names, paths, np.flatnonzero(crossed).tolist(), {n: i for i, n in enumerate(names)}, settings)


def simulated(servers: int, trials: int, rng: random.Random) -> dict[str, Any]:
    print(f"simulation: {servers} servers: design and paths ...", file=sys.stderr, flush=True)
    numbers = np.random.default_rng(rng.getrandbits(64))
    wall, cpu = time.perf_counter(), time.process_time()
    plan = design(build_spec(servers))
    designed = {"design_s": round(time.perf_counter() - wall, 1), "design_cpu_s": round(time.process_time() - cpu, 1)}
    wall, cpu = time.perf_counter(), time.process_time()
    fabric = build_fabric(plan, numbers)
    result: dict[str, Any] = {"servers": servers, "flows": len(fabric.paths), "cables_covered": len(fabric.covered),
                              "cables": len(fabric.links), **designed,
                              "sweep_s": round(time.perf_counter() - wall, 1),
                              "sweep_cpu_s": round(time.process_time() - cpu, 1)}
    print(f"  {result}", file=sys.stderr, flush=True)
    blamed: list[tuple[float, float]] = []
    for mode, faults_per_trial in (("single", 1), ("double", 2)):
        alone, counted = Score(), Score()
        for trial in range(trials + (max(1, trials // 4) if mode == "single" else 0)):
            clean = mode == "single" and trial >= trials
            faults = {} if clean else {c: rng.uniform(*LOSS) for c in rng.sample(fabric.covered, faults_per_trial)}
            started = time.monotonic()
            probing, seconds = _probe_once(fabric, faults, numbers)
            alone.seconds.append(time.monotonic() - started)
            blamed.append(seconds)
            named = [fabric.links[c] for c in faults]
            alone.add(named, probing)
            counted.add(named, merge(probing, _counter_suspects(fabric, faults, rng)))
        result[mode] = {"probing": alone.summary(), "with_counters": counted.summary()}
        print(f"  {mode}: {result[mode]}", file=sys.stderr, flush=True)
    walls, cpus = sorted(w for w, _ in blamed), sorted(c for _, c in blamed)
    result["blame"] = {"runs": len(blamed), "median_s": round(walls[len(walls) // 2], 2), "max_s": round(walls[-1], 2),
                       "median_cpu_s": round(cpus[len(cpus) // 2], 2), "max_cpu_s": round(cpus[-1], 2),
                       "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
                       "load_average": [round(x, 1) for x in os.getloadavg()]}
    return result


def _losses(paths: NDArray[np.int32], faults: dict[int, float], packets: int, rng: np.random.Generator
            ) -> NDArray[np.int64]:
    """Lost packets per flow of `paths`: binomial through faulty links, background loss everywhere."""
    lost = np.zeros(len(paths), dtype=np.int64)
    hit = np.flatnonzero(np.isin(paths, list(faults)).any(axis=1)) if faults else np.zeros(0, dtype=np.intp)
    through = paths[hit]
    keep = np.ones(len(hit))
    for cable, loss in faults.items():
        keep *= np.where((through == cable).any(axis=1), 1 - loss, 1.0)
    lost[hit] = rng.binomial(packets, 1 - keep)
    strays = rng.poisson(len(paths) * packets * BACKGROUND * 5)  # ~5 links a path
    np.add.at(lost, rng.integers(0, len(paths), strays), 1)
    return lost


def _probe_once(fabric: Fabric, faults: dict[int, float], rng: np.random.Generator
                ) -> tuple[list[Suspect], tuple[float, float]]:
    """One `localize` run on the simulated plane: the sweep, the follow-up probes through the
    links that best explain its losses, the blame. Also the blame's own (wall, CPU) seconds: what
    `localize` computes once the probes are counted, the flows' losses drawn here left out."""
    settings, everyone = fabric.settings, len(fabric.paths)
    sweep = Sweep(fabric.links, fabric.paths, np.full(everyone, settings.packets, dtype=np.int64),
                  _losses(fabric.paths, faults, settings.packets, rng), np.zeros(everyone, dtype=np.bool_))
    wall, cpu = time.perf_counter(), time.process_time()
    suspects = candidates(sweep, settings.follow_up_links)
    ids = [fabric.link_of[name] for name in suspects]
    chosen = np.flatnonzero(np.isin(fabric.paths, ids).any(axis=1))
    spent = [time.perf_counter() - wall, time.process_time() - cpu]
    more = settings.packets * settings.follow_up_factor
    again = _losses(fabric.paths[chosen], faults, more, rng)
    wall, cpu = time.perf_counter(), time.process_time()
    follow = Sweep(fabric.links, fabric.paths[chosen], np.full(len(chosen), more, dtype=np.int64), again,
                   np.ones(len(chosen), dtype=np.bool_))
    named = [probing_suspect(fabric.plan, PLANE, b) for b in blame(sweep.followed_by(follow))]
    return named, (spent[0] + time.perf_counter() - wall, spent[1] + time.process_time() - cpu)


def _counter_suspects(fabric: Fabric, faults: dict[int, float], rng: random.Random) -> list[Suspect]:
    """A lossy cable's port counts errors by the thousand; a few healthy ports count one or two."""
    found = [Suspect(cable=fabric.links[c], plane=PLANE, source="counters", confidence=0.95,
                     evidence=(f"SymbolErrorCounter +{int(loss * 1e6)}",), fix="", named=True)
             for c, loss in faults.items()]
    for cable in rng.sample(fabric.covered, 3):
        if cable not in faults:
            found.append(Suspect(cable=fabric.links[cable], plane=PLANE, source="counters", confidence=0.01,
                                 evidence=("SymbolErrorCounter +1",), fix="", named=MIN_DAMAGE <= 1))
    return found


@dataclass(frozen=True)
class LabSetting:
    firewall: bool = False  # gpunet's rendered nftables on every server
    icmp_ratelimit_ms: int = 0  # 0: the lab's own (no limit)


def harden(lab: str, plan: Plan, setting: LabSetting) -> None:
    """The lab as a real cluster would be: gpunet's firewall on the servers, ICMP rate limits on
    the switches."""
    if setting.firewall:
        for node in plan.nodes:
            done = subprocess.run(node_argv(lab, node.name, ["nft", "-f", "-"]), input=render_nftables(plan, node),
                                  capture_output=True, text=True, timeout=60, check=False)
            if done.returncode != 0:
                raise SystemExit(f"the rendered firewall did not load on {node.name}: {done.stderr.strip()[:300]}")
    if setting.icmp_ratelimit_ms:
        state = read_state(lab)
        assert state is not None
        limits = {"net.ipv4.icmp_ratelimit": str(setting.icmp_ratelimit_ms), "net.ipv4.icmp_msgs_per_sec": "1000",
                  "net.ipv4.icmp_msgs_burst": "50"}
        for switch in plan.switches:
            run = device_runners(state).get(switch.name)
            if run is not None:
                run(["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in limits.items())], 30)


def in_the_lab(trials: int, clean: int, rng: random.Random, setting: LabSetting) -> dict[str, Any]:
    lab = LAB
    score = Score()
    limited = 0
    lab_up(design(parse_spec(example_text("scalable-unit"))[0]), lab, max_nodes=8)
    try:
        plan = read_plan(lab_dir(lab) / LAB_PLAN)
        harden(lab, plan, setting)
        probed = _covered(plan, "compute") | _covered(plan, "storage")
        pool = [link for link in plan.links if link.plane in ("compute", "storage")
                and link.tier in ("node_leaf", "leaf_spine") and cable_name(link) in probed]
        schedule = [rng.choice(pool) for _ in range(trials)] + [None] * clean
        for number, link in enumerate(schedule, 1):
            loss = round(rng.uniform(*LOSS) * 100, 2)
            if link is not None:
                apply_fault(lab, f"{link.a.device}:{link.a.port}", "loss", str(loss))
            started = time.monotonic()
            report = localize(LocalizeSource(lab=lab))
            score.seconds.append(time.monotonic() - started)
            limited += sum(p.rate_limited for p in report.planes)
            score.add([cable_name(link)] if link else [], list(report.suspects))
            heal(lab)
            what = f"{cable_name(link)} at {loss} %" if link else "no fault"
            print(f"  lab trial {number}/{len(schedule)}: {what} -> {[s.cable for s in report.named][:2]}",
                  file=sys.stderr, flush=True)
    finally:
        lab_down(lab)
    return score.summary() | {"pool": len(pool), "firewall": setting.firewall,
                              "icmp_ratelimit_ms": setting.icmp_ratelimit_ms, "hop_answers_rate_limited": limited}


def _covered(plan: Plan, plane: str) -> set[str]:
    """Cables the probes cover (a trace, no packets counted): faults go only where probing can see."""
    ports, devices = Reach.of_lab(LAB).hop_addresses()
    hop_map = HopMap(plan, {a: End(*end) for a, end in ports.items()}, devices)
    flows = make_flows(pairs(endpoints(plan, plane)), ProbeSettings().flows_per_pair)
    tiers = {c.plane: c.tiers for c in plan.capacity}
    paths = trace_paths(lambda node, argv: node_argv(LAB, node, argv), flows, hop_map, 2 * tiers[plane])
    return {cable for path in paths.values() for cable in path}


def _trials(servers: int, args: argparse.Namespace) -> int:
    if servers >= BIG_SERVERS:
        return int(args.big_trials)
    return int(args.sim_trials) if servers <= 2048 else max(10, args.sim_trials // 5)


def _timing(sim: dict[str, Any]) -> str:
    b = sim["blame"]
    line = (f"simulation {sim['servers']:>6} servers: {sim['flows']} flows; blame (candidates, follow-up pick, blame, "
            f"suspects) median {b['median_s']} s wall ({b['median_cpu_s']} s CPU), max {b['max_s']} s "
            f"({b['max_cpu_s']} s CPU) over {b['runs']} runs; design {sim['design_s']} s ({sim['design_cpu_s']} s "
            f"CPU) and sweep {sim['sweep_s']} s ({sim['sweep_cpu_s']} s CPU) not counted; peak RSS "
            f"{b['peak_rss_gb']} GB; load average {b['load_average']}")
    if sim["servers"] >= BIG_SERVERS:
        line += f"\ntarget: 1M-GPU blame < {BIG_TARGET_S:g} s: {'met' if b['max_s'] < BIG_TARGET_S else 'MISSED'}"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab-trials", type=int, default=40)
    parser.add_argument("--lab-clean", type=int, default=10)
    parser.add_argument("--sim-trials", type=int, default=100, help="per size and mode (12 500: a fifth)")
    parser.add_argument("--sizes", default="1024,12500", help="servers, comma-separated")
    parser.add_argument("--big", action="store_true", help=f"add {BIG_SERVERS} servers (1M GPUs: minutes, ~6 GB)")
    parser.add_argument("--big-trials", type=int, default=4, help=f"per mode at {BIG_SERVERS} servers")
    parser.add_argument("--no-lab", action="store_true")
    parser.add_argument("--no-sim", action="store_true", help="skip the simulation part")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--firewall", action="store_true", help="gpunet's rendered nftables on every lab server")
    parser.add_argument("--icmp-ratelimit", type=int, default=0, metavar="MS",
                        help="lab switches rate-limit ICMP errors: MS milliseconds a token per destination (10: 100/s)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    result: dict[str, Any] = {"simulation": []}
    sizes = [int(s) for s in args.sizes.split(",")]
    sizes += [BIG_SERVERS] if args.big and BIG_SERVERS not in sizes else []
    for size in () if args.no_sim else sizes:
        result["simulation"].append(simulated(size, _trials(size, args), rng))
    if args.no_lab or os.geteuid() != 0:
        result["lab"] = {"skipped": "--no-lab" if args.no_lab else "needs root"}
    else:
        result["lab"] = in_the_lab(args.lab_trials, args.lab_clean, rng, LabSetting(args.firewall, args.icmp_ratelimit))
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for sim in result["simulation"]:
        for mode in ("single", "double"):
            for source in ("probing", "with_counters"):
                s = sim[mode][source]
                fp = (f", false positives {s['false_positive']} % of {s['clean_trials']} clean" if s["clean_trials"]
                      else "")
                print(f"simulation {sim['servers']:>6} servers, {mode}, {source:>13}: top-1 {s['top1']} %, "
                      f"top-3 {s['top3']} % of {s['trials']}{fp}")
        print(_timing(sim))
    lab = result["lab"]
    if "skipped" in lab:
        print(f"lab: skipped ({lab['skipped']})")
    else:
        print(f"lab, probing: top-1 {lab['top1']} %, top-3 {lab['top3']} % of {lab['trials']}, false positives "
              f"{lab['false_positive']} % of {lab['clean_trials']} clean; median {lab['median_s']} s a run; "
              f"firewall {'on' if lab['firewall'] else 'off'}, ICMP rate limit "
              f"{lab['icmp_ratelimit_ms'] or 'none'} ms, {lab['hop_answers_rate_limited']} hop answers rate-limited")


if __name__ == "__main__":
    main()
