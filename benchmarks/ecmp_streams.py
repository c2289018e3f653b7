"""How many parallel streams a pair needs so that static ECMP hashing does not decide its result.

The round simulated is the all-pairs round that fills a 1:1 leaf exactly (the lab fixture: 4
servers under a leaf, 4 uplinks, 2 to each of 2 spines, every server sending to the other leaf).
Each stream is hashed to a random uplink, then at its spine to a random one of the 2 downlinks
toward the target leaf; every link carries 100 units; the streams share links max-min fairly (what
TCP approaches, which is optimistic). Printed: per number of streams, the median share of the worst
pair and the probability that the worst pair of a round is under 85 % of its line rate (the bench's
threshold). bench/run.py's default (`streams`) cites these numbers.

Usage::

    python benchmarks/ecmp_streams.py [--rounds 3000] [--seed 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics

LEAF_UPLINKS, SPINE_DOWNLINKS, PAIRS, CAPACITY, THRESHOLD = 4, 2, 4, 100.0, 85.0
STREAMS = (1, 4, 8, 16, 24, 32)


def max_min(paths: list[list[str]]) -> list[float]:
    """Progressive filling: raise every unfrozen stream until a link fills, freeze its streams."""
    rate, left = [0.0] * len(paths), dict.fromkeys((link for p in paths for link in p), CAPACITY)
    active = set(range(len(paths)))
    while active:
        users: dict[str, int] = {}
        for s in active:
            for link in paths[s]:
                users[link] = users.get(link, 0) + 1
        step = min(left[link] / n for link, n in users.items())
        for s in active:
            rate[s] += step
        for link, n in users.items():
            left[link] -= step * n
        full = {link for link in users if left[link] <= 1e-9}
        active = {s for s in active if not full.intersection(paths[s])}
    return rate


def worst_pair(streams: int, rng: random.Random) -> float:
    paths, owner = [], []
    for pair in range(PAIRS):
        for _ in range(streams):
            up = rng.randrange(LEAF_UPLINKS)
            spine = up // (LEAF_UPLINKS // 2)
            paths.append([f"src{pair}", f"up{up}", f"down{spine}.{rng.randrange(SPINE_DOWNLINKS)}", f"dst{pair}"])
            owner.append(pair)
    rates = max_min(paths)
    return min(sum(r for r, o in zip(rates, owner, strict=True) if o == pair) for pair in range(PAIRS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows = []
    for streams in STREAMS:
        worst = [worst_pair(streams, rng) for _ in range(args.rounds)]
        rows.append({"streams": streams, "median_worst_pair_pct": round(statistics.median(worst), 1),
                     "p_worst_below_85": round(sum(w < THRESHOLD for w in worst) / len(worst), 4)})
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'streams':>7}  {'median worst pair %':>19}  {'P(worst < 85 %)':>15}")
    for row in rows:
        print(f"{row['streams']:>7}  {row['median_worst_pair_pct']:>19}  {row['p_worst_below_85']:>15}")


if __name__ == "__main__":
    main()
