"""The fast fold agrees with ClusterShell's on the names a unit holds, and on any others."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpunet.model.nodeset import fold
from gpunet.report.names import compact


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 400), min_size=1, max_size=60), st.sampled_from(["gpu", "node-a", "x1y"]),
       st.integers(1, 5))
def test_compact_folds_as_clustershell_does(numbers: list[int], prefix: str, width: int) -> None:
    names = [f"{prefix}{n:0{width}d}" for n in numbers]
    assert compact(names) == fold(names)


def test_mixed_prefixes_and_widths_fall_back_to_clustershell() -> None:
    for names in (["gpu1", "gpu10", "gpu2"], ["login01", "gpu001"], ["stor01"], ["a", "b"]):
        assert compact(names) == fold(names)
