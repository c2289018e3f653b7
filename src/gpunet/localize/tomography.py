"""Which links lose packets, from flows whose paths are known and whose losses were counted: a
pure function (network tomography).

Two views of the same evidence, as in the papers that do this in production:
* NetBouncer-style fit: for each link, how much better "this link drops packets at rate r"
  explains every flow through it than "it drops none" (a log-likelihood ratio over binomial
  counts, r fitted). The best link is taken, the flows it explains set aside, and the next one
  looked for, until no link explains enough: that handles two faults at once.
* 007-style votes: each lossy flow gives one vote, split evenly over the links of its path.
Ranking is by the fit; votes are evidence and break ties."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

HEALTHY_LOSS = 1e-5  # what a healthy link drops: the noise floor the fit measures against
MIN_LLR = 12.0  # a healthy link explains the losses this well with odds below e**-12
RUNNERS_UP = 2  # suspects listed after those the fit took, for a look when the first is wrong


@dataclass(frozen=True)
class PathSample:
    """One probe flow: the links it crossed (cable names) and what it sent and lost."""

    links: tuple[str, ...]
    sent: int
    lost: int


@dataclass(frozen=True)
class Blame:
    link: str
    llr: float  # log-likelihood gain of "this link drops packets" over "it drops none"
    loss: float  # the drop rate that explains its flows best
    lost: int  # packets lost on flows through it
    sent: int
    lossy_flows: int
    flows: int
    votes: float  # 007: the lossy flows' votes it received
    taken: bool  # the fit took it (explains losses); False: a runner-up
    tied_with: tuple[str, ...] = ()  # links no flow told apart from it (same flows, same fit)
    share: float = 0.0  # of all lost packets, the share on flows through it


def blame(samples: Sequence[PathSample], min_llr: float = MIN_LLR) -> list[Blame]:
    """Links ranked by how well a fault there explains the losses: the taken ones first."""
    total_lost = sum(s.lost for s in samples) or 1
    remaining = list(samples)
    taken: list[Blame] = []
    while remaining:
        scores = _scores(remaining)
        if not scores or scores[0].llr < min_llr:
            break
        best = scores[0]
        tied = tuple(s.link for s in scores[1:] if _same_evidence(s, best))
        taken.append(_finish(best, True, tied, total_lost))
        remaining = [s for s in remaining if best.link not in s.links]
    runners = [s for s in _scores(samples) if s.link not in {t.link for t in taken}
               and not any(s.link in t.tied_with for t in taken) and s.llr > 0][:RUNNERS_UP]
    return taken + [_finish(s, False, (), total_lost) for s in runners]


def candidates(samples: Sequence[PathSample], most: int) -> list[str]:
    """The links that best explain what was lost so far, for a closer look."""
    return [b.link for b in _scores(samples) if b.lost][:most]


def _finish(score: Blame, taken: bool, tied: tuple[str, ...], total_lost: int) -> Blame:
    return Blame(**{**score.__dict__, "taken": taken, "tied_with": tied, "share": score.lost / total_lost})


def _same_evidence(a: Blame, b: Blame) -> bool:
    return (a.sent, a.lost, a.flows, a.lossy_flows) == (b.sent, b.lost, b.flows, b.lossy_flows)


def _scores(samples: Iterable[PathSample]) -> list[Blame]:
    through: dict[str, list[PathSample]] = defaultdict(list)
    votes: dict[str, float] = defaultdict(float)
    for sample in samples:
        for link in set(sample.links):
            through[link].append(sample)
            if sample.lost:
                votes[link] += 1 / len(set(sample.links))
    scored = [_score(link, flows, votes[link]) for link, flows in through.items()]
    return sorted(scored, key=lambda b: (-b.llr, -b.votes, b.link))


def _score(link: str, flows: list[PathSample], votes: float) -> Blame:
    sent = sum(f.sent for f in flows)
    lost = sum(f.lost for f in flows)
    rate = lost / sent if sent else 0.0
    return Blame(link=link, llr=log_likelihood_ratio(lost, sent), loss=rate, lost=lost, sent=sent,
                 lossy_flows=sum(1 for f in flows if f.lost), flows=len(flows), votes=votes, taken=False)


def log_likelihood_ratio(lost: int, sent: int, healthy: float = HEALTHY_LOSS) -> float:
    """Binomial: `lost` of `sent` at the fitted rate against at the healthy rate (0 when the
    fitted rate is no worse than healthy)."""
    if sent <= 0 or lost <= 0:
        return 0.0
    rate = min(lost / sent, 1 - 1e-12)
    if rate <= healthy:
        return 0.0
    kept = sent - lost
    return lost * math.log(rate / healthy) + kept * (math.log1p(-rate) - math.log1p(-healthy))
