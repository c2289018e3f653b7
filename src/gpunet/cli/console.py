"""The two consoles every command prints to: results on stdout, progress and errors on stderr."""

from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table
from rich.text import Text

stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def cell(value: object) -> Text:
    """Text from a tool, a node or a database, shown as it is: never read as Rich markup, and
    control characters (a terminal escape in an interface name) shown as U+FFFD."""
    return Text("".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in str(value)))


def print_table(table: Table) -> None:
    """On a terminal as wide as the terminal, and as wide as COLUMNS says where it is set; piped
    without it, as wide as the table needs, not the 80 columns Rich assumes without a terminal (a
    row broken over lines defeats grep and cut)."""
    if stdout.is_terminal or os.environ.get("COLUMNS"):
        stdout.print(table)
        return
    natural = Console(width=10_000).measure(table).maximum
    Console(file=stdout.file, width=max(stdout.width, natural), highlight=False, color_system=None).print(table)
