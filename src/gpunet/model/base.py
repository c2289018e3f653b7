"""Shared pydantic base: frozen, strict about unknown keys."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import BaseModel, ConfigDict


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
