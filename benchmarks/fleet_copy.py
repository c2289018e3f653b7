"""`gpunet fleet copy` + `fleet gather` against a plain scp loop, over the lab's real SSH (root).

A file of --size MB goes to the 8 servers of the small lab and comes back from each, once through
gpunet (packed with zstd once, sent by ClusterShell's scp to all servers at once, sha256 checked at
the far end, renamed into place) and once by `scp` typed in a loop, one server after the other
(no checksum, no compression). Both gathered copies are checked against the original's sha256.
Runs alternate, --runs times each; the ratio is of the medians (gpunet / scp loop; below 1: gpunet
is faster). Two contents: random bytes (a checkpoint: nothing to compress) and text (logs, CSV).

The lab is shaped at --scale Mbit/s per plan Gbit/s (1000: the 10G management plane at 10 Gbit/s)
so the CPU (ssh's ciphers, zstd, sha256), not the shaping, bounds both. The lab's servers share
this machine's filesystem: both methods write one path 8 times and read it back 8 times.

    sudo python benchmarks/fleet_copy.py [--size 200] [--runs 3] [--content random,text] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpunet.api import plan_spec
from gpunet.lab.build import lab_down, lab_up
from gpunet.lab.sshd import ssh_argv
from gpunet.lab.state import lab_dir

SPEC = Path(__file__).parent.parent / "tests" / "fixtures" / "lab" / "small.yaml"
LAB = "fb"
SERVERS = [f"gpu{i}" for i in range(1, 9)]


def make_file(path: Path, size_mb: int, content: str) -> None:
    """Random bytes, or text that compresses like logs do (numbers and repeated words)."""
    with path.open("wb") as out:
        for block in range(size_mb):
            if content == "random":
                out.write(os.urandom(1 << 20))
            else:
                line = b"".join(b"%d,step=%d,loss=%.6f,node=gpu%d,ok\n" % (block, i, 1 / (i + 1), i % 8)
                                for i in range(40_000))
                out.write(line[: 1 << 20].ljust(1 << 20, b"\n"))


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def through_gpunet(source: Path, dest: Path, out: Path) -> float:
    start = time.monotonic()
    for args in (["copy", "gpu[1-8]", "--lab", LAB, str(source), str(dest)],
                 ["gather", "gpu[1-8]", "--lab", LAB, str(dest / source.name), str(out), "--mkdir"]):
        subprocess.run([sys.executable, "-m", "gpunet", "fleet", *args], check=True, capture_output=True)
    return time.monotonic() - start


def scp_loop(source: Path, dest: Path, out: Path, addresses: dict[str, str]) -> float:
    """What one types without gpunet: scp to each server, then from each, one after the other."""
    options = ssh_argv(lab_dir(LAB), "", [])[1:-1]  # the lab key and options, without the target
    start = time.monotonic()
    for node in SERVERS:
        subprocess.run(["scp", "-q", *options, str(source), f"root@{addresses[node]}:{dest}/{source.name}"],
                       check=True)
    for node in SERVERS:
        (out / node).mkdir(parents=True, exist_ok=True)
        subprocess.run(["scp", "-q", *options, f"root@{addresses[node]}:{dest}/{source.name}",
                        str(out / node / source.name)], check=True)
    return time.monotonic() - start


def one_content(work: Path, size_mb: int, content: str, runs: int, addresses: dict[str, str]) -> dict[str, object]:
    source = work / f"{content}.bin"
    make_file(source, size_mb, content)
    expected, times = sha256(source), {"gpunet": [], "scp": []}  # type: dict[str, list[float]]
    for run in range(runs):
        for method in ("gpunet", "scp") if run % 2 == 0 else ("scp", "gpunet"):
            dest, out = work / f"dest-{method}", work / f"out-{method}"
            shutil.rmtree(dest, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            dest.mkdir()
            took = through_gpunet(source, dest, out) if method == "gpunet" else scp_loop(source, dest, out, addresses)
            sums = {sha256(out / node / source.name) for node in SERVERS}
            assert sums == {expected}, f"{method}: gathered copies differ from the original"
            times[method].append(took)
    medians = {method: statistics.median(values) for method, values in times.items()}
    return {"content": content, "size_mb": size_mb, "servers": len(SERVERS), "runs": runs,
            "gpunet_s": round(medians["gpunet"], 2), "scp_loop_s": round(medians["scp"], 2),
            "ratio": round(medians["gpunet"] / medians["scp"], 3), "checksums_equal": True,
            "all_gpunet_s": [round(t, 2) for t in times["gpunet"]], "all_scp_s": [round(t, 2) for t in times["scp"]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200, help="MB per file")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--content", default="random,text")
    parser.add_argument("--scale", type=float, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    state = lab_up(plan_spec(SPEC), LAB, scale=args.scale)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="gpunet-fleet-copy-") as work:
            for content in args.content.split(","):
                results.append(one_content(Path(work), args.size, content, args.runs, state.mgmt_addresses))
    finally:
        lab_down(LAB)
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for r in results:
        print(f"{r['size_mb']} MB {r['content']} to {r['servers']} servers and back, median of {r['runs']}: "
              f"gpunet {r['gpunet_s']} s, scp loop {r['scp_loop_s']} s, ratio {r['ratio']} "
              f"(checksums equal: {r['checksums_equal']})")


if __name__ == "__main__":
    main()
