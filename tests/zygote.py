"""`python -m gpunet ARGS` as a fresh process, without paying for an interpreter's start each time.

A test process that runs gpunet a hundred times (tests/cli/test_hostile_input.py) spent most of
its CPU starting Python and importing typer, rich, pydantic and gpunet's models, the same for every
run. Here one server process per test process (a "zygote") starts once, imports those and forks a
child per run. The child takes the run's working directory, environment, argv, stdin (/dev/null)
and output files, then leaves the server's loop and runs gpunet's `__main__` at the top level of
the script, as `python -m gpunet` does: its exit status, atexit handlers, thread joins and output
flushing are the interpreter's own. Every child starts from the server's untouched state (no
command ever ran there), so a run sees no cache or global another run left. What the server
imported is frozen out of the garbage collector's sight (gc.freeze, as pre-forking servers do):
the children's collections skip it, which halves a child's CPU.

The server imports gpunet's library (`gpunet.api`) from wherever PYTHONPATH points, an older gpunet
included (what it lacks is simply not preloaded), but never `gpunet.cli`, whose consoles read the
terminal and COLUMNS when imported, and nothing that starts threads (numpy's BLAS), which a fork
would not carry over. What a fork cannot change either is what the interpreter and the preloaded
libraries read when they started: variables named PYTHON*, LC_*/LANG, typer's and Rich's. A run
whose environment differs from the server's in anything but the variables gpunet and ClusterShell
read while a command runs (GPUNET_*, CLUSTERSHELL_* but CLUSTERSHELL_CFGDIR; and PYTEST_CURRENT_TEST)
starts a real interpreter instead.

This file is both: imported, it is the client (`run_gpunet`); run as a script, it is the server.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import locale
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

PRELOADED = ("typer", "typer.main", "typer.core", "typer.rich_utils", "rich.console", "rich.table", "rich.text",
             "rich.markup", "rich.progress", "rich.box", "pydantic", "pydantic_core", "annotated_types", "yaml",
             "asyncio", "concurrent.futures", "subprocess", "tempfile", "sqlite3", "ipaddress", "json", "csv")
# The library behind the commands, less the simulator and `compare` (numpy) and the CLI.
PRELOADED_GPUNET = tuple(f"gpunet.api.{name}" for name in (
    "specs", "plans", "fleet", "doctor", "bench", "bench_regular", "lab", "monitor", "report", "fabric", "apply"))
# Read by gpunet or ClusterShell while a command runs, never by what the server preloads; and the
# test pytest is running, which it changes with every test.
FORKABLE_VARIABLES = ("GPUNET_", "CLUSTERSHELL_", "PYTEST_CURRENT_TEST")
# ...but ClusterShell makes the paths of its configuration files (defaults.conf, topology.conf)
# from this one as it is imported (a gateway's topology.conf there was not seen by a forked run: it
# connected directly)
READ_WHEN_PRELOADED = ("CLUSTERSHELL_CFGDIR",)


def run_gpunet(args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """What `subprocess.run([python, -m, gpunet, *args], capture_output=True, text=True, cwd=cwd,
    env=env, timeout=timeout)` returns (TimeoutExpired after killing it, the same way)."""
    env = dict(os.environ if env is None else env)
    server = _server()
    if server is None or not server.serves(env):
        return subprocess.run([sys.executable, "-m", "gpunet", *args], capture_output=True, text=True,
                              cwd=cwd, env=env, timeout=timeout, check=False)
    return server.run(args, cwd=Path.cwd() if cwd is None else cwd, env=env, timeout=timeout)


class _Server:
    def __init__(self) -> None:
        self.env = dict(os.environ)
        # Unbuffered: a reply line read ahead into a buffer would hide from select() below.
        self.process = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env=self.env, bufsize=0)
        self.outputs = Path(tempfile.mkdtemp(prefix="gpunet-zygote-"))

    def serves(self, env: dict[str, str]) -> bool:
        changed = {k for k in env.keys() | self.env.keys() if env.get(k) != self.env.get(k)}
        return self.process.poll() is None and all(k.startswith(FORKABLE_VARIABLES) and k not in READ_WHEN_PRELOADED
                                                    for k in changed)

    def run(self, args: list[str], *, cwd: Path, env: dict[str, str],
            timeout: float) -> subprocess.CompletedProcess[str]:
        out, err = self.outputs / "stdout", self.outputs / "stderr"
        request = {"args": args, "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err)}
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        pid = int(self.process.stdout.readline())
        finished, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not finished:
            os.kill(pid, signal.SIGKILL)
        status = int(self.process.stdout.readline())
        done = subprocess.CompletedProcess([sys.executable, "-m", "gpunet", *args], status, _text(out), _text(err))
        if not finished:
            raise subprocess.TimeoutExpired(done.args, timeout, done.stdout, done.stderr)
        return done

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        for leftover in self.outputs.iterdir():
            leftover.unlink()
        self.outputs.rmdir()


def _text(path: Path) -> str:
    """The file decoded as `text=True` decodes a pipe: the locale's encoding, universal newlines."""
    data = path.read_bytes().decode(locale.getpreferredencoding(False))
    return data.replace("\r\n", "\n").replace("\r", "\n")


_servers: dict[int, _Server | None] = {}  # by pid: a forked test process starts its own


def _server() -> _Server | None:
    if os.getpid() not in _servers:
        try:
            server: _Server | None = _Server()
        except OSError:
            server = None  # a fresh interpreter per run, as before
        _servers[os.getpid()] = server
        if server is not None:
            atexit.register(server.close)
    return _servers[os.getpid()]


def _serve() -> None:
    """The server's loop: one request a line on stdin; the child's pid, then its exit status, a
    line each on stdout. Returns only in a child, set up to be the run."""
    for name in PRELOADED:
        __import__(name)
    for name in PRELOADED_GPUNET:
        with contextlib.suppress(ImportError):  # an older gpunet without it: its children import it if they need it
            __import__(name)
    # What is here now lives as long as any child: the children's collector never walks it, so a
    # child neither copies the pages it sits on nor spends its run and its exit scanning it (half a
    # child's CPU before).
    gc.freeze()
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _become(request)
            return
        replies.write(b"%d\n" % pid)
        replies.flush()
        replies.write(b"%d\n" % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        replies.flush()
    sys.exit(0)


def _become(request: dict[str, object]) -> None:
    """This child as `python -m gpunet ARGS` started in the request's directory and environment."""
    nothing = os.open(os.devnull, os.O_RDONLY)
    out = os.open(str(request["stdout"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(str(request["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for fd, target in ((nothing, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(str(request["cwd"]))
    os.environ.clear()
    os.environ.update(request["env"])  # type: ignore[arg-type]
    sys.path[0] = os.getcwd()  # `python -m` puts the working directory first, as here
    sys.argv = ["-m", *request["args"]]  # type: ignore[misc]


if __name__ == "__main__":
    _serve()
    import runpy

    runpy.run_module("gpunet", run_name="__main__", alter_sys=True)
