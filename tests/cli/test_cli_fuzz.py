"""Bad input never yields a traceback: the commands that read files and options, fed hostile
values (hypothesis) and the review's corpus of broken files, exit 0, 1 or 2 with a message.

Only commands that stay on this machine are fuzzed: no `fleet run` over SSH, `lab up` or
`exporter` serving (each has its own tests), so no random name is ever resolved or connected to."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpunet.cli.main import app

pytestmark = pytest.mark.spread  # independent tests: any free worker takes each (tests/conftest.py)

runner = CliRunner()
HOSTILE = ["", "-", "--", "-oProxyCommand=x", "$(touch F)", "`id`", "a;b", "\n", "x\ny", "nan", "inf", "-1", "0",
           "99999999999999999999999", "gpu[1-999999999999]", "node[1-10000000]", "@x'$(id)'", "../..", "/",
           "/dev/null", "/etc/passwd", "%s%n", "é", "gpu[1-", "a" * 300, "1e309", "0x10", "@role:gpu"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Broken files of every kind the CLI reads."""
    root = tmp_path_factory.mktemp("corpus")
    files = {
        "alias-bomb.yaml": "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
        "merge.yaml": "site: {name: a}\nplanes: {}\ngroups: []\nx: &x {a: 1}\ny:\n  <<: *x\n",
        "not-yaml.yaml": "site: [\n", "list.yaml": "- a\n", "binary.yaml": "\x00\x01\xff",
        "empty.json": "", "truncated.json": '{"schema_version": 1, "nodes": [', "null.json": "null",
        "wrong-version.json": '{"schema_version": 99}', "web-list.yml": "- a\n",
        "web-bad-tls.yml": "tls_server_config:\n  cert_file: /dev/null\n  key_file: /dev/null\n",
    }
    for name, text in files.items():
        (root / name).write_bytes(text.encode("latin-1"))
    (root / "notes.sqlite").write_text("not a database")
    with sqlite3.connect(root / "other.sqlite") as db:
        db.execute("CREATE TABLE t (x)")
    (root / "dangling").symlink_to(root / "nowhere")
    return {p.name: p for p in root.iterdir()}


def assert_clean_exit(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1, 2, 3), (args, result.exit_code, result.output[-500:])
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
    assert "Traceback" not in result.output, (args, result.output[-2000:])


def test_every_broken_file_in_every_reader(corpus: dict[str, Path], tmp_path: Path) -> None:
    for path in corpus.values():
        for args in (["validate", str(path)], ["validate", "--json", str(path)],
                     ["plan", str(path), "-o", str(tmp_path / "plan")],
                     ["render", str(path), "-o", str(tmp_path / "r")],
                     ["bench", "history", "--db", str(path)], ["bench", "show", "1", "--db", str(path)],
                     ["bench", "compare", "1", "2", "--db", str(path)],
                     ["bench", "compare", "1", "2", "--db", str(corpus["other.sqlite"]), "--rules", str(path)],
                     ["fleet", "run", "gpu1", "--plan", str(path), "--", "true"],
                     ["exporter", "--web-config", str(path), "--listen", "127.0.0.1:99999"],  # never serves
                     ["plan", "-o", str(path)], ["render", "-o", str(path)]):
            assert_clean_exit(args)


COMMANDS = [
    ["validate"], ["plan", "--json"], ["render", "--json", "--node"], ["render", "--target"],
    ["bench", "show"], ["bench", "history", "--limit"], ["bench", "compare", "1"], ["lab", "status", "--id"],
    ["fleet", "run", "--lab", "zzzz", "--"], ["examples", "--json"], ["init", "--example"],
    ["bench", "run", "--lab", "zzzz", "--pattern"], ["bench", "run", "--lab", "zzzz", "--duration"],
    ["lab", "fault", "gpu1:eth0", "--id", "zzzz", "--mtu"], ["lab", "fault", "--id", "zzzz", "--rate", "1mbit"],
    ["doctor", "--fleet", "x", "--lab", "zzzz", "--interval"],
]


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(COMMANDS), st.lists(st.sampled_from(HOSTILE) | st.text(max_size=8), min_size=1, max_size=3))
def test_hostile_options_exit_cleanly(tmp_path: Path, command: list[str], values: list[str]) -> None:
    args = [*command, *values]
    if args[0] in ("plan", "render", "init"):  # output only ever under this test's directory
        args += ["-o", str(tmp_path / "out")]
    assert_clean_exit(args)


def test_the_json_error_shape_of_a_bad_plan(corpus: dict[str, Path]) -> None:
    result = runner.invoke(app, ["render", str(corpus["truncated.json"]), "--json"])
    assert result.exit_code == 2
    body = json.loads(result.stdout)
    assert body["error"] == "PlanError"
    assert "cannot read plan: Invalid JSON: EOF while parsing" in body["problems"][0]["message"]
