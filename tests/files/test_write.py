from __future__ import annotations

from pathlib import Path

from gpunet.files.write import write_files, write_if_changed


def test_write_reports_changes_only(tmp_path: Path) -> None:
    assert write_files(tmp_path, {"a.txt": "1", "sub/b.txt": "2"}) == ["a.txt", "sub/b.txt"]
    assert write_files(tmp_path, {"a.txt": "1", "sub/b.txt": "3"}) == ["sub/b.txt"]
    assert (tmp_path / "sub/b.txt").read_text() == "3"


def test_write_leaves_no_temporary_files(tmp_path: Path) -> None:
    write_if_changed(tmp_path / "x", "data")
    write_if_changed(tmp_path / "x", "other")
    assert [p.name for p in tmp_path.iterdir()] == ["x"]
    assert oct((tmp_path / "x").stat().st_mode & 0o777) == "0o644"
