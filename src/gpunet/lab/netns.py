"""The few system operations the lab needs, each through an injected CommandRunner."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

from gpunet.errors import LabError
from gpunet.lab.inside import NETNS_DIR, write_sysctls
from gpunet.runner import CommandRunner


def batch_text(lines: Iterable[str]) -> str:
    """`-batch` input, one command a line: a line holding a line break (a name from a plan that
    escaped validation) would add a command of its own, so it stops everything instead."""
    chosen = list(lines)
    bad = next((line for line in chosen if any(c in line for c in "\n\r\0")), None)
    if bad is not None:
        raise LabError(f"refusing a batch command with a line break or NUL in it: {bad[:80]!r}")
    return "\n".join(chosen)


def ip_batch(run: CommandRunner, lines: Iterable[str], ns: str | None = None, force: bool = False) -> None:
    """Many `ip` commands in one process: thousands of routes take a fraction of a second."""
    text = batch_text(lines)
    if not text:
        return
    argv = ["ip", *(["-n", ns] if ns else []), *(["-force"] if force else []), "-batch", "-"]
    run(argv, stdin=text + "\n", check=not force)


def tc_batch(run: CommandRunner, lines: Iterable[str], ns: str) -> None:
    text = batch_text(lines)
    if text:
        run(["tc", "-n", ns, "-batch", "-"], stdin=text + "\n")


OPTIONAL_SYSCTLS = {"net.ipv4.fib_multipath_hash_seed"}  # newer kernels only: left out where absent


def set_sysctls(ns: str, values: dict[str, str]) -> None:
    """The values written in the lab namespace `ns` from this thread (no process per namespace);
    an optional one this kernel lacks is left out."""
    values = {k: v for k, v in values.items()
              if k not in OPTIONAL_SYSCTLS or Path("/proc/sys", *k.split(".")).exists()}
    if values:
        write_sysctls(ns, values)


def existing_namespaces() -> set[str]:
    return {p.name for p in NETNS_DIR.iterdir()} if NETNS_DIR.exists() else set()


def _inodes(names: Iterable[str]) -> set[int]:
    inodes = set()
    for name in names:
        try:
            inodes.add((NETNS_DIR / name).stat().st_ino)
        except OSError:
            continue
    return inodes


def pids_in_namespaces(names: Iterable[str]) -> list[int]:
    """PIDs whose network namespace is one of `names` (compared by inode, like `ip netns pids`)."""
    inodes = _inodes(names)
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "ns/net").stat().st_ino in inodes:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def kill_pids(pids: Iterable[int], namespaces: set[str], wait_s: float = 3.0) -> None:
    """SIGKILL each process still in one of `namespaces`, then wait until they are gone (a zombie
    counts as gone). A pidfd pins the process: a PID reused in between is never hit."""
    inodes = _inodes(namespaces)
    killed = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            if Path(f"/proc/{pid}/ns/net").stat().st_ino in inodes:  # still ours, checked after pinning
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                killed.append(pid)
        except (ProcessLookupError, FileNotFoundError):
            pass
        finally:
            os.close(fd)
    deadline = time.monotonic() + wait_s
    while killed and time.monotonic() < deadline:
        killed = [p for p in killed if _running(p)]
        time.sleep(0.02)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


_libc = ctypes.CDLL(None, use_errno=True)


def unmount(path: Path) -> None:
    """umount(2) of one of the lab's own bind mounts (a server's UTS namespace file), without a
    process per server; one no longer mounted is left as it is, as `umount` unchecked did."""
    _libc.umount2(os.fsencode(path), 0)


def tbf_line(dev: str, mbit: float, mtu: int) -> str:
    """Token bucket at `mbit`; burst of 10 ms (at least a few full frames) keeps TCP near the
    set rate; 20 ms of queue absorbs its bursts yet keeps RTTs short enough for flows sharing a
    link to converge to fair shares within a test (at 100 ms, the worst of 4 pairs filling a leaf's
    uplinks measured 86-90 % of line with 32 streams; at 20 ms, 90-95 %)."""
    burst = max(int(mbit * 1e6 / 8 * 0.01), 4 * (mtu + 14), 16 * 1024)
    return f"qdisc replace dev {dev} root tbf rate {mbit:g}mbit burst {burst} latency 20ms"
