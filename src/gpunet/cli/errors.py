"""The one place where library errors become messages and exit codes (DESIGN.md #9).

    0  ok
    1  findings: checks failed, suspects named, regressions, a node's command failed
    2  bad input: a spec, plan, option, file or NodeSet that is wrong
    3  could not run or could not judge: unreachable, a tool missing, a lab or simulator error

With --json every error is one JSON body on stdout, {"error", "exit_code", "problems"}, whatever
its kind, so a script reads the same shape for a typo and for an unreachable lab.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer
from rich.markup import escape

from gpunet.cli.console import printable, stderr
from gpunet.cli.interrupts import Interrupted, exit_status, interruptible
from gpunet.errors import INPUT_ERRORS, CannotJudge, GpunetError, SpecError

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_COULD_NOT = 0, 1, 2, 3
EXIT_CHECKS_FAILED = EXIT_FINDINGS  # the name the commands used before exit 3 existed

P = ParamSpec("P")
R = TypeVar("R")


def exit_code(error: GpunetError) -> int:
    return EXIT_BAD_INPUT if isinstance(error, INPUT_ERRORS) else EXIT_COULD_NOT


def outcome_code(*, findings: bool, unjudged: bool) -> int:
    """A finding is a finding even where other nodes could not be judged: 1 before 3."""
    return EXIT_FINDINGS if findings else EXIT_COULD_NOT if unjudged else EXIT_OK


def error_body(kind: str, code: int, problems: list[dict[str, object]]) -> str:
    return json.dumps({"error": kind, "exit_code": code, "problems": problems}, indent=1)


def report(error: GpunetError, as_json: bool) -> None:
    problems = error.problems if isinstance(error, SpecError) else None
    if as_json:
        print(error_body(type(error).__name__, exit_code(error), [
            {"file": p.file, "line": p.line, "column": p.column, "path": list(p.path), "message": p.message,
             "hint": p.hint} for p in problems] if problems else [{"message": str(error)}]))
        return
    for line in [str(p) for p in problems] if problems else str(error).splitlines() or [""]:
        stderr.print(f"[red]error[/red] {escape(printable(line, keep=''))}", markup=True, highlight=False)


def handles_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Run a command; a GpunetError becomes its message and exit code, never a traceback; SIGINT
    or SIGTERM (any number of them) ends it through its clean-up with 130 or 143 (interrupts.py)."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            with interruptible():
                return command(*args, **kwargs)
        except GpunetError as error:
            report(error, bool(kwargs.get("as_json")))
            raise typer.Exit(exit_code(error)) from None
        except PermissionError as error:  # a lab's, a namespace's or /run/gpunet's: root's to touch
            denied = CannotJudge(f"permission denied: {error.filename or error.strerror}: this needs root "
                                 "(labs, namespaces and their state under /run/gpunet are root's)")
            report(denied, bool(kwargs.get("as_json")))
            raise typer.Exit(EXIT_COULD_NOT) from None
        except KeyboardInterrupt as stop:
            _interrupted(stop, bool(kwargs.get("as_json")))
            raise typer.Exit(exit_status(stop)) from None

    return wrapper


def _interrupted(stop: KeyboardInterrupt, as_json: bool) -> None:
    name = str(stop) if isinstance(stop, Interrupted) else "SIGINT"
    message = f"interrupted by {name}; stopped after cleaning up"
    if as_json:
        print(error_body("Interrupted", exit_status(stop), [{"message": message}]))
    else:
        stderr.print(f"[red]error[/red] {message}", markup=True, highlight=False)
