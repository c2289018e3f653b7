"""The one place where library errors become messages and exit codes (DESIGN.md #9)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer
from rich.markup import escape

from gpunet.cli.console import printable, stderr
from gpunet.errors import GpunetError, LabUsageError, PlanError, SpecError, UsageError

EXIT_OK, EXIT_CHECKS_FAILED, EXIT_BAD_INPUT = 0, 1, 2

P = ParamSpec("P")
R = TypeVar("R")


def exit_code(error: GpunetError) -> int:
    bad_input = SpecError | PlanError | LabUsageError | UsageError
    return EXIT_BAD_INPUT if isinstance(error, bad_input) else EXIT_CHECKS_FAILED


def report(error: GpunetError, as_json: bool) -> None:
    problems = error.problems if isinstance(error, SpecError) else None
    if as_json:
        body = {"error": type(error).__name__, "problems": [
            {"file": p.file, "line": p.line, "column": p.column, "path": list(p.path),
             "message": p.message, "hint": p.hint} for p in problems
        ] if problems else [{"message": str(error)}]}
        print(json.dumps(body, indent=1))
        return
    for line in [str(p) for p in problems] if problems else str(error).splitlines() or [""]:
        stderr.print(f"[red]error[/red] {escape(printable(line, keep=''))}", markup=True, highlight=False)


def handles_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Run a command; a GpunetError becomes its message and exit code, never a traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except GpunetError as error:
            report(error, bool(kwargs.get("as_json")))
            raise typer.Exit(exit_code(error)) from None

    return wrapper
