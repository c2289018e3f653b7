"""Running commands: one small protocol so probes and the lab can be driven by a fake in tests."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Protocol

from gpunet.errors import CommandError


class CommandRunner(Protocol):
    def __call__(
        self, argv: Sequence[str], *, stdin: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]: ...


def run_local(
    argv: Sequence[str], *, stdin: str | None = None, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run argv here (no shell); CommandError when check and the exit status is not 0."""
    try:
        done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except FileNotFoundError as exc:
        raise CommandError(" ".join(argv), 127, f"{argv[0]}: not installed") from exc
    except subprocess.TimeoutExpired as exc:
        raise CommandError(" ".join(argv), 124, f"timed out after {timeout}s") from exc
    if check and done.returncode != 0:
        raise CommandError(" ".join(argv), done.returncode, done.stderr or done.stdout)
    return done
