"""The matrix of a run (pure) and its heat-map PNG (matplotlib's Agg, no display)."""

from __future__ import annotations

import math
import struct
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from gpunet.bench.heatmap import Matrix, figure_pixels, natural_key, percent_matrix, write_png
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


def test_figure_size_grows_with_the_nodes_within_bounds() -> None:
    assert figure_pixels(2) == (650, 500)
    assert figure_pixels(20) == (1150, 1000)
    assert figure_pixels(1024) == (4150, 4000)


@pytest.mark.parametrize("nodes", [3, 20, 80])
def test_png_has_the_signature_and_the_figure_size(tmp_path: Path, nodes: int) -> None:
    names = [f"gpu{i:03d}" for i in range(nodes)]
    results = [m(a, b, 9.0 + (i % 3)) for i, (a, b) in enumerate(pairwise(names))]
    path = tmp_path / "out" / "heat.png"
    write_png(percent_matrix(results), path, "run 1 · iperf3 · all-pairs")
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and data[12:16] == b"IHDR"
    assert struct.unpack(">II", data[16:24]) == figure_pixels(nodes)


def test_without_matplotlib_the_error_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(UsageError, match=r"pip install 'gpunet\[plot\]'"):
        write_png(percent_matrix([m("a", "b", 9.0)]), tmp_path / "x.png", "t")
    assert not (tmp_path / "x.png").exists()


def test_nodes_sort_naturally() -> None:
    assert sorted(["gpu10", "gpu2", "gpu1", "stor1", "gpu1b"], key=natural_key) == [
        "gpu1", "gpu1b", "gpu2", "gpu10", "stor1"]


def test_an_empty_run_is_refused_not_drawn(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="nothing to draw"):
        write_png(percent_matrix([]), tmp_path / "x.png", "empty")
    assert not (tmp_path / "x.png").exists()
