"""The `text` of a rendered file, for tests parametrised by (example, path) from the manifest."""

from __future__ import annotations

import pytest

from tests.render.rendered import text_of


@pytest.fixture
def text(example: str, path: str) -> str:
    return text_of(example, path)
