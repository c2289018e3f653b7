"""A sweep kept as numpy columns (tomography.Sweep, as a 1M-GPU fabric's 10^7 flows are) is
blamed exactly as the same flows given one object each: the same links, scores and ties."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gpunet.localize.tomography import NO_LINK, PathSample, Sweep, blame, candidates
from tests.localize.test_tomography import UPLINKS, flows


def _columns(samples: list[PathSample], links: list[str]) -> Sweep:
    """The samples as a caller with its own link ids builds them: padded to the longest path."""
    ids = {link: number for number, link in enumerate(links)}
    paths = np.full((len(samples), max(len(s.links) for s in samples)), NO_LINK, dtype=np.int32)
    for row, sample in enumerate(samples):
        paths[row, :len(sample.links)] = [ids[link] for link in sample.links]
    return Sweep(links, paths, np.array([s.sent for s in samples]), np.array([s.lost for s in samples]),
                 np.array([s.confirming for s in samples]))


def _confirming(rng: random.Random, sweep: list[PathSample], link: str, rate: float) -> list[PathSample]:
    return [PathSample(s.links, 240, sum(1 for _ in range(240) if rng.random() < rate), confirming=True)
            for s in sweep if link in s.links]


def test_columns_blame_as_the_objects_do() -> None:
    rng = random.Random(11)
    sweep = flows(rng, {UPLINKS[2]: 0.03, UPLINKS[5]: 0.02}, count=400)
    sweep[3] = PathSample(sweep[3].links[:2], 100, 7)  # a shorter path: padded with NO_LINK
    samples = sweep + _confirming(rng, sweep, UPLINKS[2], 0.03) + _confirming(rng, sweep, UPLINKS[5], 0.02)
    links = sorted({link for s in samples for link in s.links}, reverse=True)  # ids unlike Sweep.of's
    expected = blame(samples)
    assert {b.link for b in expected if b.taken} == {UPLINKS[2], UPLINKS[5]}
    assert blame(_columns(samples, links)) == expected
    assert candidates(_columns(sweep, links), 6) == candidates(sweep, 6)


def test_a_path_naming_a_link_twice_counts_it_once() -> None:
    twice = [PathSample(("a b", "c d", "a b"), 100, 10)] * 3 + [PathSample(("c d", "e f"), 100, 0)] * 3
    once = [PathSample(tuple(dict.fromkeys(s.links)), s.sent, s.lost) for s in twice]
    assert blame(_columns(twice, ["a b", "c d", "e f"])) == blame(once)


def test_follow_up_probes_join_a_sweep_that_names_links_by_the_same_ids() -> None:
    """As `localize` runs: candidates from the sweep, then the blame of the sweep and its follow-up
    probes, which adds their counts to the sweep's instead of counting every flow again."""
    rng = random.Random(12)
    sweep = flows(rng, {UPLINKS[1]: 0.02})
    sweep[0] = PathSample((*sweep[0].links, sweep[0].links[0]), 100, 3)  # a link named twice, counted once
    links = sorted({link for s in sweep for link in s.links})
    more = _confirming(rng, sweep, UPLINKS[1], 0.02)
    first = _columns(sweep, links)
    assert candidates(first, 6) == candidates(sweep, 6)
    for joined in (first.followed_by(_columns(more, links)), _columns(sweep, links).followed_by(_columns(more, links))):
        assert len(joined) == len(sweep) + len(more)
        assert blame(joined) == blame(sweep + more)
    with pytest.raises(ValueError, match="ids of the sweep it follows"):
        first.followed_by(_columns(more, list(links)))
