"""Shared pydantic base: frozen, strict about unknown keys."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

M = TypeVar("M", bound=BaseModel)
# BaseModel's own slots, set through their descriptors: what object.__setattr__ finds for these names
# on every model (none can define them again), without finding them by name each time, a third of
# trusted()'s time.
_SLOTS = {name: BaseModel.__dict__[name].__set__ for name in BaseModel.__slots__}
_set_dict, _set_fields_set = _SLOTS["__dict__"], _SLOTS["__pydantic_fields_set__"]
_set_extra, _set_private = _SLOTS["__pydantic_extra__"], _SLOTS["__pydantic_private__"]


class Frozen(BaseModel):
    """Immutable model that refuses unknown keys (a typo is an error, not a silent default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# Objects a bulk build leaves alive (the collector's young-generation count) from which they are
# frozen at its end: ~50 000 cables' worth. Below it (every test's small plan) nothing is frozen.
FREEZE_FROM = 250_000


@contextmanager
def bulk_objects() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of acyclic models (a 100k-GPU
    plan): its full passes over them would double or triple the time. Restored on exit.

    A large build's survivors (the Plan just designed or read) are then handed to the collector's
    permanent generation (gc.freeze) before it is enabled again: otherwise the first allocation after
    it walks every one of them as young objects (2 s for a 12 500-node plan read back), and later
    full passes again. They are still freed by reference counting; only a cycle among them would
    never be collected, and a plan has none."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_count()[0] >= FREEZE_FROM:
            gc.freeze()
        if collecting:
            gc.enable()


set_fields_set = _set_fields_set  # a model's fields set, replaced in place (model/plan.py shares one per class)


def trusted(cls: type[M], fields: set[str], values: dict[str, Any]) -> M:
    """An instance of `cls` from values gpunet computed itself, every field given (defaults
    included, `fields` being the fields set the slow path records: the model's field names, or
    those a constructor call names, as a verdict's): what model_construct builds, without its
    per-field default resolution, which is most of the time of the 10^6 cables of a 1M-GPU plan.
    Never for values read from a file or a user as they came: those go through model_validate, or
    through a parser that has checked every value and made its type itself (the ibnetdiscover
    parser's nodes and links), where the model's validation could only find what the parser made.
    object.__new__ is what cls.__new__ finds for every model (BaseModel defines none), named
    directly: looked up on the model class it took 1.6 times as long."""
    made = object.__new__(cls)
    _set_dict(made, values)
    _set_fields_set(made, fields)
    _set_extra(made, None)
    _set_private(made, None)
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


_ALL_FIELDS: dict[type[BaseModel], set[str]] = {}


def share_fields_set(model: BaseModel) -> None:
    """Hand `model` its class's one set of every field name when every field was given (as in
    every plan.json gpunet writes): pydantic gives each instance a set of its own, 200-700 bytes,
    more than half of a plan read back (a 1M-GPU plan's ten million models). Nothing changes the
    set of a frozen model, so instances can share it, as trusted() and updated() copies do."""
    fields = model.__pydantic_fields_set__
    cls = type(model)
    every = _ALL_FIELDS.get(cls)
    if every is None:
        every = _ALL_FIELDS[cls] = set(cls.model_fields)
    if len(fields) == len(every):  # a subset of the model's fields (extra keys are refused) as large as all
        _set_fields_set(model, every)
