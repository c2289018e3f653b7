"""Quoting per target format, and refusal of what a format cannot hold (DESIGN.md #16).

Names reach renderers already constrained (model/types.py); these are the last line: a value
that would add a line to a line-based file, end a quoted string early or become a second shell
word is refused here, whatever let it through."""

from __future__ import annotations

import shlex
from xml.sax.saxutils import quoteattr

from gpunet.errors import UsageError

LINE_BREAKS = "\n\r\0\x0b\x0c\x85\u2028\u2029"  # everything str.splitlines() splits on, and NUL


def one_line(value: str, where: str) -> str:
    """A value for a line-based file (hosts, ssh_config, keyfiles, sysctl.d, topology.conf)."""
    if any(c in value for c in LINE_BREAKS):
        raise UsageError(f"{where}: {value[:60]!r} holds a line break, which would add a line to the file")
    return value


def token(value: str, where: str) -> str:
    """One whitespace-free token (ssh_config values, nftables names, Slurm names)."""
    one_line(value, where)
    if not value or any(c.isspace() or c in "\"'\\#;" for c in value):
        raise UsageError(f"{where}: {value[:60]!r} is not a single word this file can hold unquoted")
    return value


def shell_word(value: str) -> str:
    """A POSIX shell word (nccl.env is sourced by job prologs): quoted when it needs to be."""
    return shlex.quote(value)


def xml_attribute(value: str) -> str:
    """An XML attribute value with its quotes (firewalld zones)."""
    return quoteattr(value)
