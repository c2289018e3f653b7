"""sinfo and scontrol show nodes, recorded on real clusters (tests/fixtures/<tool>/<case>), read
into node states and the free nodes; what is not their output is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunet.errors import ParseError
from gpunet.place import parse_free_nodes, parse_scontrol_nodes, parse_sinfo

FIXTURES = Path(__file__).parent.parent / "fixtures"
PARSERS = {"sinfo": parse_sinfo, "scontrol_show_nodes": parse_scontrol_nodes}
CASES = [(tool, case) for tool in PARSERS for case in sorted((FIXTURES / tool).iterdir()) if case.is_dir()]


@pytest.mark.parametrize(("tool", "case"), CASES, ids=[f"{t}/{c.name}" for t, c in CASES])
def test_recorded_outputs(tool: str, case: Path) -> None:
    assert (case / "SOURCE.md").exists()
    text = (case / "output.txt").read_text()
    expected = json.loads((case / "expected.json").read_text())
    for parsed in (PARSERS[tool](text), parse_free_nodes(text)):
        assert list(parsed.free) == expected["free"]
        assert len(parsed.states) == expected["nodes"]
        assert {n: parsed.states[n] for n in expected["states"]} == expected["states"]
        assert list(parsed.missing) == expected.get("missing", [])


@pytest.mark.parametrize("text", [
    "", "hello\n", "PARTITION AVAIL TIMELIMIT NODES STATE NODELIST\ngpu up infinite 3 idle g[1-2]\n",
    "PARTITION AVAIL TIMELIMIT NODES STATE NODELIST\ngpu up infinite two idle g[1-2]\n",
    "PARTITION AVAIL TIMELIMIT NODES STATE NODELIST\ngpu up infinite 1 idle g$(id)\n",
    "NodeName=a State=IDLE\nthis is not scontrol\n", "   State=IDLE\n",
])
def test_what_is_not_their_output_is_refused(text: str) -> None:
    with pytest.raises(ParseError):
        parse_free_nodes(text)


def test_states_that_keep_a_node_from_a_job() -> None:
    sinfo = parse_sinfo("PARTITION AVAIL TIMELIMIT NODES STATE NODELIST\n"
                        "a up infinite 2 idle~ g[1-2]\na up infinite 1 idle* g3\na up infinite 1 idle$ g4\n"
                        "a up infinite 1 mix g5\nb up infinite 2 idle g[1,5]\n")
    assert sinfo.free == ("g1", "g2")
    scontrol = parse_scontrol_nodes("NodeName=a State=IDLE+CLOUD+POWERED_DOWN\nNodeName=b State=IDLE+DRAIN\n"
                                    "NodeName=c State=IDLE*\nNodeName=d State=IDLE\n")
    assert scontrol.free == ("a", "d")
