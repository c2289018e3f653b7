"""A needed flow's packet walked through recorded rulesets (nftables JSON and iptables-save, as a
node's probe reads them): the rule that blocks it is named, an accept in one table does not undo
another table's drop, and a rule gpunet cannot read makes the verdict uncertain, never wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunet.checks.filtering import Packet, evaluate
from gpunet.model.ruleset import Ruleset
from gpunet.probe.rulesets import parse_iptables_save, parse_nft_ruleset

FIXTURES = Path(__file__).parent.parent / "fixtures"
RECORDED = FIXTURES / "nft_ruleset" / "foreign-tables-iptables-nft" / "output.txt"
IPTABLES = FIXTURES / "iptables_save" / "nft-backend-custom-chain" / "output.txt"


def node_rules() -> list[Ruleset]:
    """As the probe reads a node: nft without the tables iptables-save shows, and iptables-save."""
    nft = parse_nft_ruleset(RECORDED.read_text())
    iptables = parse_iptables_save(IPTABLES.read_text())
    mirrored = {(c.family, c.table) for c in iptables.chains}
    return [nft.model_copy(update={"chains": tuple(c for c in nft.chains if (c.family, c.table) not in mirrored)}),
            iptables]


@pytest.mark.parametrize(("packet", "outcome", "where"), [
    # a foreign table drops the compute NIC, whatever gpunet's table accepts
    (Packet("ib0", "198.18.16.7", "198.18.16.1", "tcp", 47001), "block", "nft inet broken input handle 3"),
    # past the foreign table (port 22 skips its jump), iptables' multiport rule drops SSH
    (Packet("ib1", "198.18.16.7", "198.18.16.1", "tcp", 22), "block", "iptables ip filter INPUT rule 2"),
    # the foreign chain rejects a source outside 10.0.0.0/8 through its jump to `extra`
    (Packet("ib1", "198.18.16.7", "198.18.16.1", "tcp", 6818), "block", "nft inet broken extra handle 6"),
    # udp 123 returns from `extra`, gpunet's table has no rule for it: its policy drops it
    (Packet("eno1", "10.1.1.1", "198.18.0.2", "udp", 123), "block", "nft inet gpunet input policy drop"),
])
def test_the_first_rule_that_blocks_is_named(packet: Packet, outcome: str, where: str) -> None:
    verdict = evaluate(packet, node_rules())
    assert (verdict.outcome, verdict.where.split(":")[0]) == (outcome, where), verdict


def only(tables: set[str]) -> Ruleset:
    nft = parse_nft_ruleset(RECORDED.read_text())
    return nft.model_copy(update={"chains": tuple(c for c in nft.chains if c.table in tables)})


def test_an_unreadable_drop_before_the_accept_makes_it_uncertain() -> None:
    """The lab's loss fault (netdev numgen) may drop any packet that gpunet's table admits."""
    verdict = evaluate(Packet("eno1", "198.18.0.5", "198.18.0.2", "tcp", 22), [only({"gnloss", "gpunet"})])
    assert verdict.outcome == "uncertain" and "numgen" in verdict.why


def test_iptables_seen_only_through_nft_is_uncertain_not_blocked() -> None:
    """Read from nft's JSON alone, iptables-nft's conntrack match is opaque: the packet the SLURM
    chain may accept before the DROP policy is neither passed nor failed."""
    verdict = evaluate(Packet("ib1", "10.1.1.1", "198.18.16.1", "udp", 123), [only({"filter"})])
    assert verdict.outcome == "uncertain" and "conntrack" in verdict.why and "policy drop" in verdict.why


def test_a_later_table_blocks_what_an_unreadable_rule_left_in_doubt() -> None:
    verdict = evaluate(Packet("eno1", "10.1.1.1", "198.18.0.2", "tcp", 22), node_rules())
    assert verdict.outcome == "block" and verdict.where == "nft inet gpunet input policy drop"


def test_empty_rulesets_accept() -> None:
    assert evaluate(Packet("eth0", "10.0.0.1", "10.0.0.2", "tcp", 22), [Ruleset()]).outcome == "accept"


def test_an_accepting_legacy_rule_and_its_reject() -> None:
    legacy = parse_iptables_save((FIXTURES / "iptables_save" / "legacy-reject" / "output.txt").read_text())
    assert evaluate(Packet("eth0", "10.0.0.1", "10.0.0.2", "tcp", 22), [legacy]).outcome == "accept"
    rejected = evaluate(Packet("eth1", "10.0.0.1", "10.0.0.2", "tcp", 22), [legacy])
    assert rejected.outcome == "block" and rejected.where.startswith("iptables ip filter INPUT rule 3")
