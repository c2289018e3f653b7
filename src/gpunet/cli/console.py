"""The two consoles every command prints to: results on stdout, progress and errors on stderr."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text


def printable(value: object, keep: str = "\n\t") -> str:
    """The one sanitiser for text from a node, a file, a tool or a database before it reaches a
    terminal: every character Unicode calls a control, format or separator (ESC and the rest of
    C0/C1, bidi overrides, U+2028) shown as U+FFFD, except those in `keep`. A diff or an error
    message then cannot move the cursor, retitle the window, hide a line or write a link."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else "\ufffd" for c in text)


def shown(value: object) -> str:
    """A value from a node, a file, a spec or a tool to put inside a markup string (an f-string
    with gpunet's own [styles]): sanitised, and its brackets escaped so that a hostname, a path or
    an error message reading '[link=...]' is shown, not obeyed. `cell` is for a table cell; a Text
    put into an f-string is a plain str again and no longer protected."""
    return escape(printable(value))


class Terminal(Console):
    """A Console that passes every string it is given through `printable` before reading its
    markup: a message, a table cell or a node's output printed as a plain str is sanitised as a
    `cell` is (gpunet's own styles are markup, applied after, so they still show)."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(printable(text), **options)


stdout = Terminal(highlight=False)
stderr = Terminal(stderr=True, highlight=False, soft_wrap=True)


def cell(value: object) -> Text:
    """Text from a tool, a node or a database, shown as it is: never read as Rich markup, and
    sanitised by `printable`."""
    return Text(printable(value))


def print_table(table: Table) -> None:
    """On a terminal as wide as the terminal, and as wide as COLUMNS says where it is set; piped
    without it, as wide as the table needs, not the 80 columns Rich assumes without a terminal (a
    row broken over lines defeats grep and cut)."""
    if stdout.is_terminal or os.environ.get("COLUMNS"):
        stdout.print(table)
        return
    natural = Console(width=10_000).measure(table).maximum
    Terminal(file=stdout.file, width=max(stdout.width, natural), highlight=False, color_system=None).print(table)
