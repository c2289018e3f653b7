"""NodeSets from untrusted text: no group source ever runs, the size is known before expansion,
and every name is a host name."""

from __future__ import annotations

import time

import pytest

from gpunet.model.nodeset import MAX_NODES, NodeSetError, fold, node_count_bound, parse_nodeset

HOSTILE_GROUP = "@x'$(touch PWNED)'"


@pytest.mark.parametrize(("text", "bound"), [
    ("gpu[001-128]", 128), ("gpu[1-4]-ib[0-7]", 32), ("a,b,c[1-3]", 5), ("gpu[1-10/2]", 5),
    ("gpu[1-8]!gpu3", 9), ("x", 1), ("gpu[1-3,7,9-10]", 6), ("node[1-10000000]", 10_000_000),
])
def test_the_bound_is_read_from_the_text(text: str, bound: int) -> None:
    assert node_count_bound(text) == bound


def test_ten_million_nodes_are_refused_before_expansion() -> None:
    start = time.process_time()  # CPU: waiting for a loaded host's CPU is not expanding
    with pytest.raises(NodeSetError, match=f"limit of {MAX_NODES} nodes"):
        parse_nodeset("node[1-10000000]")
    assert time.process_time() - start < 0.5


@pytest.mark.parametrize(("text", "message"), [
    ("gpu[1-999999999999]", "limit of 1000000"),  # ClusterShell itself: AssertionError "range too large"
    ("gpu[1-" + "9" * 5000 + "]", "more than 18 digits"),  # past int()'s digit limit
    (HOSTILE_GROUP, "@groups are not available here"),
    ("-oProxyCommand=touch F", "not a valid hostname"),
    ("x;touch F;#", "not a valid hostname"),
    ("gpu[1-", "bad NodeSet"),
])
def test_hostile_and_broken_text_is_a_nodeset_error(text: str, message: str) -> None:
    with pytest.raises(NodeSetError, match=message):
        parse_nodeset(text)


def test_fold_never_resolves_groups() -> None:
    assert fold(["gpu3", "gpu1", "gpu2"]) == "gpu[1-3]"


def test_a_kept_parse_is_handed_out_as_a_copy() -> None:
    """parse_nodeset keeps what it parsed without a resolver; a caller changing its NodeSet must
    not change what the next caller gets."""
    first = parse_nodeset("gpu[1-4]")
    first.update("gpu9")
    first.difference_update("gpu1")
    assert str(parse_nodeset("gpu[1-4]")) == "gpu[1-4]"
