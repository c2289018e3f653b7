"""Text from tools, nodes and databases is printed as it is: never Rich markup, never a terminal escape."""

from __future__ import annotations

import pytest
from rich.console import Console

from gpunet.cli import doctor
from gpunet.cli.console import Terminal, cell, shown
from gpunet.fleet.doctor import FleetDoctorReport


def test_markup_and_escapes_in_a_value_are_shown_not_obeyed() -> None:
    console = Console(record=True, width=80, color_system="truecolor")
    console.print(cell("eth0[bold red]x[/] \x1b[31mred\x1b]8;;http://evil\x07"))
    text = console.export_text()
    assert "[bold red]x[/]" in text and "\x1b" not in text and "\x07" not in text
    assert text.count("\ufffd") == 3


def test_a_value_inside_gpunets_own_markup_is_shown_not_obeyed() -> None:
    console = Console(record=True, width=200, color_system="truecolor")
    hostile = "[link=http://evil]click[/link] [bold]\x1b[2J"
    console.print(f"[red]no findings[/red] {shown(hostile)}")
    text = console.export_text()
    assert "[link=http://evil]click[/link] [bold]" in text and "\x1b" not in text


def test_doctor_prints_an_unreachable_nodes_reason_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    console = Terminal(record=True, width=200, highlight=False)
    monkeypatch.setattr(doctor, "stdout", console)
    why = "ssh: [link=http://evil]connect[/link] refused [/bold]"
    doctor._print_fleet(FleetDoctorReport(nodes=1, findings=(), unreachable={"gn[01-02]": why}), False, False)
    text = console.export_text()
    assert why in text and "gn[01-02]" in text
