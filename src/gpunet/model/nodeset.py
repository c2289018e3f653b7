"""NodeSets from untrusted text (a spec, a plan, the command line): parsed without external group
sources, sized before ClusterShell expands them, and every node a valid host name.

ClusterShell's default resolver reads /etc/clustershell/groups.conf, whose group sources run shell
commands with the group name pasted in: `@x'$(touch F)'` in a spec would run `touch F`. Groups here
come only from a resolver built from the Plan's own inventory, or not at all. ClusterShell also
expands a range into a set of integers before anything can count it (`node[1-10000000]` is 2 GB),
so the size is computed from the text first."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException
from ClusterShell.NodeUtils import GroupResolver, GroupResolverError

from gpunet.model.types import HOSTNAME

MAX_NODES = 1_000_000  # 125 000 8-GPU servers is a 1M-GPU cluster; 8x headroom
MAX_TEXT = 64 * 1024  # characters of NodeSet text
BRACKET = re.compile(r"\[([^\[\]]*)\]")
RANGE_ITEM = re.compile(r"^\s*(\d+)(?:\s*-\s*(\d+)(?:\s*/\s*(\d+))?)?\s*$")
LONG_NUMBER = re.compile(r"\d{19,}")  # past any index a cluster has (and past int()'s digit limit)
OPERATORS = re.compile(r"[,!&^]")


class NodeSetError(ValueError):
    """Text that is not a NodeSet of valid host names within the size limit; the message says why."""


def node_count_bound(text: str) -> int:
    """An upper bound of the nodes `text` names, from the text alone: the sum over its terms of the
    product of each bracket's range sizes (operators other than ',' only remove nodes)."""
    total = 0
    for term in _terms(text):
        size = 1
        for bracket in BRACKET.findall(term):
            size *= sum(_range_size(item) for item in bracket.split(","))
        total += size
    return total


def _terms(text: str) -> list[str]:
    """Split on operators outside brackets."""
    terms, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth == 0 and OPERATORS.match(char):
            terms.append(text[start:i])
            start = i + 1
    return [*terms, text[start:]]


def spaced(folded: str) -> str:
    """A folded NodeSet with a space after each top-level comma, so a table wraps between
    patterns ("gpu[001-032], stor[01-04]"), never inside one."""
    return ", ".join(_terms(folded))


def _range_size(item: str) -> int:
    match = RANGE_ITEM.fullmatch(item)
    if not match:
        return 1  # not a range ClusterShell reads either: it reports the syntax error itself
    low, high, step = int(match[1]), int(match[2] or match[1]), int(match[3] or 1)
    return (high - low) // step + 1 if high >= low and step > 0 else 1


def parse_nodeset(text: str, resolver: GroupResolver | None = None, limit: int = MAX_NODES) -> NodeSet:
    """The NodeSet `text` names: groups only through `resolver` (the Plan's inventory), at most
    `limit` nodes, each a valid host name; NodeSetError otherwise. Without a resolver the answer
    depends on the text alone, so it is kept (a spec's checks parse each group's NodeSet a dozen
    times, and checking every name of a 125 000-node group took a third of a second each time);
    the caller gets a copy of its own, a NodeSet being mutable."""
    if resolver is None:
        return _parsed(text, limit).copy()
    return _parse(text, resolver, limit)


@functools.lru_cache(maxsize=256)
def _parsed(text: str, limit: int) -> NodeSet:
    return _parse(text, None, limit)


def _parse(text: str, resolver: GroupResolver | None, limit: int) -> NodeSet:
    if len(text) > MAX_TEXT:
        raise NodeSetError(f"NodeSet text of {len(text)} characters is over gpunet's limit of {MAX_TEXT}")
    if LONG_NUMBER.search(text):
        raise NodeSetError(f"NodeSet {_short(text)}: a number of more than 18 digits names no node a cluster has")
    bound = node_count_bound(text)
    if bound > limit:
        raise NodeSetError(f"NodeSet {_short(text)} names up to {bound} nodes, over gpunet's limit of {limit} "
                           "nodes per NodeSet")
    if resolver is None and "@" in text:
        raise NodeSetError(f"NodeSet {_short(text)}: @groups are not available here; they come only from a "
                           "plan's inventory (--plan or --lab), never from groups.conf")
    try:
        nodes = NodeSet(text, resolver=resolver or RESOLVER_NOGROUP)
    except (NodeSetException, GroupResolverError, AssertionError) as exc:
        raise NodeSetError(f"bad NodeSet {_short(text)}: {exc}") from None
    if len(nodes) > limit:
        raise NodeSetError(f"NodeSet {_short(text)} names {len(nodes)} nodes, over gpunet's limit of {limit} nodes")
    bad = next((n for n in nodes if not HOSTNAME.fullmatch(n)), None)
    if bad is not None:
        raise NodeSetError(f"node name {bad[:80]!r} is not a valid hostname (letters, digits and '-', "
                           "at most 63, not starting or ending with '-')")
    return nodes


def fold(names: Iterable[str]) -> str:
    """Node names folded as ClusterShell prints them (gpu[001-004,007]), without group lookups."""
    return _fold(tuple(names))


@functools.lru_cache(maxsize=16)
def _fold(names: tuple[str, ...]) -> str:
    """The flows of one plan fold the same few lists again and again (every GPU node, every node
    on a plane): ClusterShell takes about a second per 100 000 names, a tuple's hash milliseconds."""
    return str(NodeSet.fromlist(list(names), resolver=RESOLVER_NOGROUP))


def describe(names: list[str], most: int = 64) -> str:
    """Names for a message: folded when few; the first few and a count when many (ClusterShell's
    fold of 100 000 names of five dimensions takes seconds)."""
    if len(names) <= most:
        return fold(names)
    return f"{', '.join(names[:8])} and {len(names) - 8} more ({len(names)} nodes)"


def _short(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")
