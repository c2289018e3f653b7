"""gpunet on the nodes: which one runs there (`fleet install`'s venv first, else the node's own
Python), and whether it is this version.

Every command that runs gpunet on a node (`doctor NODES`, apply's verifying doctor) goes through
LAUNCH: a constant sh script that picks `PREFIX/venv/bin/python` when it exists, else the fallback
interpreter, and runs BOOT there. BOOT checks the installed gpunet's version against the admin
host's before anything version-specific runs (an older doctor would trip over today's options), says
on stderr which gpunet it found (one VERSION_MARK line, JSON), and only then runs gpunet's CLI.
Prefix, interpreter and version are operands, never pasted into the script.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from gpunet import __version__
from gpunet.fleet import NodeOutcome
from gpunet.model.base import Frozen

DEFAULT_PREFIX = "/opt/gpunet"  # PREFIX/venv: the venv; PREFIX/wheels: the wheels it came from
FALLBACK_PYTHON = "python3"
VERSION_MARK = "gpunet-version "
WRONG_VERSION_EXIT = 3

# $1 the prefix, $2 the fallback interpreter, then the interpreter's own arguments. The venv runs
# isolated (-I): no PYTHONPATH or user site can put another gpunet in front of the venv's.
LAUNCH = r"""
prefix=$1 fallback=$2
shift 2
if [ -x "$prefix/venv/bin/python" ]; then exec "$prefix/venv/bin/python" -I "$@"; fi
exec "$fallback" "$@"
"""

# argv[1] the admin host's gpunet version, the rest gpunet's own arguments. Standard library
# only: it must run where gpunet is missing or broken, to say so.
BOOT = r"""
import json, sys
from importlib.metadata import PackageNotFoundError, version
wanted = sys.argv[1]
try:
    found = version("gpunet")
except PackageNotFoundError:
    found = ""
print("gpunet-version " + json.dumps({"found": found, "wanted": wanted, "python": sys.executable}),
      file=sys.stderr, flush=True)
if found != wanted:
    print(f"gpunet: {'gpunet ' + found if found else 'no gpunet'} for {sys.executable} on this node, "
          f"{wanted} on the admin host", file=sys.stderr)
    sys.exit(3)
import runpy
sys.argv = ["gpunet", *sys.argv[2:]]
runpy.run_module("gpunet", run_name="__main__", alter_sys=True)
"""


def venv_python(prefix: str) -> str:
    return f"{prefix}/venv/bin/python"


def launch_argv(prefix: str, fallback: str = FALLBACK_PYTHON, wanted: str = __version__) -> list[str]:
    """The argv prefix that runs gpunet on a node; gpunet's own arguments follow it."""
    return ["sh", "-c", LAUNCH, "gpunet-launch", prefix, fallback, "-c", BOOT, wanted]


class NodeGpunet(Frozen):
    """What a node's launcher found: the gpunet version there ("" for none) and the Python it ran."""

    found: str
    wanted: str
    python: str

    @property
    def matches(self) -> bool:
        return self.found == self.wanted

    def problem(self) -> str:
        there = f"gpunet {self.found}" if self.found else "no gpunet"
        return f"{there} on the node ({self.python}), {self.wanted} here"


def node_gpunet(outcome: NodeOutcome) -> NodeGpunet | None:
    """The launcher's VERSION_MARK line from a node's stderr, or None (not reached, or the node
    ran no launcher). The line is the node's word: checked for shape, shown escaped."""
    for line in outcome.stderr.splitlines():
        if not line.startswith(VERSION_MARK):
            continue
        try:
            data = json.loads(line.removeprefix(VERSION_MARK))
            return NodeGpunet(found=str(data["found"])[:80], wanted=str(data["wanted"])[:80],
                              python=str(data["python"])[:300])
        except (ValueError, KeyError, TypeError):
            return None
    return None


def install_command(nodes: str, reach_words: Sequence[str], prefix: str = DEFAULT_PREFIX) -> str:
    """The command line that puts this gpunet on `nodes` (quoted for a shell: it is read and pasted)."""
    words = ["gpunet", "fleet", "install", nodes, *reach_words]
    if prefix != DEFAULT_PREFIX:
        words += ["--prefix", prefix]
    return shlex.join(words)
