"""The one exception tree of gpunet.

    GpunetError                  anything gpunet raises on purpose
    ├── SpecError                the cluster spec is wrong; carries SpecProblem(s) with YAML location
    ├── DesignError              a valid spec that cannot be built (radix too small, subnet full ...)
    │                            also carries SpecProblem(s), located at the spec key at fault
    ├── CatalogError             a parts catalog (--catalog) is wrong; SpecProblem(s) located in its YAML
    ├── PlanError                a plan.json that cannot be read or has the wrong schema version
    ├── UsageError               a command was asked for something that does not exist (exit 2)
    ├── ProbeError               reading a node failed
    │   ├── CommandError         a command exited non-zero
    │   └── ParseError           a tool's output was not understood (tool, line)
    ├── FleetError               running on many nodes failed as a whole
    ├── CannotJudge              the facts gathered cannot carry a verdict (no series mapped, ...)
    └── LabError                 a lab cannot be built, found, changed or fully removed
        └── LabUsageError        a bad lab id, cable name or fault value (exit 2)

The CLI maps these to one line (or, with --json, one JSON body) and an exit code in one place
(cli/errors.py): the input errors (SpecError and its kinds, PlanError, UsageError, LabUsageError)
exit 2, every other GpunetError exits 3 ("could not run or could not judge"), never 1, which
belongs to findings. The library never prints and never exits.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpecProblem:
    """One problem in a spec: where it is, what is wrong, how to fix it."""

    message: str
    path: tuple[str | int, ...] = ()
    hint: str = ""
    file: str = ""
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        where = f"{self.file or '<spec>'}:{self.line}:{self.column}"
        dotted = ".".join(str(p) for p in self.path)
        text = f"{where}: {dotted + ': ' if dotted else ''}{self.message}"
        return f"{text} (hint: {self.hint})" if self.hint else text


class GpunetError(Exception):
    """Base of every error gpunet raises on purpose."""


class SpecError(GpunetError):
    """The spec is malformed or inconsistent; `problems` lists every one found."""

    def __init__(self, problems: list[SpecProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class DesignError(SpecError):
    """The spec is well formed but no fabric satisfies it."""


class CatalogError(SpecError):
    """A parts catalog is malformed; `problems` are located in its YAML like a spec's."""


class PlanError(GpunetError):
    """A plan file is unreadable or of an unsupported schema version."""


class UsageError(GpunetError):
    """A command named a target, node or option value that does not exist."""


class ProbeError(GpunetError):
    """Reading the state of a node failed."""


class CommandError(ProbeError):
    """A command run on a node exited non-zero."""

    def __init__(self, command: str, returncode: int, stderr: str = "") -> None:
        self.command, self.returncode, self.stderr = command, returncode, stderr
        super().__init__(f"{command!r} exited {returncode}: {stderr.strip()[:200]}")


class ParseError(ProbeError):
    """A tool's output did not match what its parser expects."""

    def __init__(self, tool: str, line: int, message: str) -> None:
        self.tool, self.line = tool, line
        super().__init__(f"{tool}: line {line}: {message}")


class FleetError(GpunetError):
    """Running on many nodes failed as a whole (not one node: per-node failure is data)."""


class CannotJudge(GpunetError):
    """What was read cannot carry a verdict either way (nothing mapped to the Plan, a tool missing
    on every node): said, never reported as clean or as broken."""


class LabError(GpunetError):
    """A lab cannot be built, found, changed or fully removed."""


class LabUsageError(LabError):
    """The lab command was given a bad id, cable end or fault value."""


# The errors that mean bad input (exit 2); every other GpunetError could not run or judge (exit 3).
INPUT_ERRORS: tuple[type[GpunetError], ...] = (SpecError, PlanError, UsageError, LabUsageError)
