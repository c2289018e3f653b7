"""SIGINT and SIGTERM, once or in a burst (a second Ctrl-C during the clean-up): every command
ends with 130 or 143, no traceback, its clean-up done once. Each case runs in its own process,
as a user's terminal or systemd would signal it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")
# A command of gpunet's own shape: handles_errors around a long wait whose clean-up takes a while,
# long enough for the rest of a burst to arrive while it runs.
COMMAND = textwrap.dedent("""
    import os, time
    from pathlib import Path
    import typer
    from gpunet.cli.errors import handles_errors

    log = Path(os.environ["GPUNET_TEST_LOG"])

    @handles_errors
    def wait(as_json: bool = False) -> None:
        try:
            log.write_text("ready\\n")
            time.sleep(60)
        finally:
            time.sleep(0.5)
            with log.open("a") as handle:
                handle.write("cleaned\\n")

    typer.run(wait)
""")


def _env(**more: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, **more}


def _burst(process: subprocess.Popen[str], signum: int, count: int) -> tuple[int, str, str]:
    for _ in range(count):
        process.send_signal(signum)
        time.sleep(0.02)
    stdout, stderr = process.communicate(timeout=30)
    return process.returncode, stdout, stderr


def _until(ready: Callable[[], bool], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)


@pytest.mark.parametrize(("signum", "count", "status"), [
    (signal.SIGINT, 1, 130), (signal.SIGINT, 2, 130), (signal.SIGINT, 5, 130),
    (signal.SIGTERM, 1, 143), (signal.SIGTERM, 5, 143)])
def test_a_burst_of_signals_ends_the_command_once_through_its_clean_up(tmp_path: Path, signum: int, count: int,
                                                                       status: int) -> None:
    log = tmp_path / "log"
    process = subprocess.Popen([sys.executable, "-c", COMMAND], env=_env(GPUNET_TEST_LOG=str(log)), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _until(lambda: log.exists() and log.read_text() == "ready\n")  # written, not only created
    rc, _, stderr = _burst(process, signum, count)
    assert rc == status, stderr
    assert "Traceback" not in stderr and f"interrupted by {signal.Signals(signum).name}" in stderr, stderr
    assert log.read_text() == "ready\ncleaned\n"  # the clean-up ran, once, to its end


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(("signum", "count", "status"), [
    (signal.SIGINT, 1, 130), (signal.SIGINT, 5, 130), (signal.SIGTERM, 2, 143)])
def test_the_exporter_stops_cleanly_on_any_number_of_signals(tmp_path: Path, signum: int, count: int,
                                                             status: int) -> None:
    port = _free_port()
    errors = tmp_path / "stderr"
    with errors.open("w") as sink:
        process = subprocess.Popen([sys.executable, "-m", "gpunet", "exporter", "--listen", f"127.0.0.1:{port}"],
                                   env=_env(), text=True, stdout=subprocess.PIPE, stderr=sink)
        _until(lambda: "serving" in errors.read_text())
        rc, _, _ = _burst(process, signum, count)
    text = errors.read_text()
    assert rc == status and "Traceback" not in text, text
    with socket.socket() as again:  # the port was closed on the way out
        again.bind(("127.0.0.1", port))
