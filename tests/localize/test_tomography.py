"""Link blame from flows with known paths: the fault that explains the losses ranks first, two
faults are both taken, a clean fabric names nothing, links no flow tells apart are said tied."""

from __future__ import annotations

import random

from gpunet.localize.tomography import MIN_LLR, PathSample, blame, candidates, log_likelihood_ratio

UPLINKS = [f"leaf1:{p} spine{1 + p % 2}:{p}" for p in range(33, 41)]
DOWNLINKS = [f"spine{1 + p % 2}:{p + 10} leaf2:{p}" for p in range(33, 41)]


def flows(rng: random.Random, faults: dict[str, float], count: int = 200, packets: int = 100) -> list[PathSample]:
    """Flows from four NICs under leaf1 to four under leaf2, each over a random uplink and downlink;
    each packet lost on each faulty link with its rate."""
    found = []
    for _ in range(count):
        path = (f"gpu{rng.randrange(4)}:ib0 leaf1:{rng.randrange(4)}", rng.choice(UPLINKS), rng.choice(DOWNLINKS),
                f"leaf2:{rng.randrange(4)} gpu{4 + rng.randrange(4)}:ib0")
        keep = 1.0
        for link in path:
            keep *= 1 - faults.get(link, 0.0)
        lost = sum(1 for _ in range(packets) if rng.random() > keep)
        found.append(PathSample(path, packets, lost))
    return found


def test_the_faulty_uplink_ranks_first_and_alone() -> None:
    ranked = blame(flows(random.Random(1), {UPLINKS[3]: 0.03}))
    assert ranked[0].link == UPLINKS[3] and ranked[0].taken
    assert [b.link for b in ranked if b.taken] == [UPLINKS[3]]
    assert 0.02 < ranked[0].loss < 0.04 and ranked[0].share == 1.0


def test_half_a_percent_is_still_found_with_enough_packets() -> None:
    ranked = blame(flows(random.Random(2), {DOWNLINKS[5]: 0.005}, packets=400))
    assert [b.link for b in ranked if b.taken] == [DOWNLINKS[5]]


def test_two_faults_at_once_are_both_taken() -> None:
    ranked = blame(flows(random.Random(3), {UPLINKS[0]: 0.03, DOWNLINKS[6]: 0.02}, count=400))
    assert {b.link for b in ranked if b.taken} == {UPLINKS[0], DOWNLINKS[6]}


def test_a_clean_fabric_names_nothing() -> None:
    ranked = blame(flows(random.Random(4), {}))
    assert ranked == []


def test_a_stray_lost_packet_is_not_a_suspect() -> None:
    samples = flows(random.Random(5), {})
    samples[7] = PathSample(samples[7].links, 100, 1)
    assert not [b for b in blame(samples) if b.taken]


def test_links_no_flow_tells_apart_are_said_tied() -> None:
    """Every flow through a server's cable also crosses one uplink: the two cannot be told apart."""
    lossy = [PathSample(("gpu0:ib0 leaf1:1", "leaf1:33 spine1:1", "spine1:9 leaf2:1"), 500, 15)] * 4
    clean = [PathSample(("gpu1:ib0 leaf1:2", "leaf1:34 spine1:2", "spine1:9 leaf2:1"), 500, 0)] * 8
    taken = [b for b in blame(lossy + clean) if b.taken]
    assert len(taken) == 1
    assert {taken[0].link, *taken[0].tied_with} == {"gpu0:ib0 leaf1:1", "leaf1:33 spine1:1"}


def test_votes_split_each_lossy_flow_over_its_links() -> None:
    ranked = blame([PathSample(("a b", "c d"), 100, 10)] * 3 + [PathSample(("c d", "e f"), 100, 0)] * 3)
    assert ranked[0].link == "a b" and ranked[0].votes == 1.5


def test_log_likelihood_ratio() -> None:
    assert log_likelihood_ratio(0, 1000) == 0.0
    assert log_likelihood_ratio(30, 1000) > MIN_LLR > log_likelihood_ratio(1, 1000)
    assert log_likelihood_ratio(30, 1000) > log_likelihood_ratio(30, 10_000)


def test_candidates_are_the_links_that_lost_packets_best_explained_first() -> None:
    samples = flows(random.Random(6), {UPLINKS[2]: 0.05})
    assert candidates(samples, 3)[0] == UPLINKS[2]
    assert candidates(flows(random.Random(7), {}), 3) == []


def test_a_fluke_in_the_sweep_is_not_taken_when_the_confirming_probes_are_clean() -> None:
    """Many links tested at once: one healthy link can look bad by chance; the probes sent again
    through it find nothing, so it is not named."""
    fluke = [PathSample(("gpu0:ib0 leaf1:1", "leaf1:33 spine1:1"), 60, 4)] * 3
    confirming = [PathSample(("gpu0:ib0 leaf1:1", "leaf1:33 spine1:1"), 240, 0, confirming=True)] * 3
    assert [b for b in blame(fluke) if b.taken]
    assert not [b for b in blame(fluke + confirming) if b.taken]


def test_a_real_fault_is_confirmed() -> None:
    rng = random.Random(8)
    sweep = flows(rng, {UPLINKS[1]: 0.02})
    confirming = [PathSample(s.links, 240, sum(1 for _ in range(240) if rng.random() < 0.02), confirming=True)
                  for s in sweep if UPLINKS[1] in s.links]
    assert [b.link for b in blame(sweep + confirming) if b.taken] == [UPLINKS[1]]


def test_a_busy_healthy_link_is_not_blamed_for_what_every_link_drops() -> None:
    """200 flows of five links each share one core cable; every link drops the healthy floor
    (1e-5), so each flow loses 1 packet in 20 000 (five links' worth). Against one link's floor the
    core cable looked lossy (LLR 162: 200 lost of 4 million); against the flows' own paths it is not."""
    samples = [PathSample((f"edge{i}a", f"edge{i}b", "core", f"edge{i}c", f"edge{i}d"), 20_000, 1) for i in range(200)]
    ranked = blame(samples)
    assert [b.link for b in ranked if b.taken] == []
    assert log_likelihood_ratio(200, 4_000_000) > MIN_LLR  # what the single-link floor made of it
    # a real fault on the core cable on top of it is still taken
    faulty = [PathSample(s.links, s.sent, s.lost + 20) for s in samples]
    assert [b.link for b in blame(faulty) if b.taken] == ["core"]
