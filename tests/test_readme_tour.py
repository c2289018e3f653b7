"""The README's tour, run as written (issue 24): every command of the fenced `sh` blocks under
"## A tour" runs through `python -m gpunet` in a fresh directory and must exit as its comment says
(`# exit N ...`). The commands are read from README.md on every run, so an edit there changes what
runs here; a line the test cannot run as written, or one that does not state its exit, fails.

What differs from a user's shell, and only this: the leading `gpunet` is this interpreter's
`python -m gpunet`; a block's `--lab ID` gets a lab id of this test process (tests/labs.py) in
place of the README's literal one, so the tour never meets a user's lab or a parallel test's; files
the tour names under `tests/fixtures/` are copied from this clone into the directory it runs in,
which is where they are for a user running the tour from the clone's root. `> FILE` at the end of
a line sends stdout there, as the shell does; any other shell syntax is refused.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpunet.lab.build import lab_down
from tests.labs import lab_id
from tests.zygote import run_gpunet

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
TOUR_HEADING = "## A tour"
FIXTURES = "tests/fixtures/"
EXIT_COMMENT = re.compile(r"^exit (\d+)\b")
OTHERWISE = re.compile(r"\((\d+) if ([^)]*)\)")  # "(1 if one is low or stays inconclusive)": another exit, and when
PLAIN_WORDS = {"if", "one", "is", "or", "and", "stays", "any", "a", "the", "it", "of"}
COMMENT = re.compile(r"\s#(?:\s|$)")  # a comment starts at a '#' after a blank, as in sh
SHELL_WORDS = {"|", "||", "&", "&&", ";", "<", ">>", "2>", "2>&1", "&>"}
COMMAND_TIMEOUT_S = 600  # bench on a loaded 2-core host; a hang still ends the test


@dataclass(frozen=True)
class TourCommand:
    """One line of the tour: the arguments after `gpunet`, where stdout goes, the exit it states."""

    line: str
    args: tuple[str, ...]
    stdout_to: str | None
    exit_code: int
    otherwise: tuple[tuple[int, frozenset[str]], ...] = ()  # another exit the line states, and words of its case

    def explains(self, returncode: int, said: str) -> bool:
        """Whether the line states this exit: its own, or another whose case the output names (a
        bench pair inconclusive on a host too busy to measure it, as the line says it may be)."""
        return returncode == self.exit_code or any(
            returncode == code and any(word in said.lower() for word in words) for code, words in self.otherwise)

    def lab(self) -> str | None:
        """The lab id the line names with --lab, if any."""
        return next((self.args[i + 1] for i, word in enumerate(self.args[:-1]) if word == "--lab"), None)


def tour_blocks(readme: str) -> list[list[str]]:
    """The lines of each fenced `sh` block between the tour's heading and the next heading."""
    blocks: list[list[str]] = []
    inside_tour = in_fence = False
    for line in readme.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            if in_fence and inside_tour and line.strip() == "```sh":
                blocks.append([])
            continue
        if not in_fence and line.startswith("#"):
            if inside_tour:
                break
            inside_tour = line.strip() == TOUR_HEADING
        elif in_fence and inside_tour and blocks and line.strip():
            blocks[-1].append(line)
    return [block for block in blocks if block]


def parse_command(line: str) -> TourCommand:
    """A tour line as the test runs it; ValueError naming the line when it cannot be run as written
    or does not state its exit."""
    split = COMMENT.search(line)
    if split is None:
        raise ValueError(f"no '# exit N' comment: {line!r}")
    command, comment = line[:split.start()], line[split.end():].strip()
    stated = EXIT_COMMENT.match(comment)
    if stated is None:
        raise ValueError(f"the comment does not start with 'exit N': {line!r}")
    words = shlex.split(command)
    if not words or words[0] != "gpunet":
        raise ValueError(f"not a gpunet command: {line!r}")
    stdout_to = None
    if len(words) >= 3 and words[-2] == ">":
        stdout_to, words = words[-1], words[:-2]
    refused = [w for w in words[1:] if w in SHELL_WORDS or w.startswith(("~", ">")) or "$" in w or "`" in w]
    if refused:
        raise ValueError(f"shell syntax the test does not run ({' '.join(refused)}): {line!r}")
    otherwise = tuple((int(code), frozenset(re.findall(r"[a-z]+", case)) - PLAIN_WORDS)
                      for code, case in OTHERWISE.findall(comment))
    return TourCommand(line, tuple(words[1:]), stdout_to, int(stated.group(1)), otherwise)


def parse_block(lines: list[str]) -> list[TourCommand]:
    return [parse_command(line) for line in lines]


BLOCKS = tour_blocks(README.read_text(encoding="utf-8"))


def _needs_lab(lines: list[str]) -> bool:
    return any("--lab" in shlex.split(COMMENT.split(line)[0]) for line in lines)


def _block_params() -> list[object]:
    return [pytest.param(i, id=f"block{i + 1}", marks=[pytest.mark.lab, pytest.mark.slow] if _needs_lab(lines) else [])
            for i, lines in enumerate(BLOCKS)]


def test_the_tour_has_a_plain_block_and_a_lab_block_and_every_line_states_its_exit() -> None:
    assert len(BLOCKS) == 2, f"README's tour: {len(BLOCKS)} sh blocks, this test expects the plain one and the lab one"
    commands = [command for block in BLOCKS for command in parse_block(block)]  # raises on a line it cannot judge
    assert [_needs_lab(block) for block in BLOCKS] == [False, True]
    lab_lines = parse_block(BLOCKS[1])
    assert lab_lines[-1].args[:2] == ("lab", "down"), "the lab block ends by taking its lab down"
    assert len({command.lab() for command in lab_lines if command.lab()}) == 1, "one lab for the whole block"
    assert all(command.exit_code in {0, 1, 2, 3} for command in commands)


@pytest.mark.parametrize(("line", "why"), [
    ("gpunet plan cluster.yaml", "no '# exit N'"),
    ("gpunet plan cluster.yaml   # writes out/", "does not start with 'exit N'"),
    ("pip install gpunet   # exit 0", "not a gpunet command"),
    ("gpunet doctor --json | jq .   # exit 0", "shell syntax"),
    ("gpunet bench run --db ~/b.sqlite   # exit 0", "shell syntax"),
    ("gpunet lab up --lab \"$LAB\"   # exit 0", "shell syntax"),
])
def test_a_line_the_test_cannot_run_as_written_is_refused(line: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        parse_command(line)


def test_a_line_is_read_as_the_shell_reads_it() -> None:
    command = parse_command("gpunet doctor 'gpu[001-006],login01' --lab a --json > doctor.json   # exit 1 on a fail")
    assert command == TourCommand(command.line, ("doctor", "gpu[001-006],login01", "--lab", "a", "--json"),
                                  "doctor.json", 1)
    assert command.lab() == "a"


def test_another_exit_a_line_states_holds_only_where_the_output_names_its_case() -> None:
    command = parse_command("gpunet bench run --lab a   # exit 0: 8 pairs (1 if one is low or stays inconclusive)")
    assert command.otherwise == ((1, frozenset({"low", "inconclusive"})),)
    assert command.explains(0, "8 ok") and command.explains(1, "1 inconclusive, 7 ok")
    assert not command.explains(1, "7 ok, 1 failed") and not command.explains(3, "1 inconclusive")


def _run(command: TourCommand, cwd: Path, lab: str | None) -> subprocess.CompletedProcess[str]:
    args = list(command.args)
    if lab is not None and "--lab" in args:
        args[args.index("--lab") + 1] = lab  # the README's literal id, for this test's own
    for word in args:
        if word.startswith(FIXTURES):
            (cwd / word).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(REPO / word, cwd / word)
    env = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES"}}
    done = run_gpunet(args, cwd=cwd, env=env, timeout=COMMAND_TIMEOUT_S)
    if command.stdout_to is not None:
        (cwd / command.stdout_to).write_text(done.stdout, encoding="utf-8")
    return done


def _walk(commands: list[TourCommand], cwd: Path, lab: str | None) -> None:
    for command in commands:
        done = _run(command, cwd, lab)
        assert command.explains(done.returncode, done.stdout + done.stderr), (
            f"README tour: {command.line!r} exited {done.returncode}, the README says {command.exit_code}\n"
            f"stdout (end): {done.stdout[-2000:]}\nstderr (end): {done.stderr[-2000:]}")


@pytest.mark.parametrize("block", _block_params())
def test_the_tour_runs_as_written(block: int, tmp_path: Path) -> None:
    commands = parse_block(BLOCKS[block])
    if not any(command.lab() for command in commands):
        _walk(commands, tmp_path, None)
        return
    lab = lab_id("tr")
    try:
        _walk(commands, tmp_path, lab)
    finally:
        lab_down(lab)  # also when a command failed midway: the tour's own `lab down` never ran
