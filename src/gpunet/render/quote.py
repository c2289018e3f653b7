"""Quoting per target format, and refusal of what a format cannot hold (DESIGN.md #16).

Names reach renderers already constrained (model/types.py); these are the last line: a value
that would add a line to a line-based file, end a quoted string early or become a second shell
word is refused here, whatever let it through."""

from __future__ import annotations

import shlex
from xml.sax.saxutils import quoteattr

from gpunet.errors import UsageError

LINE_BREAKS = "\n\r\0\x0b\x0c\x85\u2028\u2029"  # everything str.splitlines() splits on, and NUL
# What a `Host` or `Match host` line of ssh_config reads as more than a literal name: the globs, a
# negation and Match's list separator.
SSH_PATTERN_CHARACTERS = "*?!,"


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


def ssh_host(value: str, where: str) -> str:
    """A host name or address that an ssh_config `Host` or `Match host` line names literally: one
    token and no pattern character, so a name from the plan never widens the set of hosts the
    cluster's settings apply to (`gpu*`, `!x`) nor adds a second entry to a Match list (`a,b`)."""
    token(value, where)
    if any(c in value for c in SSH_PATTERN_CHARACTERS):
        raise UsageError(f"{where}: {value[:60]!r} holds one of {SSH_PATTERN_CHARACTERS!r}, which ssh_config reads "
                         "as a pattern, not a host name")
    return value


def shell_word(value: str) -> str:
    """A POSIX shell word (nccl.env is sourced by job prologs): quoted when it needs to be."""
    return shlex.quote(value)


def xml_attribute(value: str) -> str:
    """An XML attribute value with its quotes (firewalld zones)."""
    return quoteattr(value)


SYSTEMD_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@,+-")


def systemd_word(value: str, where: str) -> str:
    """One word of a systemd command line (ExecStart=): as is when plain, else double-quoted with
    its backslashes and quotes escaped; `%` (a specifier) and `$` (a variable) doubled to stay literal."""
    if not value or any(c in value for c in LINE_BREAKS) or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise UsageError(f"{where}: {value[:60]!r} is empty or holds a control character, which a unit file cannot "
                         "hold in one word")
    escaped = value.replace("%", "%%").replace("$", "$$")
    if set(value) <= SYSTEMD_PLAIN:
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_text(value: str, where: str) -> str:
    """A free-text value of a unit file (Description=): one line, its specifiers kept literal."""
    return one_line(value, where).replace("%", "%%")
