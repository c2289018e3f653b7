"""What-ifs side by side: the same job on the plan as it is, with an element down, with another
placement, on another design (another spec, or the same spec at another oversubscription).

Also the two small readers the command line hands over: message sizes as nccl-tests writes them
(8M, 1G: powers of 1024) and a point-to-point pattern file (one `SOURCE DESTINATION [RAIL]` a line)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpunet.design import design
from gpunet.errors import DesignError, UsageError
from gpunet.model.base import Frozen
from gpunet.model.plan import Plan
from gpunet.model.spec import Spec
from gpunet.sim.report import SimReport
from gpunet.sim.simulate import MAX_SIZE, SimOptions, simulate

UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
SIZE = re.compile(r"^\s*(\d{1,13})\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
MAX_PATTERN_LINES = 100_000


class Scenario(Frozen):
    """One column: a name, and what differs from the plan as it is."""

    name: str
    down: tuple[str, ...] = ()
    nodes: tuple[str, ...] | None = None  # another placement (rank order)
    plan: Plan | None = None  # another design


def side_by_side(plan: Plan, nodes: Sequence[str] | None, options: SimOptions,
                 scenarios: Sequence[Scenario]) -> list[SimReport]:
    """The plan as it is first, then each scenario, all with the same collective and options."""
    reports = [simulate(plan, nodes, options, scenario="as planned")]
    for s in scenarios:
        job = s.nodes if s.nodes is not None else nodes
        reports.append(simulate(s.plan or plan, job, options, down=s.down, scenario=s.name))
    return reports


def oversubscribed(spec: Spec, plane: str, ratio: float) -> Plan:
    """The spec designed again with `plane`'s leaves at ratio:1 (a spec is needed: a plan holds
    the sizing it was built from, not the rest of the spec)."""
    if plane not in spec.planes:
        raise UsageError(f"no plane {plane!r} in the spec; planes: {', '.join(spec.planes)}")
    if not 0 < ratio <= 64:
        raise UsageError(f"oversubscription {ratio:g}: give down:up as a number above 0 and at most 64")
    data = spec.model_dump(mode="json", exclude_none=True, by_alias=True)
    data["planes"][plane].setdefault("fabric", {}).setdefault("oversubscription", {})["leaf"] = ratio
    try:
        return design(Spec.model_validate(data))
    except DesignError as exc:
        raise UsageError(f"the spec at {ratio:g}:1 cannot be built: {exc}") from None


def parse_sizes(text: str) -> tuple[int, ...]:
    """'1M,16M,1G' -> bytes (K, M, G, T are powers of 1024, as nccl-tests' -b/-e read them)."""
    sizes = []
    for part in text.split(","):
        found = SIZE.match(part)
        if not found:
            raise UsageError(f"message size {part.strip()!r}: write a number with K, M, G or T (e.g. 8M,1G)")
        size = int(found.group(1)) * UNITS[found.group(2).upper()]
        if not 0 < size <= MAX_SIZE:
            raise UsageError(f"message size {part.strip()!r}: from 1 byte to 1T")
        sizes.append(size)
    return tuple(sorted(set(sizes)))


def parse_pattern(text: str) -> tuple[tuple[str, str, int | None], ...]:
    """A point-to-point pattern: `SOURCE DESTINATION [RAIL]` a line, # comments; every pair sends
    the message size at once (without RAIL, spread over every rail)."""
    pairs: list[tuple[str, str, int | None]] = []
    lines = text.splitlines()
    if len(lines) > MAX_PATTERN_LINES:
        raise UsageError(f"a pattern of more than {MAX_PATTERN_LINES} lines")
    for number, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) not in (2, 3) or (len(words) == 3 and not words[2].isdigit()) or words[0] == words[1]:
            raise UsageError(f"pattern line {number}: {line.strip()[:80]!r}: write SOURCE DESTINATION [RAIL] "
                             "(two different nodes, a rail number)")
        pairs.append((words[0], words[1], int(words[2]) if len(words) == 3 else None))
    if not pairs:
        raise UsageError("the pattern names no pair (SOURCE DESTINATION [RAIL] a line)")
    return tuple(pairs)
