"""The host's neighbour (ARP) table limits, raised while a lab is up.

The kernel keeps one IPv4 neighbour table for every network namespace of the machine, and its
limits (net.ipv4.neigh.default.gc_thresh*, settable only in the host's namespace) count the
entries of all of them. A lab's servers reach their peers through leaves that answer ARP for every
address (proxy ARP), so each address a server talks to is an entry of its own: one `doctor --peers`
on the default example's 8-server lab leaves about 450 entries, and a few labs side by side pass
the default hard limit of 1024. Past it the kernel refuses new entries ("neighbor table overflow"):
pings fail with "No buffer space available" and a healthy lab reads as broken. The first lab up
raises the limits (never lowers them) and records what they were; the last lab down puts them back."""

from __future__ import annotations

import json
from pathlib import Path

PROC_SYS = Path("/proc/sys")
KEYS = ("gc_thresh3", "gc_thresh2")  # hard limit first: the soft one never passes it while writing
LAB_LIMITS = {"gc_thresh3": 65536, "gc_thresh2": 32768}  # 16 labs of 16 servers, each all-to-all, fit
SAVED = ".host-neighbour-limits.json"  # in the labs' root: what the host had before the first lab
MAX_LIMIT = 1 << 30  # a saved value past this is not something the kernel had: not written back


def _path(proc: Path, key: str) -> Path:
    return proc / "net/ipv4/neigh/default" / key


def _read(proc: Path, key: str) -> int:
    return int(_path(proc, key).read_text().strip())


def raise_limits(root: Path, proc: Path = PROC_SYS) -> dict[str, int]:
    """Raise each limit below the lab's to the lab's; the first time, save the host's values under
    `root` so `restore_limits` can put them back. Returns the limits changed, with their old values."""
    before = {key: _read(proc, key) for key in KEYS}
    if not (root / SAVED).exists():
        (root / SAVED).write_text(json.dumps(before))
    changed = {key: value for key, value in before.items() if value < LAB_LIMITS[key]}
    for key in KEYS:
        if key in changed:
            _path(proc, key).write_text(str(LAB_LIMITS[key]))
    return changed


def restore_limits(root: Path, proc: Path = PROC_SYS) -> dict[str, int]:
    """Put back what the host had before the first lab (no lab is up any more); what was written.
    A saved file that is not two small whole numbers is removed and nothing is written from it."""
    saved = root / SAVED
    if not saved.exists():
        return {}
    try:
        values = json.loads(saved.read_text())
    except (OSError, ValueError):
        values = None
    saved.unlink(missing_ok=True)
    if not (isinstance(values, dict) and set(values) == set(KEYS)
            and all(type(v) is int and 0 <= v <= MAX_LIMIT for v in values.values())):
        return {}
    restored = {key: values[key] for key in reversed(KEYS) if _read(proc, key) != values[key]}
    for key, value in restored.items():  # soft limit first: it comes down under the hard one
        _path(proc, key).write_text(str(value))
    return restored
