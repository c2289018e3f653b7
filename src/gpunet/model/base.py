"""Shared pydantic base: frozen, strict about unknown keys."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

M = TypeVar("M", bound=BaseModel)
_set = object.__setattr__


class Frozen(BaseModel):
    """Immutable model that refuses unknown keys (a typo is an error, not a silent default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


@contextmanager
def bulk_objects() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of acyclic models (a 100k-GPU
    plan): its full passes over them would double or triple the time. Restored on exit."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


FREEZE_FROM = 50_000  # objects a Plan holds about 5 per cable: from ~250 000 of them, freezing pays


def keep_built(cables: int) -> None:
    """A large Plan just built or read is immutable and lives to the end of the command: hand every
    object alive now to the collector's permanent generation, so its later full passes (rendering
    the files, the failure analysis) never walk the plan's millions of objects again (a fifth of the
    files' time at 12 500 nodes). They are still freed by reference counting; only a cycle made
    before this point would never be collected, and a plan has none. Small plans (every test's)
    are left alone."""
    if cables >= FREEZE_FROM:
        gc.freeze()


def trusted(cls: type[M], fields: set[str], values: dict[str, Any]) -> M:
    """An instance of `cls` from values gpunet computed itself, every field given (defaults
    included, `fields` being the model's field names): what model_construct builds, without its
    per-field default resolution, which is most of the time of the 10^6 cables of a 1M-GPU plan.
    Never for values read from a file or a user: those go through model_validate."""
    made = cls.__new__(cls)
    _set(made, "__dict__", values)
    _set(made, "__pydantic_fields_set__", fields)
    _set(made, "__pydantic_extra__", None)
    _set(made, "__pydantic_private__", None)
    return made


_FIELDS_SETS: dict[tuple[int, tuple[str, ...]], tuple[set[str], set[str]]] = {}


def updated(model: M, update: dict[str, Any]) -> M:
    """model.model_copy(update=update) for a model gpunet built and values it computed: the same
    fields, fields set and order, a fraction of the time (a 1M-GPU plan addresses 10^6 interfaces).
    Copies of one model share one fields set, as model_construct's share theirs (nothing changes
    a frozen model's): a million sets would be ~200 MB."""
    before = model.__pydantic_fields_set__
    key = (id(before), tuple(update))
    known = _FIELDS_SETS.get(key)
    if known is None or known[0] is not before:  # held, so its id is not reused while cached
        if len(_FIELDS_SETS) > 4096:
            _FIELDS_SETS.clear()
        known = _FIELDS_SETS[key] = (before, before | update.keys())
    return trusted(type(model), known[1], model.__dict__ | update)
