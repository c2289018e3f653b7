"""The host's list of TCP congestion controls a network namespace may choose, widened while a lab is up.

A node's rendered sysctl file sets net.ipv4.tcp_congestion_control (model/tuning.py). On a real node
that is the host's own namespace, where any algorithm the kernel has may be the default. Inside a
namespace the kernel allows only those on net.ipv4.tcp_allowed_congestion_control, a list only the
host's namespace sets (a kernel whose default is bbr allows "reno bbr"), so a lab server's
`sysctl -p` of the same file fails with "Operation not permitted" where the Plan chooses cubic. The
first lab up adds the Plan's algorithms the kernel has to that list (it never removes one) and
records the host's list; the last lab down puts it back."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from pathlib import Path

PROC_SYS = Path("/proc/sys")
ALLOWED = "net/ipv4/tcp_allowed_congestion_control"
AVAILABLE = "net/ipv4/tcp_available_congestion_control"
SAVED = ".host-allowed-congestion.json"  # in the labs' root: the host's list before the first lab
NAME = re.compile(r"[a-z0-9_]{1,15}")  # TCP_CA_NAME_MAX is 16 with its NUL


def _names(proc: Path, key: str) -> list[str]:
    return [n for n in (proc / key).read_text().split() if NAME.fullmatch(n)]


def permit(root: Path, wanted: Collection[str], proc: Path = PROC_SYS) -> list[str]:
    """Add each wanted algorithm the kernel has to the namespaces' allowed list; the first time, save
    the host's list under `root` for `restore`. Returns those added."""
    allowed = _names(proc, ALLOWED)
    if not (root / SAVED).exists():
        (root / SAVED).write_text(json.dumps(allowed))
    available = set(_names(proc, AVAILABLE))
    added = sorted(n for n in set(wanted) if n in available and n not in allowed)
    if added:
        (proc / ALLOWED).write_text(" ".join([*allowed, *added]))
    return added


def restore(root: Path, proc: Path = PROC_SYS) -> list[str] | None:
    """Put back the host's list from before the first lab (no lab is up any more); the list written,
    or None where nothing was. A saved file that is not a short list of names is removed, unused."""
    saved = root / SAVED
    if not saved.exists():
        return None
    try:
        names = json.loads(saved.read_text())
    except (OSError, ValueError):
        names = None
    saved.unlink(missing_ok=True)
    if not (isinstance(names, list) and 0 < len(names) <= 64
            and all(isinstance(n, str) and NAME.fullmatch(n) for n in names)):
        return None
    if _names(proc, ALLOWED) != names:
        (proc / ALLOWED).write_text(" ".join(names))
    return names
