"""`gpunet fleet copy|gather|capture`: files to and from many nodes, and packet captures."""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from gpunet.api import fleet
from gpunet.api.fleet import COMPRESS_CHOICES, Capture, TransferResult
from gpunet.cli.console import cell, shown, stderr, stdout
from gpunet.cli.errors import handles_errors, outcome_code
from gpunet.cli.options import ConnectTimeoutOpt, FanoutOpt, JsonOpt, KeyOpt, LabSshOpt, NodesArg, PlanOpt, UserOpt

CompressOpt = Annotated[str, typer.Option(
    "--compress", help=f"Pack with {', '.join(COMPRESS_CHOICES)} (auto: zstd where present, else gzip).")]
TimeoutOpt = Annotated[float, typer.Option(help="Seconds per node and step (0: no limit).")]
MkdirOpt = Annotated[bool, typer.Option("--mkdir", help="Create the destination directory where it is missing "
                                                   "(without it, a missing one refuses before anything is sent).")]
PHASES = {"pack": "packing", "send": "sending", "check": "checking", "prepare": "packing on nodes",
          "fetch": "fetching"}


class TransferProgress:
    """Bars on a terminal; plain lines elsewhere (a log, CI), one per tenth of the way or node."""

    def __init__(self) -> None:
        self.bars: Progress | None = None
        if stderr.is_terminal:
            self.bars = Progress(TextColumn("{task.description:>16}"), BarColumn(), TimeElapsedColumn(),
                                 console=stderr, transient=True)
        self.tasks: dict[str, TaskID] = {}
        self.said: dict[str, int] = {}

    def __enter__(self) -> TransferProgress:
        if self.bars:
            self.bars.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self.bars:
            self.bars.stop()

    def __call__(self, phase: str, done: int, total: int) -> None:
        what = PHASES.get(phase, phase)
        if self.bars is not None:
            if phase not in self.tasks:
                self.tasks[phase] = self.bars.add_task(what, total=total)
            self.bars.update(self.tasks[phase], completed=done, total=total)
            return
        tenth = done * 10 // max(total, 1)
        if phase == "pack" and self.said.get(phase) == tenth:
            return
        self.said[phase] = tenth
        amount = f"{done / 1e6:.1f} of {total / 1e6:.1f} MB" if phase == "pack" else f"{done}/{total} nodes"
        stderr.print(f"{what}: {amount}", highlight=False)


@handles_errors
def copy(
    nodes: NodesArg,
    source: Annotated[Path, typer.Argument(help="A file or directory here.")],
    dest: Annotated[str, typer.Argument(help="The directory on every node (absolute); SOURCE lands as DEST/NAME.")],
    lab: LabSshOpt = None, plan: PlanOpt = None, user: UserOpt = None, key: KeyOpt = None,
    fanout: FanoutOpt = 64, connect_timeout: ConnectTimeoutOpt = 10, compress: CompressOpt = "auto",
    timeout: TimeoutOpt = 0, mkdir: MkdirOpt = False, as_json: JsonOpt = False,
) -> None:
    """Copy SOURCE to DEST on every node, checked with sha256 there.

    Packed and compressed once, sent by ClusterShell's copy (scp, or tar through gateways in tree
    mode), unpacked beside DEST on each node, checked, then renamed into place."""
    wanted, reached = fleet.reach(nodes, lab=lab, plan=plan, user=user, key=key, fanout=fanout,
                                  connect_timeout=connect_timeout)
    with TransferProgress() as progress:
        result = fleet.copy(reached, wanted, source, dest, compress=compress, progress=progress, timeout=timeout,
                            mkdir=mkdir)
    _finish(result, as_json)


@handles_errors
def gather(
    nodes: NodesArg,
    source: Annotated[str, typer.Argument(help="A file or directory on every node (absolute path).")],
    out: Annotated[Path, typer.Argument(help="Directory here: each node's copy lands as OUT/<node>/<name>.")],
    lab: LabSshOpt = None, plan: PlanOpt = None, user: UserOpt = None, key: KeyOpt = None,
    fanout: FanoutOpt = 64, connect_timeout: ConnectTimeoutOpt = 10, compress: CompressOpt = "auto",
    timeout: TimeoutOpt = 0, mkdir: MkdirOpt = False, as_json: JsonOpt = False,
) -> None:
    """Fetch SOURCE from every node into OUT/<node>/, checked with sha256 here.

    Packed and compressed on each node, fetched by ClusterShell's reverse copy, unpacked into a
    staging directory here (nothing outside it), checked, then renamed into place."""
    wanted, reached = fleet.reach(nodes, lab=lab, plan=plan, user=user, key=key, fanout=fanout,
                                  connect_timeout=connect_timeout)
    with TransferProgress() as progress:
        result = fleet.gather(reached, wanted, source, out, compress=compress, progress=progress, timeout=timeout,
                              mkdir=mkdir)
    _finish(result, as_json)


@handles_errors
def capture(
    nodes: NodesArg,
    out: Annotated[Path, typer.Option("-o", "--out", help="Directory here for OUT/<node>.<iface>.pcap.")],
    iface: Annotated[list[str] | None, typer.Option("--iface", help="Interface to capture on (repeat).")] = None,
    plane: Annotated[str | None, typer.Option(
        "--plane", help="Capture on each node's interfaces of this plane (needs a plan or lab).")] = None,
    between: Annotated[str | None, typer.Option(
        "--between", help="A,B: only traffic between these two nodes on --plane (addresses from the plan).")] = None,
    bpf: Annotated[str, typer.Option("--filter", help="tcpdump filter (and-ed with --between).")] = "",
    count: Annotated[int | None, typer.Option("--count", help="Stop after this many packets per interface.")] = None,
    duration: Annotated[float | None, typer.Option("--duration", help="Stop after this many seconds.")] = None,
    snaplen: Annotated[int, typer.Option("--snaplen", help="Bytes kept per packet (0: all).")] = 0,
    limit: Annotated[float, typer.Option("--limit", help="Seconds a --count-only capture may take.")] = 600,
    lab: LabSshOpt = None, plan: PlanOpt = None, user: UserOpt = None, key: KeyOpt = None,
    fanout: FanoutOpt = 64, connect_timeout: ConnectTimeoutOpt = 10, as_json: JsonOpt = False,
) -> None:
    """Capture packets with tcpdump on NODESET, bounded, into OUT/<node>.<iface>.pcap.

    Stops at --count packets per interface and/or after --duration seconds (a capture with
    neither is refused); the pcaps come back through gather (checked, never half-written)."""
    wanted, reached = fleet.reach(nodes, lab=lab, plan=plan, user=user, key=key, fanout=fanout,
                                  connect_timeout=connect_timeout)
    asked = Capture(iface=iface or [], plane=plane, between=between, bpf=bpf, count=count, duration=duration,
                    snaplen=snaplen, limit=limit)
    interfaces, expression, seconds = fleet.capture_seconds(reached, wanted, asked)
    with stderr.status(f"capturing on {len(interfaces)} node(s) for up to {seconds:g} s…", spinner="dots"):
        result = fleet.capture(reached, interfaces, out, expression=expression, seconds=seconds, wanted=asked)
    _finish(result, as_json)


def _finish(result: TransferResult, as_json: bool) -> None:
    """Exit 1 when a node's copy failed, 3 when a node could not be reached (and none failed)."""
    _print(result, as_json)
    unreached = [n for n in result.failed if not result.outcomes[n].reached]
    raise typer.Exit(outcome_code(findings=len(unreached) < len(result.failed), unjudged=bool(unreached)))


def _print(result: TransferResult, as_json: bool) -> None:
    if as_json:
        print(json.dumps({**result.model_dump(exclude={"outcomes"}), "groups": [
            {"nodes": nodes, "ok": o.ok, "error": o.error} for nodes, o in result.groups()],
            "outcomes": {n: o.model_dump(exclude={"node"}) for n, o in result.outcomes.items()}}, indent=1))
        return
    stdout.print(cell(_headline(result)), soft_wrap=True)
    for nodes, outcome in result.groups():
        if outcome.packets is not None:  # a capture: each node its own counts
            continue
        text = f"ok: {_pattern(outcome.path, outcome.node)}" if outcome.ok else f"failed: {outcome.error}"
        if outcome.already_in_place:
            text += " (already there: another node sharing the destination copied it)"
        stdout.print(f"[{'green' if outcome.ok else 'red'}]{shown(nodes)}[/]", cell(text), soft_wrap=True)
    for node, outcome in sorted(result.outcomes.items()):
        if outcome.packets is not None:
            counts = ", ".join(f"{dev}: {n} packets" for dev, n in outcome.packets.items())
            stdout.print(cell(f"{node} {counts} -> {outcome.path.replace(chr(10), ', ')}"), soft_wrap=True)


def _pattern(path: str, node: str) -> str:
    """A node's path with its name as <node>, so one line stands for the folded nodes."""
    return path.replace(f"/{node}/", "/<node>/").replace(f"/{node}.", "/<node>.").replace("\n", ", ")


def _headline(result: TransferResult) -> str:
    ok = len(result.outcomes) - len(result.failed)
    packed = f" (sent {result.packed_bytes / 1e6:.1f} MB, {result.compress})" if result.packed_bytes else ""
    return (f"{result.operation} {result.source} -> {result.dest}: {result.files} file(s), "
            f"{result.bytes / 1e6:.1f} MB{packed}; {ok}/{len(result.outcomes)} node(s) ok in {result.seconds:.1f} s")
