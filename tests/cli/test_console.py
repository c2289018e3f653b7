"""Text from tools, nodes and databases is printed as it is: never Rich markup, never a terminal escape."""

from __future__ import annotations

from rich.console import Console

from gpunet.cli.console import cell


def test_markup_and_escapes_in_a_value_are_shown_not_obeyed() -> None:
    console = Console(record=True, width=80, color_system="truecolor")
    console.print(cell("eth0[bold red]x[/] \x1b[31mred\x1b]8;;http://evil\x07"))
    text = console.export_text()
    assert "[bold red]x[/]" in text and "\x1b" not in text and "\x07" not in text
    assert text.count("\ufffd") == 3
