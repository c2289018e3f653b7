"""Issue 22: a parser refuses text it does not understand (ParseError) instead of returning an
empty result that reads as "all clean". For every parser of tool output: a real recorded output
pasted with `> ` quoting, a tool's error message, and the wrong file (every other tool's recorded
output) are refused; a format with an explicit empty form has a test of that form. And numbers a
node or file could send to break Python's int() (5 000 digits, non-ASCII digits) or float
(NaN/inf where a count is read) are ParseError, never ValueError or OverflowError.

The error messages below are typed here in the tools' wording (they are not recorded outputs)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpunet.bench.health import parse_cpu_sample
from gpunet.errors import ParseError
from gpunet.fabric.counters import parse_ibqueryerrors, parse_ip_link_stats
from gpunet.fabric.prometheus import parse_prometheus_vector
from gpunet.probe.lldp import parse_lldpcli_json
from gpunet.probe.parsers import (
    parse_ethtool_driver,
    parse_ibv_devinfo,
    parse_ip_addr_json,
    parse_ip_route_json,
    parse_proc_net_dev,
)
from gpunet.probe.rulesets import parse_iptables_save, parse_nft_ruleset
from tests.probe.test_parsers import PARSERS, cases, recorded

ERRORS = [
    "bash: ibqueryerrors: command not found\n",
    "ibwarn: [2856] mad_rpc_open_port: can't open UMAD port ((null):0)\n"
    "ibpanic: [2856] main: Failed to open '(null)' port '0'\n",
    "ssh: connect to host gpu001 port 22: Connection refused\n",
    "Cannot get device settings: No such device\nNo data available\n",
    "Error: Could not process rule: Operation not permitted\n",
]
# Formats that are one format under two names: each reads the other's output, rightly.
SAME_FORMAT = {frozenset({"nft_json", "nft_ruleset"}), frozenset({"proc_net_snmp", "proc_net_netstat"}),
               frozenset({"ethtool_stats", "ethtool_flow"}),  # both `ethtool -S`: counters, and flow control
               # the switch-port reader takes any `ip -j` link list: `ip -j addr` and `ip -s -j link` are link lists too
               frozenset({"ip_link_json", "ip_addr_json"}), frozenset({"ip_link_json", "ip_link_stats_json"})}


def _first(tool: str) -> str:
    return recorded(next(case for t, case in cases() if t == tool))


def _refused(parse: Callable[[str], Any], text: str) -> None:
    with pytest.raises(ParseError):
        parse(text)


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_a_real_output_pasted_with_quoting_is_refused(tool: str) -> None:
    quoted = "".join(f"> {line}\n" for line in _first(tool).splitlines())
    _refused(PARSERS[tool], quoted)


@pytest.mark.parametrize("tool", sorted(PARSERS))
@pytest.mark.parametrize("message", ERRORS, ids=["not-found", "umad", "ssh", "ethtool", "nft"])
def test_a_tools_error_message_is_refused(tool: str, message: str) -> None:
    _refused(PARSERS[tool], message)


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_every_other_tools_output_is_refused(tool: str) -> None:
    accepted = []
    for other in sorted(PARSERS):
        if other == tool or frozenset({tool, other}) in SAME_FORMAT:
            continue
        with contextlib.suppress(ParseError):
            PARSERS[tool](_first(other))
            accepted.append(other)
    assert accepted == []


@pytest.mark.parametrize(("parse", "text", "empty"), [
    (parse_ibqueryerrors, "\n## Summary: 268 nodes checked, 0 bad nodes found\n"
                          "##          1024 ports checked, 0 ports have errors beyond threshold\n", ()),
    (parse_ibv_devinfo, "No IB devices found\n", ()),
    (parse_iptables_save, "", None),  # iptables-save prints nothing when no table is loaded
    (parse_ip_route_json, "[]\n", ()),
    (parse_ip_addr_json, "[]\n", {}),
    (lambda text: parse_ip_link_stats(text, "leaf1"), "[]\n", ()),
    (parse_lldpcli_json, '{\n  "lldp": {}\n}\n', ()),  # lldpd with no neighbour heard
    (parse_nft_ruleset, '{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}}]}', None),
])
def test_the_explicit_empty_forms_are_empty(parse: Callable[[str], Any], text: str, empty: object) -> None:
    result = parse(text)
    if empty is None:
        assert not result.chains
    else:
        assert result == empty


def test_the_summary_must_agree_with_the_records() -> None:
    _refused(parse_ibqueryerrors, "## Summary: 268 nodes checked, 3 bad nodes found\n")


@pytest.mark.parametrize("tool", sorted(PARSERS))
@pytest.mark.parametrize("number", ["9" * 5000, "\u0663\u0664", "\u00b2", "1e400"], ids=["5000-digits", "arabic",
                                                                                          "superscript", "1e400"])
def test_hostile_numbers_in_real_outputs_are_parse_errors(tool: str, number: str) -> None:
    """Every number in a real output replaced: read (a bound or another type let it pass) or
    refused with ParseError; never ValueError, OverflowError or a traceback."""
    for _, case in (c for c in cases() if c[0] == tool):
        text = re.sub(r"(?<![\w.])[0-9]+(?![\w.])", number, recorded(case))
        with contextlib.suppress(ParseError):
            PARSERS[tool](text)


@pytest.mark.parametrize(("parse", "text"), [
    (parse_proc_net_dev, "Inter-| x\n face |\n eth0: 1 2\n"),  # a `|` in the first line is no header
    (parse_ethtool_driver, "driver:\n"),
    (lambda text: parse_prometheus_vector(text, 0.0), "> " + '{"status": "success"}'),
])
def test_other_parsers_refuse_what_they_do_not_recognise(parse: Callable[[str], Any], text: str) -> None:
    _refused(parse, text)


@pytest.mark.parametrize("text", ["> cpu  1 2 3 4 5 6 7 8 9 10\n", "bash: cat: command not found\n",
                                  "12.5 3.0\ncpu  " + "9" * 5000 + " 1 1 1 1 1 1 1\n"],
                         ids=["quoted", "error", "5000-digits"])
def test_cpu_samples_refuse_what_is_not_proc_stat(text: str) -> None:
    _refused(parse_cpu_sample, text)


def test_fixtures_exist() -> None:
    assert Path(__file__).parent.parent.joinpath("fixtures", "ibqueryerrors").is_dir()
