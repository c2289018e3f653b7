"""The matrix of a run (pure, and in arrays for drawing), the colours of its cells, and its heat-map
PNG (matplotlib's Agg, no display)."""

from __future__ import annotations

import math
import struct
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from gpunet.bench.heatmap import (
    ABOVE_COLOUR,
    CONGESTED_COLOUR,
    FAILED_COLOUR,
    INCONCLUSIVE_COLOUR,
    UNMEASURED_COLOUR,
    Matrix,
    cell_colours,
    cells_of,
    figure_pixels,
    grid_of,
    natural_key,
    percent_matrix,
    shown_percent,
    write_png,
)
from gpunet.bench.store import Measurement
from gpunet.errors import UsageError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def m(source: str, destination: str, value: float, status: str = "ok", *, expected: float | None = 10.0,
      rail: int | None = None) -> Measurement:
    return Measurement(source=source, destination=destination, plane="compute", metric="throughput", value=value,
                       unit="Gb/s", expected=expected, status=status, rail=rail)


def at(matrix: Matrix, source: str, destination: str) -> float:
    return matrix.percent[matrix.names.index(source)][matrix.names.index(destination)]


def test_each_measurement_lands_in_its_cell_and_gaps_are_nan() -> None:
    matrix = percent_matrix([m("b", "a", 9.0), m("a", "c", 5.0, "low"), m("c", "a", 2.0, "low"),
                             m("b", "d", 0.0, "failed", expected=None)])
    assert matrix.names == ("a", "b", "c", "d")
    assert at(matrix, "b", "a") == 90.0 and at(matrix, "a", "b") == 90.0  # measured one way: shown both ways
    assert at(matrix, "a", "c") == 50.0 and at(matrix, "c", "a") == 20.0  # measured both ways: each its own
    assert math.isnan(at(matrix, "b", "d")) and math.isnan(at(matrix, "a", "d")) and math.isnan(at(matrix, "c", "c"))
    assert matrix.status[0] == (None, "ok", "low", None)
    assert matrix.status[1][3] == "failed" and matrix.status[3][1] == "failed"


def test_several_measurements_of_one_cell_show_the_worst() -> None:
    matrix = percent_matrix([m("a", "b", 9.8, rail=0), m("a", "b", 7.0, "low", rail=1), m("a", "b", 9.0, rail=2)])
    assert matrix.percent[0][1] == 70.0 and matrix.status[0][1] == "low"
    failed_first = percent_matrix([m("a", "b", 0.0, "failed", rail=0), m("a", "b", 9.9, rail=1)])
    assert failed_first.status[0][1] == "failed" and failed_first.percent[0][1] == 0.0


def test_several_measurements_of_one_cell_show_the_worst_low_over_inconclusive() -> None:
    matrix = percent_matrix([m("a", "b", 9.9, "inconclusive", rail=0), m("a", "b", 8.0, "low", rail=1),
                             m("a", "c", 9.9, "inconclusive", rail=0), m("a", "c", 9.5, rail=1)])
    assert matrix.status[0][1:] == ("low", "inconclusive") and matrix.percent[0][1] == 80.0


def test_the_arrays_drawn_hold_the_same_cells_as_the_matrix_printed() -> None:
    results = [m("b", "a", 9.0), m("a", "c", 5.0, "low"), m("c", "a", 2.0, "low"), m("gpu10", "gpu2", 9.96),
               m("b", "d", 0.0, "failed", expected=None), m("a", "d", 9.9, "inconclusive"),
               m("c", "d", 9.8, rail=0), m("c", "d", 6.0, "low", rail=1), m("c", "d", 9.0, "inconclusive", rail=2),
               m("b", "c", 7.0, "mystery"), m("d", "a", 6.5, "congested")]
    matrix, grid = percent_matrix(results), grid_of(cells_of(results))
    assert grid.names == matrix.names == ("a", "b", "c", "d", "gpu2", "gpu10")
    rank = {None: -1, "ok": 0, "inconclusive": 1, "congested": 2, "low": 3, "failed": 4, "mystery": 4}
    assert grid.rank.tolist() == [[rank[s] for s in row] for row in matrix.status]
    assert [[None if math.isnan(p) else round(p, 4) for p in row] for row in grid.percent.tolist()] == [
        [None if math.isnan(p) else round(p, 4) for p in row] for row in matrix.percent]


def test_a_cell_that_reads_100_always_has_one_colour() -> None:
    """Coloured from the whole percent written in it: 99.95 and 100.4 read 100 (green, not the blue
    of above 100); 100.6 reads 101 (blue)."""
    percent = [99.95, 100.0, 100.4, 100.5, 100.6, 99.4]
    colours = cell_colours([percent], [[0] * len(percent)])[0].tolist()
    assert [shown_percent(p) for p in percent] == [100, 100, 100, 100, 101, 99]
    assert colours[0] == colours[1] == colours[2] == colours[3] != colours[4]
    assert colours[4] == rgba(ABOVE_COLOUR) and colours[5] != colours[1]


def test_failed_inconclusive_and_unmeasured_cells_have_colours_of_their_own() -> None:
    colours = cell_colours([[0.0, 97.0, math.nan, 97.0, 60.0, 60.0]], [[4, 1, -1, 0, 3, 2]])[0].tolist()
    assert colours[:3] == [rgba(FAILED_COLOUR), rgba(INCONCLUSIVE_COLOUR), rgba(UNMEASURED_COLOUR)]
    assert colours[5] == rgba(CONGESTED_COLOUR)
    assert len({tuple(c) for c in colours}) == 6  # ok at 97 and low at 60 on the scale, each its own


def rgba(colour: str) -> list[int]:
    from matplotlib.colors import to_rgba  # noqa: PLC0415

    return [round(255 * c) for c in to_rgba(colour)]


def test_figure_size_grows_with_the_nodes_within_bounds() -> None:
    assert figure_pixels(2) == (650, 500)
    assert figure_pixels(20) == (1150, 1000)
    # Past 64 nodes: whole pixels a cell, about 2 400 across, margins for title, bar and legend.
    assert figure_pixels(1024) == (2 * 1024 + 330, 2 * 1024 + 110)
    assert figure_pixels(2000) == (2000 + 330, 2000 + 110)
    assert figure_pixels(5000) == (5000 + 330, 5000 + 110)  # never under a pixel a pair


@pytest.mark.parametrize("nodes", [3, 20, 80])
def test_png_has_the_signature_and_the_figure_size(tmp_path: Path, nodes: int) -> None:
    names = [f"gpu{i:03d}" for i in range(nodes)]
    results = [m(a, b, 9.0 + (i % 3), ("ok", "inconclusive", "failed")[i % 3])
               for i, (a, b) in enumerate(pairwise(names))]
    path = tmp_path / "out" / "heat.png"
    write_png(cells_of(results), path, "run 1 · iperf3 · all-pairs")
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and data[12:16] == b"IHDR"
    assert struct.unpack(">II", data[16:24]) == figure_pixels(nodes)


def test_without_matplotlib_the_error_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(UsageError, match=r"pip install 'gpunet\[plot\]'"):
        write_png(cells_of([m("a", "b", 9.0)]), tmp_path / "x.png", "t")
    assert not (tmp_path / "x.png").exists()


def test_nodes_sort_naturally() -> None:
    assert sorted(["gpu10", "gpu2", "gpu1", "stor1", "gpu1b"], key=natural_key) == [
        "gpu1", "gpu1b", "gpu2", "gpu10", "stor1"]


def test_an_empty_run_is_refused_not_drawn(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="nothing to draw"):
        write_png(cells_of([]), tmp_path / "x.png", "empty")
    assert not (tmp_path / "x.png").exists()
