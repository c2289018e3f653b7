"""A reverted node says why its verification failed: the doctor after the change ran out of the
time its deadline left it, or the new connection failed with ssh's own words, never a guess
between them. The runner is the fleet's exec transport, each node a real local process."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from gpunet import __version__
from gpunet.apply import ApplyOptions, Remote
from gpunet.apply.manifest import DEFAULT_TARGETS, Where
from gpunet.apply.rollout import BatchRun
from gpunet.fleet import ClusterShellRunner
from gpunet.fleet.node_gpunet import VERSION_MARK
from tests.apply.test_manifest import PLAN


def _batch(template: str) -> BatchRun:
    remote = Remote(runner=ClusterShellRunner(transport="exec", template=template), where=Where())
    return BatchRun(PLAN, ["gpu1"], remote, ApplyOptions(targets=DEFAULT_TARGETS), "tx-test")


def test_a_doctor_that_outlasts_the_deadline_says_how_long_it_had() -> None:
    batch = _batch("sh -c 'sleep 20' %h")
    assert not batch._verify("gpu1", (), timeout=1.0)
    assert batch.new_failures["gpu1"] == ("the doctor did not end within 1.0 s (a longer --timeout leaves it more)",)


def test_a_connection_that_fails_says_ssh_s_words() -> None:
    batch = _batch("sh -c 'echo \"ssh: connect to host gpu1 port 22: Connection refused\" >&2; exit 255' %h")
    assert not batch._verify("gpu1", (), timeout=10.0)
    assert batch.new_failures["gpu1"] == (
        "the doctor gave no findings (exit 255: ssh: connect to host gpu1 port 22: Connection refused)",)


def test_a_doctor_killed_after_the_launcher_spoke_says_how_it_ended(tmp_path: Path) -> None:
    """The launcher's version line (the right gpunet) is not why: CI once read a reason that was
    only that line, for a doctor that ended without a word of its own."""
    node = tmp_path / "node.sh"
    mark = json.dumps({"found": __version__, "wanted": __version__, "python": "python3"})
    node.write_text(f"echo {shlex.quote(VERSION_MARK + mark)} >&2\nkill -9 $$\n")
    batch = _batch(f"sh {node} %h")
    assert not batch._verify("gpu1", (), timeout=10.0)
    (reason,) = batch.new_failures["gpu1"]
    assert reason.startswith("the doctor gave no findings (exit 137") and VERSION_MARK not in reason, reason
