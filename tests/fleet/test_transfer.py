"""fleet copy and gather without a lab: the same ClusterShell path through the local exec transport
(this machine plays every node), the scripts nodes run, and the refusals."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet
from typer.testing import CliRunner

from gpunet.api import fleet as fleet_api
from gpunet.cli.main import app
from gpunet.errors import ParseError, UsageError
from gpunet.fleet import local_runner
from gpunet.fleet.gather import gather_from
from gpunet.fleet.pack import manifest_line, pack, parse_manifest, unpack
from gpunet.fleet.scripts import COPY_FINISH
from gpunet.fleet.transfer import copy_to, remote_path
from gpunet.fleet.untar import TransferRefused


def _tree(root: Path) -> Path:
    source = root / "model"
    (source / "shards").mkdir(parents=True)
    (source / "shards" / "a.bin").write_bytes(os.urandom(300_000))
    (source / "config.json").write_text('{"layers": 4}\n' * 1000)
    (source / "empty").write_bytes(b"")
    (source / "latest").symlink_to("shards/a.bin")
    return source


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def test_copy_then_gather_through_the_exec_transport(tmp_path: Path) -> None:
    source, dest, out = _tree(tmp_path), tmp_path / "dest", tmp_path / "out"
    (source / "odd\\name").write_text("a name sha256sum escapes: the node checks with sha256sum -c")
    dest.mkdir()
    copied = copy_to(local_runner(), NodeSet("n1"), source, str(dest))
    assert copied.failed == [] and copied.files == 4 and copied.compress in ("zstd", "gzip")
    assert copied.packed_bytes < copied.bytes  # the JSON compresses
    assert _digests(dest / "model") == _digests(source) and os.readlink(dest / "model" / "latest") == "shards/a.bin"
    assert sorted(p.name for p in dest.iterdir()) == ["model"]  # no staging left beside it
    gathered = gather_from(local_runner(), NodeSet("n[1-2]"), str(dest / "model"), out, mkdir=True)
    assert gathered.failed == [] and gathered.files == 8
    assert _digests(out / "n1" / "model") == _digests(out / "n2" / "model") == _digests(source)
    assert sorted(p.name for p in out.iterdir()) == ["n1", "n2"]


def test_a_second_copy_replaces_the_first_whole(tmp_path: Path) -> None:
    source, dest = _tree(tmp_path), tmp_path / "dest"
    dest.mkdir()
    (dest / "model").mkdir()
    (dest / "model" / "stale").write_text("old")
    assert copy_to(local_runner(), NodeSet("n1"), source, str(dest)).failed == []
    assert not (dest / "model" / "stale").exists() and _digests(dest / "model") == _digests(source)
    single = tmp_path / "weights.bin"
    single.write_bytes(os.urandom(1000))
    single.chmod(0o640)
    os.utime(single, (1_700_000_000, 1_700_000_000))
    for _ in range(2):  # a file over a file: one rename
        assert copy_to(local_runner(), NodeSet("n1"), single, str(dest)).compress == "none"  # random: sent raw
    assert (dest / "weights.bin").read_bytes() == single.read_bytes()
    assert ((dest / "weights.bin").stat().st_mode & 0o777, (dest / "weights.bin").stat().st_mtime) == (
        0o640, 1_700_000_000)


def test_a_single_incompressible_file_travels_as_itself_and_stays_on_the_node(tmp_path: Path) -> None:
    checkpoint = tmp_path / "node" / "ckpt.pt"
    checkpoint.parent.mkdir()
    checkpoint.write_bytes(os.urandom(2_000_000))
    result = gather_from(local_runner(), NodeSet("n[1-3]"), str(checkpoint), tmp_path / "out", mkdir=True)
    assert result.failed == [] and result.compress == "raw" and result.bytes == 6_000_000
    assert {_digests(tmp_path / "out" / n)["ckpt.pt"] for n in ("n1", "n2", "n3")} == {
        hashlib.sha256(checkpoint.read_bytes()).hexdigest()}
    assert checkpoint.is_file()  # fetched where it is: never removed as if it were an archive


def test_a_missing_destination_directory_is_named(tmp_path: Path) -> None:
    result = copy_to(local_runner(), NodeSet("n1"), _tree(tmp_path), str(tmp_path / "nowhere"))
    assert result.failed == ["n1"] and "no directory" in (result.outcomes["n1"].error or "")
    assert not (tmp_path / "nowhere").exists()


def _on_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleet copy|gather` through the CLI with this machine playing every node (exec transport)."""
    class Here:
        def runner(self) -> object:
            return local_runner()

    monkeypatch.setattr(fleet_api, "reach", lambda nodes, **_: (NodeSet(nodes), Here()))


def test_copy_refuses_a_missing_destination_before_sending_anything(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _on_this_machine(monkeypatch)
    source, dest = _tree(tmp_path), tmp_path / "nowhere" / "deeper"
    done = CliRunner().invoke(app, ["fleet", "copy", "n[1-3]", str(source), str(dest)])
    assert done.exit_code == 2, done.output
    assert "nothing sent" in done.stderr and "n[1-3]: no directory" in done.stderr and "--mkdir" in done.stderr
    assert not (tmp_path / "nowhere").exists()
    (tmp_path / "file").write_text("a file, not a directory")
    done = CliRunner().invoke(app, ["fleet", "copy", "n1", str(source), str(tmp_path / "file"), "--mkdir"])
    assert done.exit_code == 2 and "is not a directory" in done.stderr, done.output
    assert (tmp_path / "file").read_text() == "a file, not a directory"


def test_copy_with_mkdir_creates_the_destination_then_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _on_this_machine(monkeypatch)
    source, dest = _tree(tmp_path), tmp_path / "new" / "models"
    # one node: every "node" here is this machine, and two would race into the same destination
    done = CliRunner().invoke(app, ["fleet", "copy", "n1", str(source), str(dest), "--mkdir", "--json"])
    assert done.exit_code == 0, done.output
    assert {n: o["ok"] for n, o in json.loads(done.stdout)["outcomes"].items()} == {"n1": True}
    assert _digests(dest / "model") == _digests(source)


def test_gather_refuses_a_missing_output_directory_unless_mkdir(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _on_this_machine(monkeypatch)
    source, out = _tree(tmp_path), tmp_path / "logs" / "today"
    done = CliRunner().invoke(app, ["fleet", "gather", "n[1-2]", str(source), str(out)])
    assert done.exit_code == 2, done.output
    assert "nothing fetched" in done.stderr and "does not exist" in done.stderr and "--mkdir" in done.stderr
    assert not (tmp_path / "logs").exists()
    done = CliRunner().invoke(app, ["fleet", "gather", "n[1-2]", str(source), str(out), "--mkdir"])
    assert done.exit_code == 0, done.output
    assert _digests(out / "n1" / "model") == _digests(out / "n2" / "model") == _digests(source)


def test_a_file_that_vanishes_while_it_is_packed_stops_the_copy(tmp_path: Path) -> None:
    source, dest = _tree(tmp_path), tmp_path / "dest"
    dest.mkdir()
    doomed = source / "zz.bin"  # listed with config.json, read after it
    doomed.write_bytes(b"x" * 10)

    def vanish(phase: str, done: int, total: int) -> None:
        del phase, done, total
        doomed.unlink(missing_ok=True)  # the first progress report: mid-copy

    with pytest.raises(UsageError, match="vanished while it was being packed"):
        copy_to(local_runner(), NodeSet("n1"), source, str(dest), progress=vanish)
    assert list(dest.iterdir()) == []


def test_a_file_that_changes_while_it_is_read_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "log.txt"
    source.write_bytes(b"a" * 3_000_000)

    def grow(done: int) -> None:
        if done < 2_000_000:
            with source.open("ab") as handle:
                handle.write(b"more")

    with pytest.raises(UsageError, match="changed while it was being packed"):
        pack(source, tmp_path / "archive", "none", grow)


def test_a_damaged_archive_leaves_nothing_under_the_final_name(tmp_path: Path) -> None:
    """The node side (COPY_FINISH) checks sha256 before the rename."""
    source, dest = tmp_path / "data.bin", tmp_path / "dest"
    source.write_bytes(os.urandom(50_000))
    dest.mkdir()
    archive = dest / ".gpunet-copy-test"
    pack(source, archive, "none")
    raw = bytearray(archive.read_bytes())
    raw[raw.index(source.read_bytes()[:64]) + 100] ^= 0xFF  # inside the file's data: tar cannot tell
    archive.write_bytes(bytes(raw))
    done = subprocess.run(["sh", "-c", COPY_FINISH, "t", str(archive), str(dest), "data.bin", "none", "-", "-", "-"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "checksum mismatch" in done.stderr
    assert list(dest.iterdir()) == []


def _tar(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


@pytest.mark.parametrize(("members", "links", "why"), [
    ({"x/../../escape": b"evil"}, None, "outside|escape|outside its directory"),
    ({"x/ok": b"fine", "other": b"evil"}, None, "outside 'x'"),
    ({"x/ok": b"fine"}, {"x/link": "/etc/passwd"}, "a symlink: gpunet accepts regular files and directories only"),
])
def test_a_nodes_archive_cannot_write_outside_its_directory(tmp_path: Path, members: dict[str, bytes],
                                                             links: dict[str, str] | None, why: str) -> None:
    archive = tmp_path / "a.tar"
    archive.write_bytes(_tar(members, links))
    manifest = {name: hashlib.sha256(data).hexdigest() for name, data in members.items()}
    with pytest.raises(TransferRefused, match=why):
        unpack(archive, tmp_path / "stage", "none", "x", manifest)
    assert not (tmp_path / "escape").exists() and not (tmp_path / "other").exists()


def test_a_file_the_node_did_not_list_or_altered_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar"
    archive.write_bytes(_tar({"x/a": b"one", "x/b": b"two"}))
    with pytest.raises(TransferRefused, match="unlisted"):
        unpack(archive, tmp_path / "s1", "none", "x", {"x/a": hashlib.sha256(b"one").hexdigest()})
    wrong = {"x/a": hashlib.sha256(b"one").hexdigest(), "x/b": hashlib.sha256(b"xxx").hexdigest()}
    with pytest.raises(TransferRefused, match="checksum mismatch: x/b"):
        unpack(archive, tmp_path / "s2", "none", "x", wrong)


def test_manifest_lines_are_sha256sums_own(tmp_path: Path) -> None:
    """Names with a backslash round-trip through the real sha256sum (-c reads our lines)."""
    (tmp_path / "a\\b").write_text("x")
    (tmp_path / "plain name").write_text("y")
    ours = "".join(manifest_line(hashlib.sha256(p.read_bytes()).hexdigest(), p.name)
                   for p in sorted(tmp_path.iterdir()))
    theirs = subprocess.run(["sha256sum", "a\\b", "plain name"], cwd=tmp_path, capture_output=True, text=True,
                            check=True).stdout
    assert ours == theirs
    assert parse_manifest(theirs) == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    with pytest.raises(ParseError):
        parse_manifest("not a checksum line")
    with pytest.raises(UsageError, match="line break"):
        manifest_line("0" * 64, "a\nb")


@pytest.mark.parametrize(("path", "why"), [
    ("data/x", "absolute"), ("/data/../etc", r"'\.\.'"), ("/data/x\n", "control"), ("~/x", "absolute")])
def test_remote_paths_are_taken_as_named(path: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        remote_path(path, "destination")
    assert remote_path("/data//models/", "destination") == "/data/models"


@pytest.mark.parametrize("argv", [
    ["copy", "n1", "{src}", "../outside"],
    ["copy", "n[1-2]!n[1-2]", "{src}", "/tmp"],
    ["gather", "n1", "/var/log/../../etc/shadow", "{out}"],
    ["copy", "n1", "{missing}", "/tmp"],
])
def test_bad_input_is_exit_2_with_one_line(tmp_path: Path, argv: list[str]) -> None:
    names = {"src": str(_tree(tmp_path)), "out": str(tmp_path / "out"), "missing": str(tmp_path / "nothing")}
    done = CliRunner().invoke(app, ["fleet", *[a.format(**names) for a in argv], "--json"])
    assert done.exit_code == 2, done.output
    assert json.loads(done.stdout)["error"] == "UsageError"  # one message, no traceback


def test_a_copy_of_dot_lands_under_the_directorys_own_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source, dest = _tree(tmp_path), tmp_path / "dest"
    dest.mkdir()
    monkeypatch.chdir(source)
    assert copy_to(local_runner(), NodeSet("n1"), Path("."), str(dest)).failed == []
    assert _digests(dest / "model") == _digests(source)


def test_the_archives_record_padding_is_read_so_the_decompressor_ends_cleanly(tmp_path: Path) -> None:
    """GNU tar pads an archive to whole 10 KiB records. Unpacking stopped at the end marker, so
    zstd, still writing the padding into a closed pipe, died of SIGPIPE and a good gather failed."""
    members = {"x/small": b"capture"}
    padded = _tar(members) + b"\0" * 10240 * 40  # more padding than a pipe holds: zstd must block on it
    (tmp_path / "a.tar").write_bytes(padded)
    subprocess.run(["zstd", "-q", "-f", str(tmp_path / "a.tar"), "-o", str(tmp_path / "a.tar.zst")], check=True)
    manifest = {name: hashlib.sha256(data).hexdigest() for name, data in members.items()}
    top, size = unpack(tmp_path / "a.tar.zst", tmp_path / "stage", "zstd", "x", manifest)
    assert (top / "small").read_bytes() == b"capture" and size == 7
    (tmp_path / "b.tar").write_bytes(_tar(members) + b"not padding")
    with pytest.raises(TransferRefused, match="not tar padding"):
        unpack(tmp_path / "b.tar", tmp_path / "stage2", "none", "x", manifest)


def test_names_that_look_like_options_and_setuid_bits_do_not_travel_as_such(tmp_path: Path) -> None:
    """A file called -hex reaches the node's checksum as a file, not an openssl option, and a
    setuid program copied as root arrives without its setuid bit (root unpacks it on every node)."""
    source, dest = tmp_path / "tools", tmp_path / "dest"
    source.mkdir()
    (source / "-hex").write_text("a name that starts with a dash\n" * 100)
    (source / "tool").write_bytes(b"#!/bin/sh\n" * 100)
    (source / "tool").chmod(0o4755)
    dest.mkdir()
    copied = copy_to(local_runner(), NodeSet("n1"), source, str(dest))
    assert copied.failed == [], copied
    assert (dest / "tools" / "-hex").read_text() == (source / "-hex").read_text()
    assert stat.S_IMODE((dest / "tools" / "tool").stat().st_mode) == 0o755


@pytest.mark.parametrize("already_there", [False, True])
def test_nodes_that_share_one_destination_all_succeed(tmp_path: Path, already_there: bool) -> None:
    """An NFS home: every node's finishing step renames into the same directory at once. The first
    rename lands the copy; the others find an identical tree there and say so instead of failing."""
    source, dest = _tree(tmp_path), tmp_path / "shared"
    dest.mkdir()
    if already_there:
        (dest / "model").mkdir()
        (dest / "model" / "stale").write_text("old")
    copied = copy_to(local_runner(), NodeSet("n[1-12]"), source, str(dest))
    assert copied.failed == [], {n: o.error for n, o in copied.outcomes.items() if n in copied.failed}
    assert _digests(dest / "model") == _digests(source) and not (dest / "model" / "stale").exists()
    assert sorted(p.name for p in dest.iterdir()) == ["model"]  # no staging left beside it
    landed = [n for n, o in copied.outcomes.items() if not o.already_in_place]
    assert landed, "some node's rename must have landed the tree"

