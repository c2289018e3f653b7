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
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

HEALTHY_LOSS = 1e-5  # what a healthy link drops: the noise floor the fit measures against
MIN_LLR = 12.0  # a healthy link explains the losses this well with odds below e**-12
# A sweep tests every link at once, so by chance some healthy link looks bad; where confirming
# probes were sent, a link is taken only if they alone also point at it (tested on few links).
CONFIRM_LLR = 8.0
RUNNERS_UP = 2  # suspects listed after those the fit took, for a look when the first is wrong
NO_LINK = -1  # pads a path shorter than the longest in a Sweep


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


@dataclass(frozen=True, eq=False)
class Sweep:
    """Many probe flows as columns, as a large fabric's sweep is kept (10^7 flows at 1M GPUs, where
    an object a flow would not fit): row i is one flow, `paths[i]` the ids of the links it crossed
    (indexes into `links`, NO_LINK padding a shorter path), then what it sent and lost."""

    links: Sequence[str]  # link id -> cable name
    paths: NDArray[np.int32]  # (flows, most hops)
    sent: NDArray[np.int64]
    lost: NDArray[np.int64]
    confirming: NDArray[np.bool_]

    @classmethod
    def of(cls, samples: Sequence[PathSample]) -> Sweep:
        ids: dict[str, int] = {}
        paths = np.full((len(samples), max((len(s.links) for s in samples), default=0)), NO_LINK, dtype=np.int32)
        for row, sample in enumerate(samples):
            paths[row, :len(sample.links)] = [ids.setdefault(link, len(ids)) for link in sample.links]
        return cls(list(ids), paths, np.array([s.sent for s in samples], dtype=np.int64),
                   np.array([s.lost for s in samples], dtype=np.int64),
                   np.array([s.confirming for s in samples], dtype=np.bool_))

    def __len__(self) -> int:
        return len(self.sent)

    def sample(self, row: int) -> PathSample:
        return PathSample(tuple(self.links[i] for i in self.paths[row].tolist() if i != NO_LINK),
                          int(self.sent[row]), int(self.lost[row]), bool(self.confirming[row]))

    @cached_property
    def distinct(self) -> NDArray[np.int32]:
        """`paths` with each row's links once (the array itself where no row repeats one)."""
        return _distinct(self.paths)

    @cached_property
    def widths(self) -> NDArray[np.int64]:
        """Per flow, how many links it crossed (each once)."""
        return np.asarray((self.distinct != NO_LINK).sum(axis=1), dtype=np.int64)

    @cached_property
    def totals(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """Per link id, the packets sent on the flows through it, how many flows, and their
        exposure (packets times links crossed: what healthy links drop of them grows with it):
        kept, so the blame after the follow-up probes adds only theirs to the sweep's."""
        count = len(self.links)
        sent = np.zeros(count, dtype=np.int64)
        flows = np.zeros(count, dtype=np.int64)
        exposure = np.zeros(count, dtype=np.int64)
        weights = self.sent.astype(np.float64)  # exact: bincount sums floats, far below 2**53 packets a link
        exposed = (self.sent * self.widths).astype(np.float64)
        for column in self.distinct.T:
            shifted = column.astype(np.intp) + 1  # NO_LINK counts in bin 0, left out: faster than masking it
            sent += np.bincount(shifted, weights=weights, minlength=count + 1)[1:].astype(np.int64)
            flows += np.bincount(shifted, minlength=count + 1)[1:]
            exposure += np.bincount(shifted, weights=exposed, minlength=count + 1)[1:].astype(np.int64)
        return sent, flows, exposure

    def followed_by(self, more: Sweep) -> Sweep:
        """This sweep's flows, then `more`'s (the follow-up probes, naming links by the same ids);
        what this one has already counted is carried over, not counted again."""
        if more.links is not self.links:
            raise ValueError("a follow-up sweep names its links by the ids of the sweep it follows")
        width = max(self.paths.shape[1], more.paths.shape[1])
        joined = Sweep(self.links, np.concatenate([_padded(self.paths, width), _padded(more.paths, width)]),
                       np.concatenate([self.sent, more.sent]), np.concatenate([self.lost, more.lost]),
                       np.concatenate([self.confirming, more.confirming]))
        if "distinct" in self.__dict__:  # cached_property's own slot: set as it would set it
            unchanged = self.distinct is self.paths and more.distinct is more.paths
            joined.__dict__["distinct"] = joined.paths if unchanged else np.concatenate(
                [_padded(self.distinct, width), _padded(more.distinct, width)])
        if "totals" in self.__dict__:
            joined.__dict__["totals"] = tuple(mine + theirs for mine, theirs in zip(self.totals, more.totals,
                                                                                      strict=True))
        return joined


def _padded(paths: NDArray[np.int32], width: int) -> NDArray[np.int32]:
    if paths.shape[1] == width:
        return paths
    return np.pad(paths, ((0, 0), (0, width - paths.shape[1])), constant_values=NO_LINK)


def _distinct(paths: NDArray[np.int32]) -> NDArray[np.int32]:
    """Each row's links once (a flow counts once for a link its path names twice), NO_LINK where
    repeated; the array itself where no row repeats a link (a real path never does)."""
    repeated = np.zeros(paths.shape, dtype=np.bool_)
    for column in range(1, paths.shape[1]):
        for earlier in range(column):
            repeated[:, column] |= paths[:, column] == paths[:, earlier]
    repeated &= paths != NO_LINK
    if not repeated.any():
        return paths
    return np.where(repeated, NO_LINK, paths).astype(np.int32)


def _as_sweep(samples: Sequence[PathSample] | Sweep) -> Sweep:
    return samples if isinstance(samples, Sweep) else Sweep.of(samples)


def blame(samples: Sequence[PathSample] | Sweep, min_llr: float = MIN_LLR) -> list[Blame]:
    """Links ranked by how well a fault there explains the losses: the taken ones first."""
    tally = _Tally(_as_sweep(samples))
    total_lost = int(tally.sweep.lost.sum()) or 1
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
    lossy = [tally.sweep.sample(i) for i in tally.lossy[tally.id_of[score.link]]]
    lost = sum(s.lost for s in lossy) or 1
    shared = [s for s in lossy if named & set(s.links)]
    by = sorted({link for s in shared for link in s.links if link in named})
    return Blame(**{**score.__dict__, "covered": sum(s.lost for s in shared) / lost, "covered_by": tuple(by)})


def candidates(samples: Sequence[PathSample] | Sweep, most: int) -> list[str]:
    """The links that best explain what was lost so far, for a closer look."""
    return [b.link for b in _Tally(_as_sweep(samples)).scores()][:most]


class _Tally:
    """Per link, what the flows through it sent and lost; flows set aside once explained. The
    totals over every flow are array sums (a large fabric has 10^7 flows); the rest works only on
    the flows that lost packets or confirm, a few in 10^4 of a large sweep."""

    def __init__(self, sweep: Sweep) -> None:
        self.sweep = sweep
        self.paths = sweep.distinct
        self.sent, self.flows, self.exposure = (total.copy() for total in sweep.totals)  # set_aside takes from these
        self.width: dict[int, int] = {}  # lossy or confirming flow -> how many links it crossed
        self.lost_on: dict[int, int] = {}  # lossy or confirming flow -> packets it lost
        self.lossy = self._through(np.flatnonzero(sweep.lost > 0))  # link id -> its lossy flows, in order
        self.confirming_through = self._through(np.flatnonzero(sweep.confirming))
        self.id_of = {sweep.links[link]: link for link in self.lossy}  # every link a score names
        self.aside: set[int] = set()
        self.confirming = bool(sweep.confirming.any())
        self.scored: dict[int, Blame] = {}  # link id -> its score, until flows set aside change it
        self.stale: set[int] = set(self.lossy)

    def _through(self, rows: NDArray[np.intp]) -> dict[int, list[int]]:
        through: dict[int, list[int]] = defaultdict(list)
        for row, links, lost in zip(rows.tolist(), self.paths[rows].tolist(), self.sweep.lost[rows].tolist(),
                                    strict=True):
            crossed = [link for link in links if link != NO_LINK]
            self.width[row] = len(crossed)
            self.lost_on[row] = lost
            for link in crossed:
                through[link].append(row)
        return through

    def confirmed(self, link: str) -> bool:
        """The confirming probes through the link alone make the case (true where none were sent)."""
        if not self.confirming:
            return True
        rows = [i for i in self.confirming_through.get(self.id_of[link], ()) if i not in self.aside]
        lost = sum(self.lost_on[i] for i in rows)
        sent = int(self.sweep.sent[rows].sum())
        exposure = int((self.sweep.sent[rows] * self.sweep.widths[rows]).sum())
        return log_likelihood_ratio(lost, sent, path_healthy(sent, exposure)) >= CONFIRM_LLR

    def scores(self) -> list[Blame]:
        """Every link some lossy flow not yet explained crossed, best first; only the links whose
        flows were set aside since the last call scored again."""
        for link in self.stale:
            lossy = [i for i in self.lossy.get(link, ()) if i not in self.aside]
            if lossy:
                self.scored[link] = self._score(link, lossy)
            else:
                self.scored.pop(link, None)
        self.stale = set()
        return sorted(self.scored.values(), key=lambda b: (-b.llr, -b.votes, b.link))

    def _score(self, link: int, lossy: list[int]) -> Blame:
        lost = sum(self.lost_on[i] for i in lossy)
        sent = int(self.sent[link])
        votes = sum(1 / self.width[i] for i in lossy)
        healthy = path_healthy(sent, int(self.exposure[link]))
        return Blame(link=self.sweep.links[link], llr=log_likelihood_ratio(lost, sent, healthy),
                     loss=lost / sent if sent else 0.0, lost=lost, sent=sent, lossy_flows=len(lossy),
                     flows=int(self.flows[link]), votes=votes, taken=False)

    def set_aside(self, link: str) -> None:
        """The flows through `link` are explained: they no longer count for any link."""
        through = np.flatnonzero((self.paths == self.id_of[link]).any(axis=1))
        rows = [i for i in through.tolist() if i not in self.aside]
        self.aside.update(rows)
        crossed = self.paths[rows]
        self.stale.update(crossed[crossed != NO_LINK].tolist())
        for column in crossed.T:
            real = column != NO_LINK
            np.subtract.at(self.sent, column[real], self.sweep.sent[rows][real])
            np.subtract.at(self.flows, column[real], 1)
            np.subtract.at(self.exposure, column[real], (self.sweep.sent[rows] * self.sweep.widths[rows])[real])


def _finish(score: Blame, taken: bool, tied: tuple[str, ...], total_lost: int) -> Blame:
    return Blame(**{**score.__dict__, "taken": taken, "tied_with": tied, "share": score.lost / total_lost})


def _same_evidence(a: Blame, b: Blame) -> bool:
    return (a.sent, a.lost, a.flows, a.lossy_flows) == (b.sent, b.lost, b.flows, b.lossy_flows)


def path_healthy(sent: int, exposure: int) -> float:
    """What the flows through a link lose with every link healthy: each crosses several, each
    dropping HEALTHY_LOSS, so the null rate is that times the links crossed, packet-weighted. Held
    against one link's rate instead, every busy healthy link looked lossy (a 1M-GPU fabric's core
    cables, 144 probe flows each, were named in 2 of 5 clean trials)."""
    return HEALTHY_LOSS * exposure / sent if sent > 0 and exposure > 0 else HEALTHY_LOSS


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
