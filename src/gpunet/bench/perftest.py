"""perftest (ib_write_bw, ib_read_bw, ib_send_bw and the _lat tests): the result table of a
client or server run, whatever surrounds it (CUDA chatter, CPU-frequency warnings between the
header and the rows, tabs, a sweep of sizes). Pure: text in, PerftestResult out."""

from __future__ import annotations

import re

from gpunet.errors import ParseError
from gpunet.model.base import Frozen

TOOL = "perftest"
TITLE = re.compile(r"^\s*(?P<test>\S.*? (?P<kind>BW|Latency) Test)\s*$")
COLUMN = re.compile(r"#bytes|#iterations|BW peak\[[^\]]+\]|BW average\[[^\]]+\]|MsgRate\[Mpps\]|t_\w+\[usec\]"
                    r"|99(?:\.9)?% percentile\[usec\]")
FIELDS = {"#bytes": "bytes", "#iterations": "iterations", "BW peak": "bw_peak", "BW average": "bw_average",
          "MsgRate[Mpps]": "msg_rate_mpps", "t_min[usec]": "t_min_us", "t_max[usec]": "t_max_us",
          "t_typical[usec]": "t_typical_us", "t_avg[usec]": "t_avg_us", "t_stdev[usec]": "t_stdev_us",
          "99% percentile[usec]": "p99_us", "99.9% percentile[usec]": "p99_9_us"}
SEPARATOR = re.compile(r"^-{20,}\s*$")
BOX = re.compile(r"^\s*\*.*\*?\s*$")
ROW = re.compile(r"^\s*\d+\s+\d+\s")
TWO_DECIMALS = re.compile(r"\d+\.\d{2}")  # perftest prints 2 decimals; wide values glue columns together
WARNING = re.compile(r"warn|conflict|requested mtu|changing to active mtu|support|disabling|error|fail", re.I)
# perftest's MB is 2^20 bytes ("Note: MB=2^20 byte, while Gb=10^9 bits", perftest_parameters.c);
# PR #257 (2024) relabelled it MiB/sec with the same arithmetic.
GBPS_PER_UNIT = {"Gb/sec": 1.0, "MB/sec": 2**20 * 8 / 1e9, "MiB/sec": 2**20 * 8 / 1e9}


class PerftestRow(Frozen):
    bytes: int
    iterations: int
    bw_peak: float | None = None
    bw_average: float | None = None
    msg_rate_mpps: float | None = None
    t_min_us: float | None = None
    t_max_us: float | None = None
    t_typical_us: float | None = None
    t_avg_us: float | None = None
    t_stdev_us: float | None = None
    p99_us: float | None = None
    p99_9_us: float | None = None


class PerftestResult(Frozen):
    test: str  # "RDMA_Write BW Test", "Send Latency Test", ...
    kind: str  # bw | lat
    unit: str | None  # Gb/sec, MB/sec, MiB/sec; None for latency
    rows: tuple[PerftestRow, ...]
    notes: tuple[str, ...] = ()  # every line that is neither banner nor table

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(n for n in self.notes if WARNING.search(n))

    def gbps(self, value: float | None) -> float | None:
        """A bandwidth of this result's rows in Gb/s (10^9 bits)."""
        return None if value is None or self.unit is None else value * GBPS_PER_UNIT[self.unit]


def parse_perftest(text: str) -> PerftestResult:
    lines = text.splitlines()
    test, kind = _title(lines)
    header_at, columns, unit = _header(lines)
    rows, end = _rows(lines, header_at, columns)
    notes = _notes(lines, header_at, end)
    return PerftestResult(test=test, kind=kind, unit=unit, rows=tuple(rows), notes=tuple(notes))


def _title(lines: list[str]) -> tuple[str, str]:
    for line in lines:
        if found := TITLE.match(line):
            return found["test"], "bw" if found["kind"] == "BW" else "lat"
    raise ParseError(TOOL, 1, "no '... BW Test' or '... Latency Test' title")


def _header(lines: list[str]) -> tuple[int, list[str], str | None]:
    for number, line in enumerate(lines):
        if line.lstrip().startswith("#bytes"):
            names = COLUMN.findall(line)
            fields = [FIELDS.get(name.split("[")[0] if name.startswith("BW") else name) for name in names]
            if None in fields or "bytes" not in fields:
                raise ParseError(TOOL, number + 1, f"unknown columns in {line.strip()!r}")
            unit = re.search(r"BW \w+\[([^\]]+)\]", line)
            if unit and unit[1] not in GBPS_PER_UNIT:
                raise ParseError(TOOL, number + 1, f"unknown bandwidth unit {unit[1]!r}")
            return number, [f for f in fields if f], unit[1] if unit else None
    raise ParseError(TOOL, len(lines), "no '#bytes #iterations ...' column header")


def _rows(lines: list[str], header_at: int, columns: list[str]) -> tuple[list[PerftestRow], int]:
    rows: list[PerftestRow] = []
    for number in range(header_at + 1, len(lines)):
        line = lines[number]
        if SEPARATOR.match(line):
            return rows, number
        if ROW.match(line):
            rows.append(_row(line, columns, number + 1))
    if not rows:
        raise ParseError(TOOL, len(lines), "a column header without result rows")
    return rows, len(lines)


def _row(line: str, columns: list[str], number: int) -> PerftestRow:
    values = [piece for token in line.split() for piece in _unglued(token, number)]
    if len(values) != len(columns):
        raise ParseError(TOOL, number, f"{len(values)} values for {len(columns)} columns")
    try:
        return PerftestRow.model_validate(dict(zip(columns, values, strict=True)))
    except ValueError:
        raise ParseError(TOOL, number, f"not numbers: {line.strip()!r}") from None


def _unglued(token: str, number: int) -> list[str]:
    """'2465.901216.65' (t_stdev and the 99th percentile touching) -> ['2465.90', '1216.65']."""
    if token.count(".") <= 1:
        return [token]
    pieces = TWO_DECIMALS.findall(token)
    if "".join(pieces) != token:
        raise ParseError(TOOL, number, f"cannot split {token!r} into columns")
    return pieces


def _notes(lines: list[str], header_at: int, end: int) -> list[str]:
    """Lines before the banner (which starts at the title, or the dashes just above it), stray lines
    inside the table, and lines after it; boxes, dashes and blank lines are layout."""
    title_at = next(n for n, line in enumerate(lines) if TITLE.match(line))
    banner_at = title_at - 1 if title_at and SEPARATOR.match(lines[title_at - 1]) else title_at
    chosen = [*lines[:banner_at], *(line for line in lines[header_at + 1:end] if not ROW.match(line)),
              *lines[end + 1:]]
    return [line.strip() for line in chosen if line.strip() and not SEPARATOR.match(line) and not BOX.match(line)]
