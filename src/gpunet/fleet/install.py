"""`fleet install`: this gpunet into a venv on every node, from wheels only.

The wheels (wheels.py) go to each node as PREFIX/wheels through `fleet copy` (checked with sha256
there); the node makes PREFIX/venv with its own `python3 -m venv` and installs with pip
`--no-index --find-links PREFIX/wheels --only-binary :all:`, its configuration files and
environment ignored, so no index is ever asked; then the launcher every fleet command uses
(node_gpunet.py) must find exactly this version there. In a lab, PREFIX lies in each server's own
tree: the servers share this machine's filesystem and Python, and nothing touches this host's
site-packages.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from ClusterShell.NodeSet import NodeSet

from gpunet import __version__
from gpunet.fleet import ClusterShellRunner, NodeOutcome
from gpunet.fleet.node_gpunet import launch_argv, node_gpunet, venv_python
from gpunet.fleet.steps import run_each
from gpunet.fleet.transfer import copy_to, reached, why
from gpunet.model.base import Frozen
from gpunet.model.nodeset import fold

# $1 the node's Python, $2 the prefix, then pip's arguments. A prefix that holds something other
# than a venv is never cleared; every message a node gives starts with "gpunet: ".
INSTALL = r"""
set -u
py=$1 prefix=$2
shift 2
venv=$prefix/venv
fail() { echo "gpunet: $*" >&2; exit 1; }
command -v "$py" >/dev/null 2>&1 || fail "no $py on this node: install Python 3.11 or later"
"$py" -c 'import venv, ensurepip' 2>/dev/null || fail "$py has no venv module or no ensurepip: install \
python3-venv (Debian, Ubuntu: apt-get install python3-venv; RHEL, Fedora: dnf install python3), then run this again"
if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then fail "$venv is there and is not a venv: not replacing it"; fi
"$py" -m venv --clear "$venv" >&2 || fail "$py -m venv $venv failed"
PIP_CONFIG_FILE=/dev/null "$venv/bin/python" -I -m pip "$@" || fail "pip could not install from the wheels \
(its message above)"
"""


class InstallOutcome(Frozen):
    node: str
    ok: bool
    error: str | None = None
    reached: bool = True  # False: SSH never got to the node
    python: str = ""  # the Python gpunet now runs with there
    pip: tuple[str, ...] = ()  # the pip command line the node ran
    log: str = ""  # pip's own output (the last 4000 characters)


class InstallResult(Frozen):
    version: str
    prefix: str
    wheels: tuple[str, ...]
    seconds: float
    outcomes: dict[str, InstallOutcome]

    @property
    def failed(self) -> list[str]:
        return [n for n, o in self.outcomes.items() if not o.ok]

    def groups(self) -> list[tuple[str, InstallOutcome]]:
        """Nodes with the same outcome folded, failures last."""
        by_key: dict[tuple[bool, str | None], list[str]] = defaultdict(list)
        for name, outcome in self.outcomes.items():
            by_key[outcome.ok, outcome.error].append(name)
        folded = [(fold(names), self.outcomes[names[0]]) for names in by_key.values()]
        return sorted(folded, key=lambda g: (not g[1].ok, g[0]))


def pip_argv(wheels: str, version: str = __version__) -> list[str]:
    """pip's arguments on a node: the wheels sent, never an index; binary wheels only (no build)."""
    return ["install", "--no-index", "--find-links", wheels, "--only-binary", ":all:", "--isolated",
            "--no-cache-dir", "--disable-pip-version-check", f"gpunet=={version}"]


def install_argv(python: str, prefix: str, version: str = __version__) -> list[str]:
    return ["sh", "-c", INSTALL, "gpunet-install", python, prefix, *pip_argv(f"{prefix}/wheels", version)]


def install_to(runner: ClusterShellRunner, prefixes: Mapping[str, str], wheels: Path, python: str, *,
               timeout: float = 600, version: str = __version__) -> dict[str, InstallOutcome]:
    """The wheels in `wheels` (a directory named "wheels") to each node's prefix (node -> its
    PREFIX as the node sees it), installed there and checked through the launcher."""
    made = run_each(runner, {n: ["mkdir", "-p", "--", p] for n, p in prefixes.items()}, timeout=timeout)
    done = {n: _failed(n, o, "making the prefix") for n, o in made.items() if o.rc != 0}
    sent = _send(runner, {n: p for n, p in prefixes.items() if n not in done}, wheels, timeout)
    done |= {n: _failed(n, o, "sending the wheels") for n, o in sent.items() if o.rc != 0}
    live = {n: p for n, p in prefixes.items() if n not in done}
    installed = run_each(runner, {n: install_argv(python, p, version) for n, p in live.items()}, timeout=timeout)
    done |= {n: _failed(n, o, "installing", log=True) for n, o in installed.items() if o.rc != 0}
    live = {n: p for n, p in live.items() if n not in done}
    checked = run_each(runner, {n: [*launch_argv(p, python, version), "--version"] for n, p in live.items()},
                       timeout=timeout)
    for n, outcome in checked.items():
        done[n] = _checked(n, outcome, live[n], installed[n], version)
    return {n: done[n] for n in prefixes}


def _send(runner: ClusterShellRunner, prefixes: Mapping[str, str], wheels: Path,
          timeout: float) -> dict[str, NodeOutcome]:
    """One copy per distinct prefix (a lab's servers: each its own tree), as node outcomes."""
    by_prefix: dict[str, list[str]] = defaultdict(list)
    for node, prefix in prefixes.items():
        by_prefix[prefix].append(node)
    outcomes: dict[str, NodeOutcome] = {}
    for prefix, nodes in by_prefix.items():
        result = copy_to(runner, NodeSet.fromlist(nodes), wheels, prefix, compress="none", timeout=timeout)
        outcomes |= {n: NodeOutcome(node=n, rc=0 if o.ok else 1 if o.reached else 255,
                                    stderr=f"gpunet: {o.error}" if o.error else "") for n, o in result.outcomes.items()}
    return outcomes


def _failed(node: str, outcome: NodeOutcome, step: str, log: bool = False) -> InstallOutcome:
    return InstallOutcome(node=node, ok=False, error=f"{step}: {why(outcome)}", reached=reached(outcome),
                          log=(outcome.stdout + outcome.stderr)[-4000:] if log else "")


def _checked(node: str, outcome: NodeOutcome, prefix: str, installed: NodeOutcome, version: str) -> InstallOutcome:
    """Installed, and the launcher finds this version in the venv (not some other gpunet)."""
    found, python = node_gpunet(outcome), venv_python(prefix)
    pip = tuple(pip_argv(f"{prefix}/wheels", version))
    if found is None or not found.matches or found.python != python or outcome.stdout.strip() != version:
        seen = found.problem() if found else why(outcome)
        return InstallOutcome(node=node, ok=False, error=f"installed, but the launcher runs something else: {seen}",
                              python=found.python if found else "", pip=pip, log=installed.stdout[-4000:])
    return InstallOutcome(node=node, ok=True, python=python, pip=pip, log=installed.stdout[-4000:])

