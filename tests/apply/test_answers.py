"""Issue 22 F7 and F8: a node's answers are validated against typed models (a bad answer is that
node's error, the others go on), and what a node sent reaches the terminal sanitised. The dry run
runs for real through the fleet runner's local exec transport, each node's "agent" a shell that
prints what a compromised node could."""

from __future__ import annotations

import io
import json
import shlex
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet
from typer.testing import CliRunner

from gpunet.apply import Remote, dry_run
from gpunet.apply.manifest import DEFAULT_TARGETS, Where
from gpunet.apply.remote import reply_of
from gpunet.cli.apply import _print_dry_run
from gpunet.cli.console import Terminal, printable
from gpunet.cli.main import app
from gpunet.fleet import ClusterShellRunner, NodeOutcome
from gpunet.spec.examples import example_text
from tests.apply.test_manifest import PLAN

ESC = "\x1b]0;owned\x07\x1b[2J"  # retitle the window, clear the screen


def _outcome(stdout: str, rc: int = 0) -> NodeOutcome:
    return NodeOutcome(node="gpu1", rc=rc, stdout=stdout, stderr="", error=None, duration_s=0.1)


@pytest.mark.parametrize("answer", [{"error": 5}, {"refused": "yes"}, {"state": ["applied"]},
                                    {"revert_errors": "abc"}, {"txid": {"x": 1}}, {"started": "soon"}])
def test_an_answer_of_the_wrong_shape_is_that_nodes_error(answer: dict[str, object]) -> None:
    reply = reply_of("gpu1", _outcome(json.dumps(answer)))
    assert not reply.ok and "the node's answer is not the agent's" in reply.error and reply.data == {}


def test_an_answer_nested_without_end_or_with_a_huge_number_is_no_answer() -> None:
    assert not reply_of("gpu1", _outcome("[" * 10_000 + "]" * 10_000)).ok
    assert not reply_of("gpu1", _outcome('{"started": ' + "9" * 5000 + "}")).ok


def _remote(answers: dict[str, str]) -> Remote:
    """Each node's `agent` prints its own line (the exec transport's %h is the node)."""
    script = "case $NODE in " + " ".join(f"{node}) printf '%s\\n' {shlex.quote(line)} ;;"
                                         for node, line in answers.items()) + " esac"
    runner = ClusterShellRunner(transport="exec", template="env NODE=%h sh -c %c")
    return Remote(runner=runner, where=Where(), python=("sh", "-c", script, "agent"))


def test_a_node_answering_without_files_or_sysctl_does_not_stop_the_others() -> None:
    good = json.dumps({"files": {}, "sysctl": {}, "host": "gpu1"})
    remote = _remote({"gpu1": good, "gpu2": json.dumps({"host": "gpu2"}),
                      "gpu3": json.dumps({"files": [], "sysctl": 1})})
    results = {r.node: r for r in dry_run(PLAN, NodeSet("gpu[1-3]"), remote, DEFAULT_TARGETS)}
    assert not results["gpu1"].error and results["gpu1"].files  # every file is new there
    assert "files: Field required" in results["gpu2"].error
    assert "the node's answer is not the agent's" in results["gpu3"].error


def test_a_dry_run_shows_a_nodes_text_sanitised(capsys: pytest.CaptureFixture[str]) -> None:
    hostile = json.dumps({"files": {"etc/netplan/60-gpunet.yaml": f"network:\n  {ESC}version: 2\n"},
                          "sysctl": {"net.ipv4.tcp_mtu_probing": f"0{ESC}"}})
    remote = _remote({"gpu1": hostile, "gpu2": json.dumps({"error": f"boom {ESC}"})})
    _print_dry_run(dry_run(PLAN, NodeSet("gpu[1-2]"), remote, DEFAULT_TARGETS), as_json=False)
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\x07" not in shown
    assert "\ufffd]0;owned" in shown and "sysctl net.ipv4.tcp_mtu_probing: 0\ufffd" in shown
    assert "boom" in shown


def test_errors_and_table_text_go_through_the_one_sanitiser(tmp_path: Path) -> None:
    assert printable(f"a{ESC}\u202eb\u2028c\n\td") == "a\ufffd]0;owned\ufffd\ufffd[2J\ufffdb\ufffdc\n\td"
    assert printable("line\nbreak", keep="") == "line\ufffdbreak"
    catalog = tmp_path / "parts.yaml"  # a catalog key holding an escape, echoed by the error message
    catalog.write_text('version: 1\ncurrency: USD\nswitches:\n  "evil\\e]0;owned\\a\\e[2J": {price: "x"}\n')
    spec = tmp_path / "a.yaml"
    spec.write_text(example_text("small-ethernet"))
    result = CliRunner().invoke(app, ["compare", str(spec), str(spec), "--catalog", str(catalog)])
    assert result.exit_code == 2 and "evil" in result.output, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output


def test_a_plain_string_printed_to_the_consoles_is_sanitised() -> None:
    out = io.StringIO()
    Terminal(file=out, highlight=False).print(f"[bold]node[/bold] said {ESC}", markup=True)
    assert "\x1b]0;" not in out.getvalue() and "\x07" not in out.getvalue()


def test_the_real_agents_answers_pass() -> None:
    for answer in ({"txid": None, "state": None, "configuration": "untouched by gpunet apply"},
                   {"txid": "abc", "previous": {"txid": None}, "started": True},
                   {"txid": "abc", "state": "reverted", "started": 1.5, "finished_at": 2, "revert_errors": ["x"]},
                   {"files": {"a": None}, "sysctl": {"k": "1"}, "host": "gpu1"}, {"error": "x", "refused": True}):
        assert reply_of("gpu1", _outcome(json.dumps(answer))).data == answer
