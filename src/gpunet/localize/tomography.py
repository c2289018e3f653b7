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
from collections.abc import Sequence
from dataclasses import dataclass

HEALTHY_LOSS = 1e-5  # what a healthy link drops: the noise floor the fit measures against
MIN_LLR = 12.0  # a healthy link explains the losses this well with odds below e**-12
# A sweep tests every link at once, so by chance some healthy link looks bad; where confirming
# probes were sent, a link is taken only if they alone also point at it (tested on few links).
CONFIRM_LLR = 8.0
RUNNERS_UP = 2  # suspects listed after those the fit took, for a look when the first is wrong


@dataclass(frozen=True)
class PathSample:
    """One probe flow: the links it crossed (cable names) and what it sent and lost."""

    links: tuple[str, ...]
    sent: int
    lost: int
    confirming: bool = False  # sent again, after the sweep, through the links it pointed at


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
    # A runner-up: the share of its flows' losses on flows that also cross a taken link (which
    # explains them), and those links.
    covered: float = 0.0
    covered_by: tuple[str, ...] = ()


def blame(samples: Sequence[PathSample], min_llr: float = MIN_LLR) -> list[Blame]:
    """Links ranked by how well a fault there explains the losses: the taken ones first."""
    tally = _Tally(samples)
    total_lost = sum(s.lost for s in samples) or 1
    first = scores = tally.scores()
    taken: list[Blame] = []
    while True:
        best = next((b for b in scores if b.llr >= min_llr and tally.confirmed(b.link)), None)
        if best is None:
            break
        tied = tuple(s.link for s in scores if s.link != best.link and _same_evidence(s, best))
        taken.append(_finish(best, True, tied, total_lost))
        tally.set_aside(best.link)
        scores = tally.scores()
    named = {t.link for t in taken} | {link for t in taken for link in t.tied_with}
    runners = [s for s in first if s.link not in named and s.llr > 0][:RUNNERS_UP]
    return taken + [_runner_up(_finish(s, False, (), total_lost), tally, named) for s in runners]


def _runner_up(score: Blame, tally: _Tally, named: set[str]) -> Blame:
    """What a runner-up's losses are: how much of them the taken links already explain (its lossy
    flows cross one of them too), so a person reads why it is only listed."""
    lossy = [tally.samples[i] for i in tally.lossy[score.link]]
    lost = sum(s.lost for s in lossy) or 1
    shared = [s for s in lossy if named & set(s.links)]
    by = sorted({link for s in shared for link in s.links if link in named})
    return Blame(**{**score.__dict__, "covered": sum(s.lost for s in shared) / lost, "covered_by": tuple(by)})


def candidates(samples: Sequence[PathSample], most: int) -> list[str]:
    """The links that best explain what was lost so far, for a closer look."""
    return [b.link for b in _Tally(samples).scores()][:most]


class _Tally:
    """Per link, what the flows through it sent and lost; flows set aside once explained. One pass
    over all flows, then work only on links that lost packets (a large fabric has 10^6 flows)."""

    def __init__(self, samples: Sequence[PathSample]) -> None:
        self.samples = samples
        self.sent: dict[str, int] = defaultdict(int)
        self.flows: dict[str, int] = defaultdict(int)
        self.lossy: dict[str, list[int]] = defaultdict(list)  # link -> indexes of its lossy flows
        self.through: dict[str, list[int]] = defaultdict(list)
        for index, sample in enumerate(samples):
            for link in set(sample.links):
                self.sent[link] += sample.sent
                self.flows[link] += 1
                self.through[link].append(index)
                if sample.lost:
                    self.lossy[link].append(index)
        self.aside: set[int] = set()
        self.confirming = any(s.confirming for s in samples)

    def confirmed(self, link: str) -> bool:
        """The confirming probes through the link alone make the case (true where none were sent)."""
        if not self.confirming:
            return True
        flows = [self.samples[i] for i in self.through[link] if self.samples[i].confirming and i not in self.aside]
        return log_likelihood_ratio(sum(f.lost for f in flows), sum(f.sent for f in flows)) >= CONFIRM_LLR

    def scores(self) -> list[Blame]:
        scored = [self._score(link) for link, lossy in self.lossy.items() if any(i not in self.aside for i in lossy)]
        return sorted(scored, key=lambda b: (-b.llr, -b.votes, b.link))

    def _score(self, link: str) -> Blame:
        lossy = [self.samples[i] for i in self.lossy[link] if i not in self.aside]
        lost = sum(s.lost for s in lossy)
        sent = self.sent[link]
        votes = sum(1 / len(set(s.links)) for s in lossy)
        return Blame(link=link, llr=log_likelihood_ratio(lost, sent), loss=lost / sent if sent else 0.0, lost=lost,
                     sent=sent, lossy_flows=len(lossy), flows=self.flows[link], votes=votes, taken=False)

    def set_aside(self, link: str) -> None:
        """The flows through `link` are explained: they no longer count for any link."""
        for index in self.through[link]:
            if index in self.aside:
                continue
            self.aside.add(index)
            sample = self.samples[index]
            for other in set(sample.links):
                self.sent[other] -= sample.sent
                self.flows[other] -= 1


def _finish(score: Blame, taken: bool, tied: tuple[str, ...], total_lost: int) -> Blame:
    return Blame(**{**score.__dict__, "taken": taken, "tied_with": tied, "share": score.lost / total_lost})


def _same_evidence(a: Blame, b: Blame) -> bool:
    return (a.sent, a.lost, a.flows, a.lossy_flows) == (b.sent, b.lost, b.flows, b.lossy_flows)


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
