"""Issue 22 (nft sets and maps) and issue 24 item 2: named and anonymous sets, verdict maps,
intervals, ranges and concatenations are evaluated with their elements when the dump holds them
(`nft -j list ruleset` does), "cannot tell" when it does not (`nft -j -t`); every rule gpunet itself
renders is read, so a clean apply of gpunet's own table gives no GN-FW warning; a blocked flow is
said as a sentence, and the fix never asks to remove gpunet's own rule.

The pure tests read real nft output recorded here (tests/fixtures/nft_ruleset/gpunet-sets-*); the
lab tests load rulesets into a throwaway network namespace (`unshare --net`: nothing to tear down,
nothing reached) and read them back with the real `nft`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpunet.api import plan_spec
from gpunet.checks.base import Context
from gpunet.checks.filtering import Packet, evaluate
from gpunet.checks.firewall import needed_flows_admitted
from gpunet.design import design
from gpunet.model.plan import Node
from gpunet.model.ruleset import Ruleset
from gpunet.model.state import FirewallState, NodeState
from gpunet.probe.rulesets import parse_nft_ruleset
from gpunet.render.firewall import render_nftables
from gpunet.spec.examples import EXAMPLES, example_text
from gpunet.spec.loader import parse_spec

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nft_ruleset"
FULL = parse_nft_ruleset((FIXTURES / "gpunet-sets-and-maps" / "output.txt").read_text())
TERSE = parse_nft_ruleset((FIXTURES / "gpunet-sets-terse" / "output.txt").read_text())
SETS_RULESET = (FIXTURES / "gpunet-sets-and-maps" / "SOURCE.md").read_text().split("```")[1].strip() + "\n"


def verdict(source: str, protocol: str, port: int, rules: Ruleset = FULL) -> str:
    return evaluate(Packet("eth0", source, "198.18.0.1", protocol, port), [rules]).outcome


@pytest.mark.parametrize(("source", "protocol", "port", "outcome"), [
    ("198.18.0.5", "tcp", 22, "accept"),  # a member of @allow, a port of @ports
    ("198.18.0.6", "tcp", 6818, "accept"),  # and within @ports' interval
    ("198.18.0.9", "tcp", 22, "block"),  # not a member: the drop after the allowlist
    ("198.18.0.5", "tcp", 23, "block"),  # a member, but not a port of @ports
    ("198.18.4.200", "tcp", 1, "accept"),  # @nets: a prefix element
    ("198.18.8.15", "tcp", 1, "accept"),  # @nets: a range element
    ("198.18.8.21", "tcp", 1, "block"),
    ("198.18.0.7", "tcp", 5201, "accept"),  # the concatenation @pairs
    ("198.18.0.7", "tcp", 5202, "block"),
    ("198.18.9.9", "tcp", 80, "accept"),  # the verdict map @svc
    ("198.18.9.9", "tcp", 81, "block"),
    ("198.18.9.9", "tcp", 8080, "accept"),  # an anonymous verdict map
    ("198.18.9.9", "tcp", 8081, "block"),
    ("198.18.1.5", "udp", 4791, "accept"),  # an anonymous range
    ("198.18.1.10", "udp", 4791, "block"),
])
def test_sets_and_maps_are_judged_by_their_elements(source: str, protocol: str, port: int, outcome: str) -> None:
    assert verdict(source, protocol, port) == outcome


@pytest.mark.parametrize("source", ["198.18.0.5", "198.18.0.9"])
def test_a_set_whose_elements_were_not_read_is_cannot_tell(source: str) -> None:
    judged = evaluate(Packet("eth0", source, "198.18.0.1", "tcp", 22), [TERSE])
    assert judged.outcome == "uncertain" and "@allow: its elements are not in the ruleset as read" in judged.why


def test_a_blocked_flow_is_a_sentence_naming_rule_and_table() -> None:
    judged = evaluate(Packet("eth0", "198.18.9.9", "198.18.0.1", "tcp", 81), [FULL])
    assert judged.sentence == "rule handle 10 (tcp dport vmap @svc) of chain input in nft table inet gnsec"
    dropped = evaluate(Packet("eth0", "198.18.0.9", "198.18.0.1", "tcp", 22), [FULL])
    assert dropped.sentence == "rule handle 14 (drop) of chain input in nft table inet gnsec"


def _nft(ruleset: str, *listing: str) -> str:
    """`nft -f` then a listing, in a network namespace of their own that ends with them."""
    done = subprocess.run(["unshare", "--net", "sh", "-c", 'nft -f - && nft -j "$@" list ruleset', "sh", *listing],
                          input=ruleset, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _real_nft() -> None:
    if os.geteuid() != 0 or shutil.which("nft") is None or shutil.which("unshare") is None:
        pytest.skip("needs root, nft and unshare")


@pytest.mark.lab
def test_the_real_nft_dump_of_sets_and_maps_is_judged_the_same() -> None:
    _real_nft()
    live = parse_nft_ruleset(_nft(SETS_RULESET))
    assert verdict("198.18.0.5", "tcp", 22, live) == "accept" and verdict("198.18.0.9", "tcp", 22, live) == "block"
    assert verdict("198.18.0.7", "tcp", 5201, live) == "accept" and verdict("198.18.9.9", "tcp", 81, live) == "block"
    terse = parse_nft_ruleset(_nft(SETS_RULESET, "-t"))
    assert verdict("198.18.0.5", "tcp", 22, terse) == "uncertain"


@pytest.mark.lab
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_gpunets_own_rules_applied_give_no_firewall_warning(example: str) -> None:
    """Each group's first and last node: its rendered nftables loaded into the kernel and read back
    as the probe reads it; GN-FW-01 passes every flow (no warn, no fail)."""
    _real_nft()
    plan = design(parse_spec(example_text(example))[0])
    groups: dict[str, list[Node]] = {}
    for node in plan.nodes:
        groups.setdefault(node.group, []).append(node)
    for node in {n.name: n for members in groups.values() for n in (members[0], members[-1])}.values():
        rules = parse_nft_ruleset(_nft(render_nftables(plan, node)))
        state = NodeState(hostname=node.name, firewall=FirewallState(nft_tables=("inet gpunet",), nft=rules))
        outcomes = needed_flows_admitted(Context(state=state, plan=plan, node=node))
        assert [o for o in outcomes if o.verdict in ("warn", "fail")] == [], (node.name, outcomes)


def test_when_gpunets_own_table_blocks_the_fix_is_to_apply_it_again() -> None:
    """A table of gpunet's older than the plan (a flow added since): never "remove that rule"."""
    plan = plan_spec(None)
    node = plan.nodes[0]
    stale = (FIXTURES / "gpunet-rules" / "output.txt").read_text()
    state = NodeState(hostname=node.name, firewall=FirewallState(nft=parse_nft_ruleset(stale)))
    failing = [o for o in needed_flows_admitted(Context(state=state, plan=plan, node=node)) if o.verdict == "fail"]
    assert failing
    for outcome in failing:
        assert "remove" not in outcome.fix and "apply the plan's firewall again" in outcome.fix
        assert outcome.observed.startswith("dropped by the drop policy of chain input in nft table inet gpunet")
