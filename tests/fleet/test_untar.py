"""Issue 22 F1: an archive from a node writes nothing outside its staging directory, on the Python
installed here (3.11.7, whose tarfile `data` filter CVE-2025-4517 defeats), through gather's own
unpacking and through the tree-mode reverse copy that replaces ClusterShell's extraction."""

from __future__ import annotations

import base64
import io
import os
import tarfile
import tempfile
from pathlib import Path
from typing import IO

import pytest
from ClusterShell.Task import task_self
from ClusterShell.Worker.Tree import TreeWorker

from gpunet.fleet.pack import unpack
from gpunet.fleet.tree_copy import CheckedTreeRcopy, tree_rcopy, unpack_fetched
from gpunet.fleet.untar import TransferRefused, components, extract

STEPS = "abcdefghijklmnop"  # 16 one-letter symlinks


def _entry(tar: tarfile.TarFile, name: str, *, kind: bytes = tarfile.REGTYPE, link: str = "",
           data: bytes = b"", mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size, info.mode = kind, link, len(data) if kind == tarfile.REGTYPE else 0, mode
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def realpath_limit_attack(into: Path, target: str, top: str = "top") -> bytes:
    """CVE-2025-4517's archive (CPython's own test_realpath_limit_attack), under `top`: 16 nested
    directories of as many characters as fit PATH_MAX from `into` (247 for a short path), each
    reached through a one-letter symlink; a 254-character symlink at the end whose real path passes
    PATH_MAX (realpath stops expanding there) pointing back up 16 levels; `top/escape` through it
    and up to TARGET (relative to `into`'s parent); then a file written under `top/escape/`."""
    length = min((4096 - len(str(into / top)) - 1) // (len(STEPS) + 1), 247)
    component = "d" * length
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _entry(tar, top, kind=tarfile.DIRTYPE, mode=0o755)
        path = top
        for step in STEPS:
            _entry(tar, f"{path}/{component}", kind=tarfile.DIRTYPE, mode=0o777)
            _entry(tar, f"{path}/{step}", kind=tarfile.SYMTYPE, link=component)
            path = f"{path}/{component}"
        linkpath = "/".join(STEPS) + "/" + "l" * 254
        _entry(tar, f"{top}/{linkpath}", kind=tarfile.SYMTYPE, link="/".join([".."] * len(STEPS)))
        _entry(tar, f"{top}/escape", kind=tarfile.SYMTYPE, link=f"{linkpath}/../../{target}")
        _entry(tar, f"{top}/escape/pwned", data=b"written outside by a node\n")
    return buffer.getvalue()


def _everything(root: Path, leave_out: Path) -> set[str]:
    return {str(p) for p in root.rglob("*") if leave_out not in (p, *p.parents)}


def test_the_crafted_archive_is_refused_and_writes_nothing_outside(tmp_path: Path) -> None:
    outside, stage = tmp_path / "outside", tmp_path / "stage"
    outside.mkdir()
    stage.mkdir()
    archive = tmp_path / "attack.tar"
    archive.write_bytes(realpath_limit_attack(stage / "x", "outside"))
    before = _everything(tmp_path, stage)
    with pytest.raises(TransferRefused, match="'top/a', a symlink: gpunet accepts regular files and directories"):
        unpack(archive, stage / "x", "none", "top", {"top/escape/pwned": "0" * 64})
    assert not (outside / "pwned").exists()
    assert _everything(tmp_path, stage) == before  # only the staging directory changed
    assert not any(p.is_symlink() for p in stage.rglob("*"))


def test_the_crafted_archive_defeats_this_pythons_own_data_filter(tmp_path: Path) -> None:
    """Why gpunet no longer trusts tarfile's filter: on a Python before 3.11.13/3.12.11/3.13.4 the
    same archive writes outside (here into this test's own directory); a fixed Python refuses it."""
    outside, into = tmp_path / "outside", tmp_path / "stage" / "x"
    outside.mkdir()
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(realpath_limit_attack(into, "../outside")), mode="r") as tar:
        try:
            tar.extractall(into, filter="data")
        except tarfile.FilterError:
            pytest.skip("this Python's tarfile refuses the archive (CVE-2025-4517 fixed here)")
    assert (outside / "pwned").read_bytes() == b"written outside by a node\n"
    assert hasattr(tarfile, "data_filter")  # the check gpunet used to trust


@pytest.mark.parametrize(("kind", "said"), [(tarfile.SYMTYPE, "a symlink"), (tarfile.LNKTYPE, "a hard link"),
                                            (tarfile.CHRTYPE, "a character device"),
                                            (tarfile.BLKTYPE, "a block device"), (tarfile.FIFOTYPE, "a FIFO")])
def test_anything_but_files_and_directories_refuses_the_archive(tmp_path: Path, kind: bytes, said: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        _entry(tar, "top/ok", data=b"fine")
        _entry(tar, "top/odd", kind=kind, link="ok")  # even one pointing inside
    with pytest.raises(TransferRefused, match=f"'top/odd', {said}"):
        extract(io.BytesIO(buffer.getvalue()), tmp_path, "top")
    assert [p.name for p in (tmp_path / "top").iterdir()] == ["ok"]


@pytest.mark.parametrize("name", ["/etc/cron.d/x", "top/../../x", "top/./x", "top//x", "other/x", "top/\0x",
                                  "top/" + "x" * 256, "top/" + "a/" * 2100 + "x"],
                         ids=["absolute", "dotdot", "dot", "empty", "other-top", "nul", "over-NAME_MAX",
                              "over-PATH_MAX"])
def test_names_that_are_not_plain_and_relative_are_refused(name: str) -> None:
    with pytest.raises(TransferRefused):
        components(name, "top")


def test_a_symlink_already_in_the_staging_directory_is_never_followed(tmp_path: Path) -> None:
    """Walking by directory descriptors with O_NOFOLLOW: a name is never resolved through a link,
    whoever put it there."""
    outside, stage = tmp_path / "outside", tmp_path / "stage"
    outside.mkdir()
    stage.mkdir()
    (stage / "top").symlink_to(outside)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        _entry(tar, "top/file", data=b"x")
    with pytest.raises(TransferRefused, match="not a directory where one is needed"):
        extract(io.BytesIO(buffer.getvalue()), stage, "top")
    assert list(outside.iterdir()) == []


def test_files_and_directories_keep_no_special_bits_and_a_repeated_name_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        _entry(tar, "./top", kind=tarfile.DIRTYPE, mode=0o7777)
        _entry(tar, "./top/run", data=b"#!/bin/sh\n", mode=0o6777)
    extract(io.BytesIO(buffer.getvalue()), tmp_path, "top")
    assert (tmp_path / "top" / "run").stat().st_mode & 0o7777 == 0o755
    assert (tmp_path / "top").stat().st_mode & 0o7777 == 0o755
    again = io.BytesIO()
    with tarfile.open(fileobj=again, mode="w") as tar:
        _entry(tar, "top/f", data=b"1")
        _entry(tar, "top/f", data=b"2")  # tar's "the later one wins" would replace what was checked
    with pytest.raises(TransferRefused, match="twice"):
        extract(io.BytesIO(again.getvalue()), tmp_path / "top", "top")


def test_the_tree_mode_reverse_copy_unpacks_with_gpunets_extractor(tmp_path: Path) -> None:
    """ClusterShell's TreeWorker would extract the node's tar fully trusted; gpunet's worker hands it
    to untar: one regular file is kept, the crafted archive refused with the reason."""
    dest, outside = tmp_path / "stage", tmp_path / "outside"
    dest.mkdir()
    outside.mkdir()
    good = io.BytesIO()
    with tarfile.open(fileobj=good, mode="w") as tar:
        _entry(tar, "gpunet-gather.x.gpu1", data=b"payload")
    assert unpack_fetched(_spooled(good.getvalue()), b"", dest) is None
    assert (dest / "gpunet-gather.x.gpu1").read_bytes() == b"payload"
    why = unpack_fetched(_spooled(realpath_limit_attack(dest, "../outside", top="t")), b"", dest)
    assert why is not None and "one file was expected" in why
    assert list(outside.iterdir()) == [] and os.listdir(dest) == ["gpunet-gather.x.gpu1"]
    encoded = base64.b64encode(good.getvalue())  # the tail ClusterShell had not decoded yet
    (dest / "gpunet-gather.x.gpu1").unlink()
    assert unpack_fetched(_spooled(base64.b64decode(encoded[:-8])), encoded[-8:], dest) is None
    worker = CheckedTreeRcopy("gpu1", None, None, source="/tmp/a", dest=str(dest), reverse=True)
    assert type(worker)._on_remote_node_close is not TreeWorker._on_remote_node_close


def test_without_a_topology_the_reverse_copy_is_clustershells_scp() -> None:
    assert tree_rcopy(task_self(), "/tmp/a", "/tmp/b", "gpu1", handler=None, timeout=None) is None


def _spooled(data: bytes) -> IO[bytes]:
    """A spooled tar as ClusterShell keeps one (closed by unpack_fetched)."""
    spool = tempfile.TemporaryFile()  # noqa: SIM115
    spool.write(data)
    return spool
