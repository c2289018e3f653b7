"""How often `gpunet localize` names the right cable: top-1, top-3 and false positives.

(a) Lab (root): the default example's 8 servers; --lab-trials trials with one random faulty cable
    (host-leaf or leaf-spine, compute or storage plane, among the cables the probes cover; loss
    0.5-5 %, nftables drops on both ends) and --lab-clean trials with none. Probing only: the
    lab's drops move no counter.
(b) Simulation: plans of 1 024 and 12 500 servers (plan_scale.spec_dict, 8 NDR rails each). The
    same probe flows `localize` would send (pairs across leaves, 12 source ports each), each given
    one equal-cost path as ECMP would (a random uplink at each tier, down only towards the
    destination), then per trial random faulty cables (single and double) with 0.5-5 % loss,
    binomial losses per flow, a healthy link's background loss of 1e-5 per packet, the targeted
    follow-up probes, and the same blame. "With counters": the faulty cables' ports also count
    errors (as a lossy link does, far above the threshold) and healthy ports the odd symbol error
    (below it); suspects are merged as `localize` merges them.

Top-1: the first named suspect is the faulty cable (double faults: the first two are both).
Top-3: it is among the first three suspects. False positive: a clean trial names a suspect.

--firewall loads gpunet's rendered nftables (render_nftables of the lab's plan) on every lab server
before the trials, as `apply` would; --icmp-ratelimit MS makes every lab switch rate-limit its ICMP
errors as a real switch does (the kernel's own net.ipv4.icmp_ratelimit, MS milliseconds a token
per destination, a burst of 6; icmp_msgs_per_sec 1000 and icmp_msgs_burst 50, the kernel's
defaults, switch-wide). The lab result then says how many hop answers were rate-limited.

    python benchmarks/localize_accuracy.py [--lab-trials 40 --lab-clean 10] [--sim-trials 100] [--no-lab]
        [--firewall] [--icmp-ratelimit 10]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

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
from gpunet.localize.probing import HopMap, ProbeSettings, endpoints, make_flows, pairs, trace_paths
from gpunet.localize.report import Suspect, merge, probing_suspect
from gpunet.localize.tomography import PathSample, blame, candidates
from gpunet.model.io import read_plan
from gpunet.model.plan import Link, Plan
from gpunet.reach import Reach
from gpunet.render.firewall import render_nftables
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec

BACKGROUND = 1e-5  # a healthy link's loss per packet
LOSS = (0.005, 0.05)
PLANE = "compute"
LAB = "la"
TIER_RANK = {"leaf": 0, "spine": 1, "core": 2}


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
    """Equal-cost (shortest up-then-down) paths through the plane's switch tiers: up, at random
    among the uplinks that lead to the destination leaf by the fewest hops, then down at random
    towards it (parallel cables chosen at random too)."""

    def __init__(self, plan: Plan) -> None:
        tier = {s.name: s.tier for s in plan.switches if s.plane == PLANE}
        self.up: dict[str, list[tuple[Link, str]]] = defaultdict(list)
        self.down: dict[str, list[tuple[Link, str]]] = defaultdict(list)
        for link in plan.links:
            if link.plane == PLANE and link.a.device in tier and link.b.device in tier:
                low, high = sorted((link.a.device, link.b.device), key=lambda d: TIER_RANK[tier[d]])
                self.up[low].append((link, high))
                self.down[high].append((link, low))
        by_rank = sorted(tier, key=lambda d: TIER_RANK[tier[d]])
        self.below: dict[str, frozenset[str]] = {}  # leaves reachable going down
        for switch in by_rank:
            self.below[switch] = frozenset({switch}) if tier[switch] == "leaf" else frozenset().union(
                *(self.below[low] for _, low in self.down[switch]))
        self.reach: dict[str, frozenset[str]] = {}  # leaves reachable going up, then down
        for switch in reversed(by_rank):
            self.reach[switch] = self.below[switch].union(*(self.reach[high] for _, high in self.up[switch]))

    def path(self, rng: random.Random, src: str, dst: str) -> list[Link]:
        here, links = src, []
        while dst not in self.below[here]:
            ups = self.up[here]
            direct = [(lk, high) for lk, high in ups if dst in self.below[high]]
            link, here = rng.choice(direct or [(lk, high) for lk, high in ups if dst in self.reach[high]])
            links.append(link)
        while here != dst:
            link, here = rng.choice([(lk, low) for lk, low in self.down[here] if dst in self.below[low]])
            links.append(link)
        return links


def simulated(servers: int, trials: int, rng: random.Random) -> dict[str, Any]:
    print(f"simulation: {servers} servers: design and paths ...", file=sys.stderr, flush=True)
    plan = design(build_spec(servers))
    settings = ProbeSettings()
    ecmp = Ecmp(plan)
    flows = make_flows(pairs(endpoints(plan, PLANE)), settings.flows_per_pair)
    paths = [tuple(cable_name(c) for c in [f.src.cable, *ecmp.path(rng, f.src.leaf, f.dst.leaf), f.dst.cable])
             for f in flows]
    through: dict[str, list[int]] = defaultdict(list)
    for index, path in enumerate(paths):
        for link in path:
            through[link].append(index)
    covered = sorted(through)
    result: dict[str, Any] = {"servers": servers, "flows": len(flows), "cables_covered": len(covered),
                              "cables": sum(1 for link in plan.links if link.plane == PLANE)}
    for mode, faults_per_trial in (("single", 1), ("double", 2)):
        alone, counted = Score(), Score()
        for trial in range(trials + (trials // 4 if mode == "single" else 0)):
            clean = mode == "single" and trial >= trials
            faults = {} if clean else {c: rng.uniform(*LOSS) for c in rng.sample(covered, faults_per_trial)}
            started = time.monotonic()
            probing = _probe_once(plan, paths, through, faults=faults, settings=settings, rng=rng)
            alone.seconds.append(time.monotonic() - started)
            alone.add(list(faults), probing)
            counted.add(list(faults), merge(probing, _counter_suspects(plan, faults, rng, covered)))
        result[mode] = {"probing": alone.summary(), "with_counters": counted.summary()}
        print(f"  {mode}: {result[mode]}", file=sys.stderr, flush=True)
    return result


def _losses(indexes: list[int], paths: list[tuple[str, ...]], through: dict[str, list[int]], *,
            faults: dict[str, float], packets: int, rng: random.Random) -> dict[int, int]:
    """Lost packets per flow: binomial through faulty links, background loss everywhere."""
    lost: dict[int, int] = defaultdict(int)
    wanted = set(indexes)
    for index in {i for link in faults for i in through[link]} & wanted:
        keep = math.prod(1 - faults.get(link, 0.0) for link in paths[index])
        lost[index] += _binomial(rng, packets, 1 - keep)
    strays = _poisson(rng, len(indexes) * packets * BACKGROUND * 5)  # ~5 links a path
    for _ in range(strays):
        lost[rng.choice(indexes)] += 1
    return lost


def _probe_once(plan: Plan, paths: list[tuple[str, ...]], through: dict[str, list[int]], *,
                faults: dict[str, float], settings: ProbeSettings, rng: random.Random) -> list[Suspect]:
    everyone = range(len(paths))
    lost = _losses(list(everyone), paths, through, faults=faults, packets=settings.packets, rng=rng)
    samples = [PathSample(paths[i], settings.packets, lost.get(i, 0)) for i in everyone]
    chosen = sorted({i for link in candidates(samples, settings.follow_up_links) for i in through[link]})
    more = settings.packets * settings.follow_up_factor
    again = _losses(chosen, paths, through, faults=faults, packets=more, rng=rng)
    samples += [PathSample(paths[i], more, again.get(i, 0), confirming=True) for i in chosen]
    return [probing_suspect(plan, PLANE, b) for b in blame(samples)]


def _counter_suspects(plan: Plan, faults: dict[str, float], rng: random.Random, covered: list[str]) -> list[Suspect]:
    """A lossy cable's port counts errors by the thousand; a few healthy ports count one or two."""
    found = [Suspect(cable=c, plane=PLANE, source="counters", confidence=0.95, evidence=(f"SymbolErrorCounter "
                     f"+{int(loss * 1e6)}",), fix="", named=True) for c, loss in faults.items()]
    for cable in rng.sample(covered, 3):
        if cable not in faults:
            found.append(Suspect(cable=cable, plane=PLANE, source="counters", confidence=0.01,
                                 evidence=("SymbolErrorCounter +1",), fix="", named=MIN_DAMAGE <= 1))
    return found


def _binomial(rng: random.Random, n: int, p: float) -> int:
    return sum(1 for _ in range(n) if rng.random() < p)


def _poisson(rng: random.Random, mean: float) -> int:
    if mean <= 0:
        return 0
    count, limit, product = 0, math.exp(-mean), rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab-trials", type=int, default=40)
    parser.add_argument("--lab-clean", type=int, default=10)
    parser.add_argument("--sim-trials", type=int, default=100, help="per size and mode (12 500: a fifth)")
    parser.add_argument("--sizes", default="1024,12500")
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
    for size in () if args.no_sim else (int(s) for s in args.sizes.split(",")):
        trials = args.sim_trials if size <= 2048 else max(10, args.sim_trials // 5)
        result["simulation"].append(simulated(size, trials, rng))
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
