"""Shared pydantic base: frozen, strict about unknown keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable model that refuses unknown keys (a typo is an error, not a silent default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
