"""What `gpunet localize` says: suspects ranked, each a Plan cable with its evidence, a
confidence and the fix; per plane, what was probed; notes on what could not be told."""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import StringConstraints

from gpunet.fabric.cabling import cable_name
from gpunet.localize.tomography import MIN_LLR, Blame
from gpunet.model.base import Frozen
from gpunet.model.plan import Link, Plan

# "probing", "counters", "path-mtu", or those that agree on a cable joined by "+" ("probing+counters")
Source = Annotated[str, StringConstraints(pattern=r"^(probing|counters|path-mtu)(\+(probing|counters|path-mtu))*$")]


class Suspect(Frozen):
    cable: str  # "comp-leaf001:33 comp-spine002:5", as in cabling.csv
    plane: str
    source: Source
    confidence: float  # 0-1
    loss: float | None = None  # the drop rate that explains the probes (probing)
    evidence: tuple[str, ...]
    fix: str
    named: bool = True  # False: a runner-up, listed for a look, not blamed


class PlaneSummary(Frozen):
    plane: str
    flows: int
    learned: int
    packets: int
    lost: int
    cables: int
    covered: int
    rate_limited: int = 0  # hop answers that came only on a paced retry (switches' ICMP rate limits)
    silent: int = 0  # flows with a hop silent through every try: left out, cannot tell


class LocalizeReport(Frozen):
    suspects: tuple[Suspect, ...]
    planes: tuple[PlaneSummary, ...] = ()
    notes: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def named(self) -> tuple[Suspect, ...]:
        return tuple(s for s in self.suspects if s.named)


def cable_fix(plan: Plan, cable: str) -> str:
    """Where to look, in the words of the cable's technology: an InfiniBand HCA's port counters are
    perfquery's, an Ethernet NIC's ethtool's."""
    a, b = cable.split(" ")
    servers = [end for end in (a, b) if plan.node(end.split(":")[0]) is not None]
    link = _planned(plan, cable)
    technology = next((p.technology for p in plan.planes if link is not None and p.name == link.plane), "ethernet")
    if servers and technology == "infiniband":
        node, port = servers[0].split(":", 1)
        return (f"check {node}'s HCA port counters for {port} (perfquery -x; ibqueryerrors names both ends) and "
                f"its optic, then reseat or replace the cable {a} <-> {b}; rerun to confirm")
    if servers:
        return (f"check {servers[0]}'s NIC counters (ethtool -S) and optic, then reseat or replace the cable "
                f"{a} <-> {b}; rerun to confirm")
    return f"reseat, then replace the cable {a} <-> {b} (both optics); rerun to confirm"


def _planned(plan: Plan, cable: str) -> Link | None:
    """The Plan's first cable of that name, looked up among its first end's cables (a 1M-GPU plan
    has millions); the whole plan only for a name whose end names no device."""
    device = cable.split(":", maxsplit=1)[0]
    return next((link for link in plan.links_at.get(device, ()) if cable_name(link) == cable),
                None) or next((link for link in plan.links if cable_name(link) == cable), None)


CONFIDENT_LLR = 20.0  # the log-likelihood at which a named cable reads 63 %; 60 reads 95 %


def probing_suspect(plan: Plan, plane: str, blame: Blame) -> Suspect:
    """Confidence from how strongly the probes through the cable alone make the case: a second,
    independent fault reads as sure as the first (its share of all losses is evidence, said, not
    a discount). A runner-up is described by what its losses are."""
    strength = 1 - math.exp(-blame.llr / CONFIDENT_LLR)
    confidence = strength / (1 + len(blame.tied_with))
    evidence = [f"{blame.lost} of {blame.sent} probe packets lost ({blame.loss:.2%}) on the {blame.flows} flows "
                f"through it; {blame.lossy_flows} of them lost packets"]
    if blame.taken:
        evidence.append(f"a fault here explains {blame.lost} of the lost packets ({blame.share:.0%} of all; "
                        f"log-likelihood {blame.llr:.0f}, 007 votes {blame.votes:.1f})")
    elif blame.covered_by:
        evidence.append(f"{blame.covered:.0%} of its flows' losses were on flows that also cross "
                        f"{', '.join(blame.covered_by)}, which explains them; listed for a look, not named")
    else:
        evidence.append(f"too few losses to name it (log-likelihood {blame.llr:.0f}, under {MIN_LLR:.0f}): "
                        "rerun with more --packets to tell")
    if blame.tied_with:
        evidence.append(f"no probe told it apart from {', '.join(blame.tied_with)}")
    if not blame.taken:  # listed for a look: at most half, less the part a named cable explains
        confidence = confidence * (1 - blame.covered) / 2
    return Suspect(cable=blame.link, plane=plane, source="probing", confidence=round(confidence, 3),
                   loss=round(blame.loss, 5), evidence=tuple(evidence), fix=cable_fix(plan, blame.link),
                   named=blame.taken)


def mtu_suspect(plane: str, cable: str, refusals: list[str], mtu: int) -> Suspect:
    """A hop that says it cannot send the plane's MTU into a cable is no statistical guess: the
    cable is named however few flows crossed it."""
    a, b = cable.split(" ")
    shown = refusals[:3] + ([f"... and {len(refusals) - 3} more flow(s)"] if len(refusals) > 3 else [])
    return Suspect(cable=cable, plane=plane, source="path-mtu", confidence=0.99, evidence=tuple(shown),
                   fix=f"set MTU {mtu} (the plane's) on both ends of the cable {a} <-> {b}: switch port and NIC; "
                   "rerun to confirm")


def merge(*lists: list[Suspect]) -> list[Suspect]:
    """One suspect per cable: where probing and counters agree, one entry with both evidences and
    the confidence that either is right; named first, most confident first."""
    by_cable: dict[str, list[Suspect]] = {}
    for suspects in lists:
        for s in suspects:
            by_cable.setdefault(s.cable, []).append(s)
    merged = []
    for group in by_cable.values():
        if len(group) == 1:
            merged.append(group[0])
            continue
        doubt = math.prod(1 - s.confidence for s in group)
        merged.append(group[0].model_copy(update={
            "source": "+".join(dict.fromkeys(s.source for s in group)), "confidence": round(1 - doubt, 3),
            "named": any(s.named for s in group),
            "fix": next((s.fix for s in group if s.source == "path-mtu"), group[0].fix),  # a certain cause first
            "evidence": tuple(e for s in group for e in s.evidence),
            "loss": next((s.loss for s in group if s.loss is not None), None)}))
    return sorted(merged, key=lambda s: (not s.named, -s.confidence))
