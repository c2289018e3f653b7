"""nccl-tests (all_reduce_perf, all_gather_perf, alltoall_perf, sendrecv_perf, ...): the result
table of stdout in any version (with or without redop/root columns, '#wrong' or the old float
'error', 'N/A' when checking is off, '[1,0]<stdout>:' tags from mpirun, NCCL INFO and Open MPI
lines anywhere), and the JSON file of `-J/--output_file`. Pure: text in, NcclResult out."""

from __future__ import annotations

import re
from typing import Any

from gpunet.errors import ParseError
from gpunet.files.inputs import load_json
from gpunet.model.base import Frozen

TOOL = "nccl-tests"
MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
LEADING = ("size", "count", "type", "redop", "root")  # the columns before the first 'time'
GROUP = ("time", "algbw", "busbw")  # then a 4th: '#wrong' (a count) or 'error' (old: a float)
STARTING = re.compile(r"^# Collective test starting: (\S+)")
OUT_OF_BOUNDS = re.compile(r"^# Out of bounds values\s*:\s*([0-9]{1,20})\b")
AVG_BUSBW = re.compile(r"^# Avg bus bandwidth\s*:\s*([0-9.eE+-]{1,32}|nan)\b")


class NcclTiming(Frozen):
    time_us: float
    algbw_gbs: float  # GB/s (10^9 bytes), as nccl-tests prints
    busbw_gbs: float
    wrong: int | None = None  # None: 'N/A' (checking off) or an old version's float error column
    error: float | None = None


class NcclRow(Frozen):
    size_bytes: int
    count: int
    type: str
    redop: str | None = None
    root: int | None = None
    out_of_place: NcclTiming | None = None
    in_place: NcclTiming | None = None


class NcclResult(Frozen):
    test: str | None  # all_reduce_perf, when the output names it
    rows: tuple[NcclRow, ...]
    out_of_bounds: int | None = None
    avg_busbw_gbs: float | None = None

    @property
    def ok(self) -> bool:
        """No wrong results anywhere (a '#wrong' or 'Out of bounds' above 0 is data corruption)."""
        timings = [t for r in self.rows for t in (r.out_of_place, r.in_place) if t]
        return not self.out_of_bounds and not any(t.wrong for t in timings)


def parse_nccl_tests(text: str) -> NcclResult:
    lines = [MPI_TAG.sub("", line) for line in text.splitlines()]
    header_at, columns = _header(lines)
    rows = [_row(lines[n], columns, n + 1) for n in range(header_at + 1, len(lines)) if _is_row(lines[n])]
    if not rows:
        raise ParseError(TOOL, len(lines), "a column header without result rows")
    return NcclResult(test=_first(STARTING, lines), rows=tuple(rows),
                      out_of_bounds=_int(_first(OUT_OF_BOUNDS, lines)),
                      avg_busbw_gbs=_float(_first(AVG_BUSBW, lines)))


def _header(lines: list[str]) -> tuple[int, list[str]]:
    for number, line in enumerate(lines):
        names = line.lstrip("#").split()
        if line.startswith("#") and names[:2] == ["size", "count"] and "time" in names:
            leading = names[:names.index("time")]
            groups = len(names) - len(leading)
            if any(n not in LEADING for n in leading) or groups not in (4, 8):
                raise ParseError(TOOL, number + 1, f"unknown columns {' '.join(names)!r}")
            return number, names
    raise ParseError(TOOL, len(lines), "no '#  size  count  type ...' column header")


def _is_row(line: str) -> bool:
    first = line.split(maxsplit=1)[0] if line.strip() else ""
    return first.isdigit()


def _row(line: str, columns: list[str], number: int) -> NcclRow:
    values = line.split()
    if len(values) != len(columns):
        raise ParseError(TOOL, number, f"{len(values)} values for {len(columns)} columns")
    lead = columns.index("time")
    fields: dict[str, Any] = dict(zip(columns[:lead], values[:lead], strict=True))
    timings = [_timing(columns[i + 3], values[i:i + 4], number) for i in range(lead, len(values), 4)]
    try:
        return NcclRow(size_bytes=int(fields["size"]), count=int(fields["count"]), type=fields["type"],
                       redop=fields.get("redop"), root=_int(fields.get("root")),
                       out_of_place=timings[0], in_place=timings[1] if len(timings) > 1 else None)
    except (ValueError, OverflowError):
        raise ParseError(TOOL, number, f"not numbers: {line.strip()[:120]!r}") from None


def _timing(check: str, values: list[str], number: int) -> NcclTiming:
    try:
        time_us, algbw, busbw = (float(v) for v in values[:3])
        last = values[3]
        wrong = None if check == "error" or last == "N/A" else int(float(last))  # '%6g': 1.04858e+06
        error = float(last) if check == "error" else None
    except (ValueError, OverflowError):  # OverflowError: int() of 1e999, which float() reads as inf
        raise ParseError(TOOL, number, f"not numbers: {' '.join(values)[:120]!r}") from None
    return NcclTiming(time_us=time_us, algbw_gbs=algbw, busbw_gbs=busbw, wrong=wrong, error=error)


def _first(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    return next((found[1] for line in lines if (found := pattern.match(line))), None)


def _int(text: str | None) -> int | None:
    return None if text is None else int(text)


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise ParseError(TOOL, 1, f"not a number: {text[:40]!r}") from None


def parse_nccl_tests_json(text: str) -> NcclResult:
    """The `-J FILE` document (version 2): results with out_of_place/in_place {time, alg_bw, bus_bw,
    nwrong}; root written as a padded string; nwrong null when checking is off."""
    document = load_json(text, TOOL)
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise ParseError(TOOL, 1, "not an nccl-tests JSON document (no 'results' list)")
    try:
        rows = tuple(_json_row(r) for r in document["results"])
        bounds = document.get("out_of_bounds") or {}
        average = document.get("average_bus_bandwidth") or {}
        return NcclResult(test=_json_test(document.get("args")), rows=rows, out_of_bounds=bounds.get("count"),
                          avg_busbw_gbs=_float(str(average["bandwidth"])) if "bandwidth" in average else None)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ParseError(TOOL, 1, f"unexpected JSON: {exc}") from None


def _json_row(result: dict[str, Any]) -> NcclRow:
    return NcclRow(size_bytes=int(result["size"]), count=int(result["count"]), type=str(result["type"]),
                   redop=result.get("redop"), root=int(str(result["root"]).strip()),
                   out_of_place=_json_timing(result.get("out_of_place")), in_place=_json_timing(result.get("in_place")))


def _json_timing(timing: dict[str, Any] | None) -> NcclTiming | None:
    if timing is None:
        return None
    wrong = timing.get("nwrong")
    elapsed = timing["time"] if "time" in timing else timing["cpu_time"]  # cpu_time with -C
    return NcclTiming(time_us=float(elapsed), algbw_gbs=float(timing["alg_bw"]),
                      busbw_gbs=float(timing["bus_bw"]), wrong=None if wrong is None else int(wrong))


def _json_test(args: Any) -> str | None:
    program = args[0] if isinstance(args, list) and args else None
    return str(program).rsplit("/", 1)[-1] if program else None
