"""Names folded for a label: a unit's 64 nodes are one prefix and numbers of one width, folded here
by their runs; anything else goes to ClusterShell. (ClusterShell's general fold, a thousand times
over a 12 500-node plan, was half the time of drawing it.)"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpunet.model.nodeset import fold

NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compact(names: Sequence[str]) -> str:
    """The names folded as ClusterShell folds them (gpu[001-004,007])."""
    found = [NUMBERED.match(n) for n in names]
    matches = [m for m in found if m is not None]
    if len(names) < 2 or len(matches) != len(names):
        return fold(names)
    if len({m[1] for m in matches}) != 1 or len({len(m[2]) for m in matches}) != 1:
        return fold(names)
    prefix, width = matches[0][1], len(matches[0][2])
    numbers = sorted({int(m[2]) for m in matches})
    if len(numbers) == 1:
        return names[0]
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    parts = [f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs]
    return f"{prefix}[{','.join(parts)}]"
