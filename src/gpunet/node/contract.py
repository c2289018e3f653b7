"""What the controller sends the agent and the agent keeps: the manifest (one per node), its file
and target entries and their actions, and the journal. TypedDicts: the same JSON both sides read,
checked by mypy on the controller and read defensively on the node."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:  # typing has it from 3.11; a node's python3 may be older, and TypedDict never evaluates it
    from typing import NotRequired

MANIFEST_VERSION = 1
ROOT_MARK = "@root/"  # an argv element that names a file under the node's root
SAFE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@+-]*(/[A-Za-z0-9_][A-Za-z0-9_.@+-]*)*$")
TXID = re.compile(r"^[a-z0-9]{8,32}$")

# staged -> backed-up -> writing -> written -> applied -> committed, or reverting -> reverted
PRE_APPLIED = ("staged", "backed-up", "writing", "written")
FINAL = ("committed", "reverted", "revert-failed")
Snapshot = Literal["sysctl", "ip"]


class Action(TypedDict, total=False):
    """One step of a target's check, apply or revert: exactly one of run, ip_state, restore."""

    run: list[str]  # argv; ROOT_MARK-prefixed words are files under the node's root
    stdin: str
    timeout: float
    ip_state: bool  # the lab's stand-in for `netplan apply`: the target's ip_state set with `ip`
    restore: Snapshot  # a runtime snapshot taken before the apply, put back
    if_file: str  # only when this file is (back) in place
    unless_file: str  # only when it is not


class Link(TypedDict):
    mtu: int | None
    addresses: list[str]


class Route(TypedDict, total=False):
    to: str | None
    via: str | None
    dev: str | None
    metric: int | None
    type: str | None
    protocol: str
    table: int | None  # a per-NIC routing table (netplan's `table`); None: main
    scope: str | None
    src: str | None  # the preferred source address (netplan's `from` on a route)


class Rule(TypedDict, total=False):
    """A routing-policy rule: traffic from `src` (to `dst`) looks up `table`."""

    src: str | None
    dst: str | None
    table: int
    priority: int | None  # None: the kernel picks one, as it does for networkd


class IpState(TypedDict):
    """Links' MTU and IPv4 addresses, the routes of the main and per-NIC tables and the policy
    rules (what netplan would set)."""

    links: dict[str, Link]
    routes: list[Route]
    rules: list[Rule]


class Target(TypedDict):
    """A render target as the agent runs it: the tools it needs and its steps, in order."""

    name: str
    requires: list[str]
    check: list[Action]
    apply: list[Action]
    revert: list[Action]
    snapshot: list[Snapshot]
    sysctl_values: NotRequired[dict[str, str]]
    ip_state: NotRequired[IpState]


class FileEntry(TypedDict):
    path: str  # relative to the node's root, SAFE_PATH
    content: str
    mode: int


class Manifest(TypedDict):
    version: int
    txid: str
    node: str
    timeout_s: float
    token_sha256: str
    pause_at: str | None  # fault injection for the kill tests: the worker stops at this step
    files: list[FileEntry]
    targets: list[Target]


class FileRecord(TypedDict, total=False):
    """A file the transaction replaces, as backed up."""

    path: str
    new_sha256: str
    existed: bool
    old_sha256: str
    mode: int


Journal = dict[str, object]  # read defensively: a node's file, whatever it holds
