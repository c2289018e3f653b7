"""gpunet's apply agent: runs ON the node, shipped with every apply (standard library only, as an
Ansible module is), so a node needs python3 and nothing else of gpunet.

One transaction per node at a time, journalled in STATE/journal.json:

    staged -> backed-up -> writing -> written -> applied -> committed
                 \\___________\\__________\\__________\\--> reverting -> reverted (or revert-failed)

* The worker (detached from the SSH session that started it) backs up, writes and applies, holding
  STATE/lock the whole time, then exits at `applied`.
* The guard (a transient systemd unit where systemd runs, else its own session) is started before
  anything changes. It reverts when the worker dies before `applied` (the lock comes free with the
  state short of `applied`), when the deadline passes unconfirmed, or when told to (`abort`).
* `confirm` (sent by the controller over a NEW SSH connection after verifying) commits.
* Every command first settles a transaction nobody is looking after any more (worker and guard both
  gone, e.g. both killed or the node rebooted) by reverting it, and says so: the node is always on
  the old or the new configuration, and the journal says which.

Every command prints one JSON object; exit 2 is bad input (nothing changed), 1 a failure.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PRE_APPLIED = ("staged", "backed-up", "writing", "written")
FINAL = ("committed", "reverted", "revert-failed")
WHICH = {"committed": "new", "reverted": "old", "revert-failed": "mixed: restore by hand from the backup"}
SAFE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@+-]*(/[A-Za-z0-9_][A-Za-z0-9_.@+-]*)*$")
TXID = re.compile(r"^[a-z0-9]{8,32}$")
ROOT_MARK = "@root/"  # an argv element that names a file under the node's root
POLL_S = 0.1


class Refused(Exception):
    """Bad input: nothing was changed (exit 2)."""


# ---------------------------------------------------------------- journal and lock


def journal_path(state: Path) -> Path:
    return state / "journal.json"


def load_journal(state: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(journal_path(state).read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def save_journal(state: Path, journal: dict[str, Any]) -> None:
    write_atomic(journal_path(state), json.dumps(journal, indent=1, sort_keys=True).encode(), 0o600)


def move_to(state: Path, journal: dict[str, Any], step: str, **fields: Any) -> None:
    journal.update(fields, state=step)
    journal.setdefault("history", []).append([round(time.time(), 3), step])
    save_journal(state, journal)


@contextlib.contextmanager
def locked(state: Path, wait_s: float | None = None) -> Iterator[bool]:
    """STATE/lock held for the block: True when taken (None waits for ever, 0 tries once)."""
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        yield _take(fd, wait_s)
    finally:
        os.close(fd)  # closing drops the lock, as the kernel does when a holder is killed


def _take(fd: int, wait_s: float | None) -> bool:
    end = None if wait_s is None else time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if end is not None and time.monotonic() >= end:
                return False
            time.sleep(POLL_S / 2)


def alive(pid: Any, txid: str) -> bool:
    """A process of this transaction (its command line names the txid) still runs."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return txid.encode() in cmdline and status.rsplit(")", 1)[-1].split()[0] != "Z"


# ---------------------------------------------------------------- files


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write beside, fsync, rename over: a reader sees the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.gpunet-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def under(root: Path, relative: str) -> Path:
    """A manifest path inside the node's root, never outside it."""
    if not SAFE_PATH.match(relative) or ".." in relative.split("/"):
        raise Refused(f"refusing file path {relative!r}: not a plain relative path")
    return root / relative


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def backup_files(root: Path, tx: Path, files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copy every file the transaction will replace; record the ones that did not exist."""
    records = []
    for f in files:
        target = under(root, f["path"])
        record: dict[str, Any] = {"path": f["path"], "new_sha256": sha256(f["content"].encode())}
        if target.is_file():
            data = target.read_bytes()
            saved = tx / "backup" / "files" / f["path"]
            write_atomic(saved, data, 0o600)
            record.update(existed=True, old_sha256=sha256(data), mode=target.stat().st_mode & 0o7777)
        else:
            record.update(existed=False)
        records.append(record)
    return records


def restore_files(root: Path, tx: Path, records: list[dict[str, Any]]) -> None:
    for r in records:
        target = under(root, r["path"])
        if r["existed"]:
            write_atomic(target, (tx / "backup" / "files" / r["path"]).read_bytes(), r["mode"])
        else:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()


# ---------------------------------------------------------------- commands and runtime state


def run(argv: list[str], root: Path, timeout: float = 60, stdin: str | None = None) -> str:
    real = [str(root / a[len(ROOT_MARK):]) if a.startswith(ROOT_MARK) else a for a in argv]
    done = subprocess.run(real, capture_output=True, text=True, timeout=timeout, check=False, input=stdin)
    if done.returncode != 0:
        said = " / ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"{' '.join(real)}: exit {done.returncode}: {said}"[:600])
    return done.stdout


def ip_json(root: Path, *args: str) -> list[dict[str, Any]]:
    out = run(["ip", "-j", *args], root).strip()
    loaded = json.loads(out) if out else []
    return loaded if isinstance(loaded, list) else []


def take_snapshot(kind: str, target: dict[str, Any], root: Path, tx: Path) -> None:
    """The runtime state a target will change, saved before it does."""
    where = tx / "backup" / "runtime"
    where.mkdir(parents=True, exist_ok=True)
    if kind == "sysctl":
        values = {k: _read_sysctl(k) for k in target.get("sysctl_values", {})}
        (where / "sysctl.json").write_text(json.dumps(values))
    elif kind == "ip":
        snapshot = {"addr": ip_json(root, "-4", "addr", "show"), "route": ip_json(root, "-4", "route", "show")}
        (where / "ip.json").write_text(json.dumps(snapshot))


def _read_sysctl(key: str) -> str | None:
    try:
        return Path("/proc/sys", key.replace(".", "/")).read_text().strip()
    except OSError:
        return None


def restore_snapshot(kind: str, target: dict[str, Any], root: Path, tx: Path) -> None:
    where = tx / "backup" / "runtime"
    if kind == "sysctl":
        values = json.loads((where / "sysctl.json").read_text())
        settable = [f"{k}={v}" for k, v in values.items() if v is not None]
        if settable:
            run(["sysctl", "-q", "-w", *settable], root)
    elif kind == "ip":
        snapshot = json.loads((where / "ip.json").read_text())
        apply_ip_state(_state_of(snapshot, set(target.get("ip_state", {}).get("links", {}))), root, force=True)


def _state_of(snapshot: dict[str, Any], links: set[str]) -> dict[str, Any]:
    """`ip -j` output as the state apply_ip_state sets: links, their addresses and MTU, routes."""
    state: dict[str, Any] = {"links": {}, "routes": []}
    for link in snapshot["addr"]:
        if link.get("ifname") in links:
            state["links"][link["ifname"]] = {
                "mtu": link.get("mtu"),
                "addresses": [f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])
                              if a.get("family") == "inet"]}
    for r in snapshot["route"]:
        if r.get("protocol") != "kernel":
            state["routes"].append({"to": r.get("dst", "default"), "via": r.get("gateway"), "dev": r.get("dev"),
                                    "metric": r.get("metric"), "type": r.get("type"),
                                    "protocol": r.get("protocol", "boot")})
    return state


def apply_ip_state(state: dict[str, Any], root: Path, force: bool = False) -> None:
    """Links' MTU and IPv4 addresses exactly as given; the main table's static routes replaced (the
    lab's stand-in for `netplan apply`, which needs systemd-networkd)."""
    lines = []
    for dev, raw in state.get("links", {}).items():
        link = _checked_link(dev, raw)
        if link["mtu"]:
            lines.append(f"link set dev {dev} mtu {link['mtu']}")
        lines.append(f"addr flush dev {dev}")
        lines += [f"addr add {a} dev {dev}" for a in link["addresses"]]
    lines += ["route flush table main proto boot", "route flush table main proto static"]
    lines += [_route_line(r) for r in state.get("routes", [])]
    with tempfile.NamedTemporaryFile("w", suffix=".ip") as script:
        script.write("\n".join(lines) + "\n")
        script.flush()
        run(["ip", "-4", *(["-force"] if force else []), "-batch", script.name], root)


DEVICE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
ROUTE_TYPES = ("blackhole", "unreachable", "prohibit")
PROTOCOL = re.compile(r"^[a-z0-9]{1,16}$")  # boot, static, dhcp, ...: restored as they were


def _checked_link(dev: str, link: dict[str, Any]) -> dict[str, Any]:
    """A link's name and addresses as `ip` words, or Refused: they go into an `ip -batch` file."""
    if not DEVICE.match(dev):
        raise Refused(f"bad interface name {dev!r}")
    return {"mtu": int(link["mtu"]) if link.get("mtu") else None,
            "addresses": [str(ipaddress.ip_interface(a)) for a in link.get("addresses", [])]}


def _checked_route(route: dict[str, Any]) -> dict[str, Any]:
    to = str(route.get("to") or "default")
    return {"to": to if to == "default" else str(ipaddress.ip_network(to, strict=False)),
            "via": str(ipaddress.ip_address(route["via"])) if route.get("via") else None,
            "dev": route["dev"] if route.get("dev") and DEVICE.match(route["dev"]) else None,
            "metric": int(route["metric"]) if route.get("metric") is not None else None,
            "type": route["type"] if route.get("type") in ROUTE_TYPES else None,
            "protocol": route["protocol"] if PROTOCOL.match(str(route.get("protocol", ""))) else "static"}


def _route_line(route: dict[str, Any]) -> str:
    route = _checked_route(route)
    words = ["route", "replace"]
    if route["type"]:
        words.append(route["type"])
    words.append(str(route["to"]))
    if route["via"]:
        words += ["via", str(route["via"])]
    if route["dev"] and not route["type"]:
        words += ["dev", str(route["dev"])]
    if route["metric"] is not None:
        words += ["metric", str(route["metric"])]
    return " ".join([*words, "proto", route["protocol"]])


def act(action: dict[str, Any], target: dict[str, Any], root: Path, tx: Path) -> None:
    """One step of a target's apply or revert: a command, the lab's network state, or a snapshot;
    `if_file`/`unless_file` make it depend on whether a file is (back) in place."""
    if "if_file" in action and not under(root, action["if_file"]).is_file():
        return
    if "unless_file" in action and under(root, action["unless_file"]).is_file():
        return
    if "run" in action:
        run(action["run"], root, timeout=float(action.get("timeout", 120)), stdin=action.get("stdin"))
    elif "ip_state" in action:
        apply_ip_state(target["ip_state"], root)
    elif "restore" in action:
        restore_snapshot(action["restore"], target, root, tx)
    else:
        raise Refused(f"unknown action {sorted(action)!r}")


# ---------------------------------------------------------------- the transaction


class Transaction:
    def __init__(self, state: Path, root: Path, txid: str) -> None:
        self.state, self.root, self.txid = state, root, txid
        self.tx = state / "tx" / txid

    def manifest(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.tx / "manifest.json").read_text())
        return loaded

    def pause(self, manifest: dict[str, Any], step: str) -> None:
        """Fault injection for the kill tests: stop at `step` until killed."""
        if manifest.get("pause_at") == step:
            (self.tx / f"paused-{step}").touch()
            time.sleep(3600)

    def work(self) -> None:
        """The worker: backup, write, check, apply; revert at once on any failure."""
        manifest = self.manifest()
        with locked(self.state) as _:
            journal = load_journal(self.state)
            move_to(self.state, journal, "staged", worker_pid=os.getpid())
            spawn_guard(self)
            if not _wait_for(lambda: alive(load_journal(self.state).get("guard_pid"), self.txid), 10):
                self.revert(journal, "the guard did not start: nothing applied")
                return
            journal = load_journal(self.state)  # with the guard's pid, which the guard wrote
            try:
                self.steps(manifest, journal)
            except Exception as exc:
                self.revert(load_journal(self.state), f"apply failed at {journal.get('state')}: {exc}")

    def steps(self, manifest: dict[str, Any], journal: dict[str, Any]) -> None:
        targets = manifest["targets"]
        for target in targets:
            for kind in target.get("snapshot", []):
                take_snapshot(kind, target, self.root, self.tx)
        records = backup_files(self.root, self.tx, manifest["files"])
        move_to(self.state, journal, "backed-up", files=records)
        self.pause(manifest, "backed-up")
        move_to(self.state, journal, "writing")
        for n, f in enumerate(manifest["files"]):
            write_atomic(under(self.root, f["path"]), f["content"].encode(), int(f["mode"]))
            if n == 0:
                self.pause(manifest, "writing")
        move_to(self.state, journal, "written")
        for target in targets:
            for action in target.get("check", []) + target.get("apply", []):
                act(action, target, self.root, self.tx)
        self.pause(manifest, "applied")
        move_to(self.state, journal, "applied", applied_at=round(time.time(), 3))

    def revert(self, journal: dict[str, Any], reason: str) -> None:
        """Old files back, then each target's runtime back, whatever fails."""
        if journal.get("state") in FINAL:
            return
        # a revert that was itself cut short is done again from where the apply had got to
        interrupted = journal.get("interrupted_at") if journal.get("state") == "reverting" else journal.get("state")
        move_to(self.state, journal, "reverting", reason=reason, interrupted_at=interrupted)
        errors = []
        if journal.get("files"):
            try:
                restore_files(self.root, self.tx, journal["files"])
            except OSError as exc:
                errors.append(f"files: {exc}")
        if interrupted in ("written", "applied"):  # the runtime changes only after every file is written
            errors += self._revert_runtime()
        move_to(self.state, journal, "revert-failed" if errors else "reverted", revert_errors=errors,
                finished_at=round(time.time(), 3))

    def _revert_runtime(self) -> list[str]:
        errors = []
        # In the apply's order: the network back before sshd reloads (a lab sshd binds its address).
        for target in self.manifest()["targets"]:
            for action in target.get("revert", []):
                try:
                    act(action, target, self.root, self.tx)
                except Exception as exc:
                    errors.append(f"{target['name']}: {exc}")
        return errors

    def guard(self) -> None:
        """Revert when the worker dies short of `applied`, at the deadline, or when aborted."""
        while True:
            journal = load_journal(self.state)
            if journal.get("txid") != self.txid or journal.get("state") in FINAL:
                return
            if time.time() >= float(journal["deadline"]):
                self._expire(journal)
                return
            with locked(self.state, wait_s=0) as got:
                journal = load_journal(self.state)
                if got and journal.get("state") in PRE_APPLIED:
                    self.revert(journal, f"the apply stopped at {journal['state']} (its worker is gone)")
                    return
            time.sleep(POLL_S)

    def _expire(self, journal: dict[str, Any]) -> None:
        worker = journal.get("worker_pid")
        if isinstance(worker, int) and alive(worker, self.txid):
            with contextlib.suppress(OSError):
                os.kill(worker, signal.SIGKILL)  # a hung `netplan apply` must not hold the revert up
        with locked(self.state, wait_s=30):
            journal = load_journal(self.state)
            if journal.get("txid") == self.txid and journal.get("state") not in FINAL:
                self.revert(journal, f"not confirmed within {float(journal.get('timeout_s', 0)):g} s")


def _wait_for(predicate: Any, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(POLL_S / 2)
    return False


def spawn_guard(tx: Transaction) -> None:
    """The guard outlives the worker and the SSH session: a transient systemd service where systemd
    is the init (outside the session's cgroup), else a process in a session of its own."""
    argv = [sys.executable, str(tx.state / "agent.py"), "guard", "--state", str(tx.state), "--root", str(tx.root),
            tx.txid]
    if Path("/run/systemd/system").is_dir() and shutil.which("systemd-run"):
        subprocess.run(["systemd-run", "--quiet", "--collect", f"--unit=gpunet-apply-guard-{tx.txid}", "--", *argv],
                       check=True, capture_output=True, timeout=30)
    else:
        _detached(argv, tx.tx / "guard.log")


def _detached(argv: list[str], log: Path) -> int:
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                                close_fds=True).pid


# ---------------------------------------------------------------- settling and reporting


def settle(state: Path, root: Path) -> dict[str, Any]:
    """Revert a transaction that nobody looks after any more (worker and guard gone); the journal."""
    journal = load_journal(state)
    txid = journal.get("txid")
    if not txid or journal.get("state") in FINAL:
        return journal
    with locked(state, wait_s=0) as got:
        journal = load_journal(state)
        if not got or journal.get("state") in FINAL:
            return journal  # the worker holds the lock: the apply is under way
        if not alive(journal.get("guard_pid"), txid):
            Transaction(state, root, txid).revert(
                journal, f"found at {journal['state']} with its guard gone (killed, or the node restarted)")
    return load_journal(state)


def summary(journal: dict[str, Any]) -> dict[str, Any]:
    if not journal:
        return {"txid": None, "state": None, "configuration": "untouched by gpunet apply"}
    keys = ("txid", "state", "reason", "interrupted_at", "revert_errors", "deadline", "started", "finished_at",
            "applied_at", "timeout_s", "node")
    found = {k: journal[k] for k in keys if k in journal}
    found["configuration"] = configuration(journal.get("state", ""))
    return found


def configuration(state: str) -> str:
    """Which configuration the node is on, in a word or two."""
    if state in WHICH:
        return WHICH[state]
    if state == "applied":
        return "new, awaiting confirmation"
    return "changing (the apply or its revert is under way)"


# ---------------------------------------------------------------- commands


def checked_manifest(args: argparse.Namespace) -> dict[str, Any]:
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
    write_atomic(args.state / "agent.py", Path(__file__).read_bytes(), 0o700)
    now = time.time()
    save_journal(args.state, {"txid": txid, "node": manifest["node"], "state": "staged", "started": round(now, 3),
                              "deadline": round(now + float(manifest["timeout_s"]), 3),
                              "timeout_s": manifest["timeout_s"], "token_sha256": manifest["token_sha256"],
                              "history": []})
    worker = [sys.executable, str(args.state / "agent.py"), "work", "--state", str(args.state), "--root",
              str(args.root), txid]
    _detached(worker, tx.tx / "worker.log")
    if not _wait_for(lambda: alive(load_journal(args.state).get("guard_pid"), txid), 15):
        raise RuntimeError(f"transaction {txid}: the guard did not start (see {tx.tx}/worker.log)")
    return {"txid": txid, "previous": previous, "started": True}


def short_hostname() -> str:
    """The node's name as the plan spells it (no domain): it picks the manifest and the lab tree."""
    return socket.gethostname().split(".")[0]


def _manifest_for_this_node(bundle: Path) -> dict[str, Any]:
    """The bundle holds one manifest per node; this node's hostname picks its own."""
    host = short_hostname()
    path = bundle / "manifests" / f"{host}.json"
    if not SAFE_PATH.match(host) or not path.is_file():
        names = sorted(p.stem for p in (bundle / "manifests").glob("*.json"))
        raise Refused(f"this node is {host!r}, which the plan does not name here (the bundle is for "
                      f"{', '.join(names[:8]) or 'no node'}): wrong node, or its hostname differs from the plan")
    manifest: dict[str, Any] = json.loads(path.read_text())
    return manifest


def _require_tools(manifest: dict[str, Any]) -> None:
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
    return {"files": files, "sysctl": {k: _read_sysctl(k) for k in args.sysctl}, "host": socket.gethostname()}


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
        tx.work() if args.command == "work" else _guard(tx)
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


def _guard(tx: Transaction) -> None:
    """Record this pid (the worker holds the lock, writes nothing and waits for it), then guard."""
    journal = load_journal(tx.state)
    if journal.get("txid") == tx.txid:
        save_journal(tx.state, {**journal, "guard_pid": os.getpid()})
    tx.guard()


if __name__ == "__main__":
    sys.exit(main())
