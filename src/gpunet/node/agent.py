"""gpunet's apply agent: runs ON the node, shipped with every apply as one script (bundle.py),
standard library only, as an Ansible module is: a node needs python3 and nothing else of gpunet.

One transaction per node at a time, journalled in STATE/journal.json (transaction.py); the
commands below are what the controller calls over SSH. Every command prints one JSON object;
exit 2 is bad input (nothing changed), 1 a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from gpunet.node.bundle import agent_script
from gpunet.node.contract import FINAL, SAFE_PATH, TXID, Manifest
from gpunet.node.files import Refused, sha256, under, write_atomic
from gpunet.node.guard import AGENT_FILE, detached, start_guard
from gpunet.node.journal import GUARD_START_S, alive, load_journal, locked, move_to, save_journal, wait_for
from gpunet.node.runtime import read_sysctl
from gpunet.node.transaction import Transaction, settle, summary


def checked_manifest(args: argparse.Namespace) -> Manifest:
    """This node's manifest, when the bundle fits it (its name, its tools, its paths); else Refused."""
    manifest = _manifest_for_this_node(Path(args.bundle))
    _require_tools(manifest)
    for f in manifest["files"]:
        under(args.root, f["path"])  # every path inside the root, before anything is written
    if not TXID.match(manifest["txid"]):
        raise Refused(f"bad transaction id {manifest['txid']!r}")
    return manifest


def cmd_check(args: argparse.Namespace) -> dict[str, Any]:
    """Whether the bundle fits this node; changes nothing."""
    manifest = checked_manifest(args)
    return {"node": manifest["node"], "files": len(manifest["files"])}


def cmd_begin(args: argparse.Namespace) -> dict[str, Any]:
    manifest = checked_manifest(args)
    previous = summary(settle(args.state, args.root))
    if previous.get("state") not in (None, *FINAL):
        raise Refused(f"transaction {previous['txid']} is {previous['state']} on this node: confirm it or "
                      f"roll it back first (gpunet apply status / rollback)")
    txid = manifest["txid"]
    tx = Transaction(args.state, args.root, txid)
    tx.tx.mkdir(parents=True, exist_ok=False, mode=0o700)
    write_atomic(tx.tx / "manifest.json", json.dumps(manifest).encode(), 0o600)
    write_atomic(args.state / AGENT_FILE, agent_script().encode(), 0o700)
    now = time.time()
    save_journal(args.state, {"txid": txid, "node": manifest["node"], "state": "staged", "started": round(now, 3),
                              "deadline": round(now + float(manifest["timeout_s"]), 3),
                              "timeout_s": manifest["timeout_s"], "token_sha256": manifest["token_sha256"],
                              "history": []})
    worker = [sys.executable, str(args.state / AGENT_FILE), "work", "--state", str(args.state), "--root",
              str(args.root), txid]
    detached(worker, tx.tx / "worker.log")
    if not wait_for(lambda: alive(load_journal(args.state).get("guard_pid"), txid), GUARD_START_S):
        raise RuntimeError(f"transaction {txid}: the guard did not start (see {tx.tx}/worker.log)")
    return {"txid": txid, "previous": previous, "started": True}


def short_hostname() -> str:
    """The node's name as the plan spells it (no domain): it picks the manifest and the lab tree."""
    return socket.gethostname().split(".")[0]


def _manifest_for_this_node(bundle: Path) -> Manifest:
    """The bundle holds one manifest per node; this node's hostname picks its own."""
    host = short_hostname()
    path = bundle / "manifests" / f"{host}.json"
    if not SAFE_PATH.match(host) or not path.is_file():
        names = sorted(p.stem for p in (bundle / "manifests").glob("*.json"))
        raise Refused(f"this node is {host!r}, which the plan does not name here (the bundle is for "
                      f"{', '.join(names[:8]) or 'no node'}): wrong node, or its hostname differs from the plan")
    manifest: Manifest = json.loads(path.read_text())
    return manifest


def _require_tools(manifest: Manifest) -> None:
    missing = sorted({(t["name"], tool) for t in manifest["targets"] for tool in t.get("requires", [])
                      if shutil.which(tool) is None})
    if missing:
        raise Refused("; ".join(f"render target {name} needs {tool}, which this node lacks" for name, tool in missing))


def cmd_confirm(args: argparse.Namespace) -> dict[str, Any]:
    with locked(args.state, wait_s=10) as got:
        journal = load_journal(args.state)
        if not got:
            raise RuntimeError("the apply still holds the lock")
        _same_tx(journal, args.txid, args.token)
        if journal["state"] != "applied":
            raise Refused(f"transaction {args.txid} is {journal['state']}, not awaiting confirmation")
        if time.time() >= float(journal["deadline"]):
            raise Refused(f"transaction {args.txid} missed its deadline: the guard reverts it")
        move_to(args.state, journal, "committed", finished_at=round(time.time(), 3))
    return summary(journal)


def cmd_abort(args: argparse.Namespace) -> dict[str, Any]:
    """Revert now (verification failed, or the admin said so): the safe direction, so no token is
    asked; a committed transaction is left as it is."""
    with locked(args.state, wait_s=30) as got:
        journal = load_journal(args.state)
        if not got:
            raise RuntimeError("the apply still holds the lock")
        _current_tx(journal, args.txid)
        Transaction(args.state, args.root, args.txid).revert(journal, args.reason or "rolled back by the admin")
    return summary(load_journal(args.state))


def _current_tx(journal: dict[str, Any], txid: str) -> None:
    if journal.get("txid") != txid:
        raise Refused(f"transaction {txid} is not this node's current one ({journal.get('txid')})")


def _same_tx(journal: dict[str, Any], txid: str, token: str) -> None:
    _current_tx(journal, txid)
    if sha256(token.encode()) != journal.get("token_sha256"):
        raise Refused(f"wrong token for transaction {txid}")


def cmd_status(args: argparse.Namespace) -> dict[str, Any]:
    if args.stage:
        Path(args.stage).mkdir(parents=True, exist_ok=True, mode=0o700)  # where the next bundle lands
    return summary(settle(args.state, args.root))


def cmd_files(args: argparse.Namespace) -> dict[str, Any]:
    """The current text of files (None where absent) and sysctl values: the dry run's diff."""
    files = {}
    for relative in args.paths:
        path = under(args.root, relative)
        files[relative] = path.read_text(errors="replace") if path.is_file() else None
    return {"files": files, "sysctl": {k: read_sysctl(k) for k in args.sysctl}, "host": socket.gethostname()}


# Each command's own arguments, beside --state/--root/--lab-root that every one takes.
ARGUMENTS: dict[str, list[tuple[tuple[str, ...], dict[str, Any]]]] = {
    "begin": [(("--bundle",), {"required": True})],
    "check": [(("--bundle",), {"required": True})],
    "confirm": [(("txid",), {}), (("token",), {})],
    "abort": [(("txid",), {}), (("--reason",), {"default": ""})],
    "status": [(("--stage",), {})],
    "work": [(("txid",), {})],
    "guard": [(("txid",), {})],
    "files": [(("--sysctl",), {"action": "append", "default": []}), (("paths",), {"nargs": "*"})],
}


def parse(argv: list[str]) -> argparse.Namespace:
    top = argparse.ArgumentParser(prog="gpunet-apply-agent")
    sub = top.add_subparsers(dest="command", required=True)
    for name, arguments in ARGUMENTS.items():
        p = sub.add_parser(name)
        p.add_argument("--state", type=Path)
        p.add_argument("--root", type=Path, default=Path("/"))
        p.add_argument("--lab-root", type=Path, help="the lab: root and state under LAB_ROOT/<hostname>")
        for flags, options in arguments:
            p.add_argument(*flags, **options)
    args = top.parse_args(argv)
    if args.lab_root is not None:
        args.root = args.lab_root / short_hostname()
    if args.state is None:
        args.state = args.root / "var/lib/gpunet/apply"
    return args


COMMANDS = {"begin": cmd_begin, "check": cmd_check, "confirm": cmd_confirm, "abort": cmd_abort, "status": cmd_status,
            "files": cmd_files}


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    os.umask(0o022)
    if args.command in ("work", "guard"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        tx = Transaction(args.state, args.root, args.txid)
        tx.work() if args.command == "work" else start_guard(tx)
        return 0
    try:
        print(json.dumps(COMMANDS[args.command](args)))
        return 0
    except Refused as exc:
        print(json.dumps({"error": str(exc), "refused": True}))
        return 2
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1


if __name__ == "__main__":
    sys.exit(main())
