"""The two consoles every command prints to: results on stdout, progress and errors on stderr."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def cell(value: object) -> Text:
    """Text from a tool, a node or a database, shown as it is: never read as Rich markup, and
    control characters (a terminal escape in an interface name) shown as U+FFFD."""
    return Text("".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in str(value)))
