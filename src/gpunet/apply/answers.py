"""What the agent on a node answers, as typed models: a node's JSON is input (a compromised node,
a tampered agent, another program printing JSON), so an answer whose known fields are missing or
of the wrong type is that node's error, never a KeyError or TypeError that stops the controller
for every node (issue 22 F8)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

Number = StrictInt | StrictFloat


class AgentAnswer(BaseModel):
    """Any command's answer: the fields the controller reads, typed; others kept as they are."""

    model_config = ConfigDict(extra="allow", frozen=True)

    error: StrictStr | None = None
    refused: StrictBool = False
    txid: StrictStr | None = None
    state: StrictStr | None = None
    configuration: StrictStr | None = None
    reason: StrictStr | None = None
    revert_errors: list[StrictStr] = []
    started: Number | StrictBool | None = None  # epoch seconds in a status; true from `begin`
    finished_at: Number | None = None
    previous: dict[str, Any] | None = None


class FilesAnswer(BaseModel):
    """`files`: the current text of each file asked for (None: absent) and each sysctl's value."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    files: dict[str, StrictStr | None]
    sysctl: dict[str, StrictStr | None]


def problem(exc: ValidationError) -> str:
    """The first thing wrong with an answer, in one line: `files: Field required`."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "answer"
    return f"{where}: {first['msg']}"[:200]
