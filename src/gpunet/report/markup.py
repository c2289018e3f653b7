"""Small HTML builders: every value escaped where it enters, nothing else ever reaches the page."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

Cell = str | int | float | None


class Raw(str):
    """Markup built here (a link, a code span), inserted as it is."""

    __slots__ = ()


def cell(value: Cell | Raw) -> str:
    if isinstance(value, Raw):
        return value
    if value is None:
        return "–"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return escape(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Cell | Raw]], css: str = "",
          numeric: Sequence[int] = ()) -> str:
    """A table; `numeric` columns align right."""
    align = set(numeric)
    head = "".join(f'<th{" class=num" if i in align else ""}>{escape(h)}</th>' for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td{" class=num" if i in align else ""}>{cell(v)}</td>'
                                     for i, v in enumerate(row)) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def link(target: str, text: str) -> Raw:
    return Raw(f'<a href="#{escape(target)}">{escape(text)}</a>')


def code(text: str) -> Raw:
    return Raw(f"<code>{escape(text)}</code>")


def para(text: str, css: str = "") -> str:
    return f'<p class="{css}">{escape(text)}</p>' if css else f"<p>{escape(text)}</p>"


def pill(verdict: str) -> Raw:
    """A verdict in words and a sign, never colour alone."""
    sign = {"pass": "✔", "warn": "▲", "fail": "✖", "info": "i", "not given": "○"}.get(verdict, "")
    css = verdict.replace(" ", "-")
    return Raw(f'<span class="pill v-{css}">{sign} {escape(verdict)}</span>')


def section(key: str, title: str, body: str, css: str = "") -> str:
    return f'<section id="{escape(key)}" class="{css}"><h2>{escape(title)}</h2>\n{body}\n</section>'


def not_given(what: str, how: str) -> str:
    """A family nobody gave: said in words, never an empty section that reads as clean."""
    return (f'<p class="not-given"><strong>Not given.</strong> This report was made without {escape(what)}: '
            f"nothing here says they pass. {how}</p>")
