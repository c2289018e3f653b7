"""`fleet capture`: tcpdump on chosen nodes and interfaces, bounded by a packet count and a time
(a capture with neither is refused; a count alone still ends at the time limit), then every pcap
gathered here as OUT/<node>.<interface>.pcap through the gather path: checked against the node's
sha256 and renamed into place, never left half-written.

`flow_between` turns "the traffic between A and B on a plane" into the interfaces and a filter
from the Plan's own addresses (a lab's plan holds the lab's addresses)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import UsageError
from gpunet.files.write import output_root
from gpunet.fleet import ClusterShellRunner, NodeOutcome
from gpunet.fleet.gather import gather_each, replace
from gpunet.fleet.steps import multiplexed, run_each
from gpunet.fleet.transfer import TransferOutcome, TransferResult, reached, why
from gpunet.fleet.untar import TransferRefused
from gpunet.model.plan import Plan
from gpunet.model.types import DEVICE_PATTERN

MAX_SECONDS = 3600.0
MAX_PACKETS = 10_000_000
MAX_FILTER = 2000
DEVICE = re.compile(DEVICE_PATTERN)

# $1 seconds $2 packets (0: no count) $3 snap length (0: whole packets) $4 filter $5 interfaces.
# One tcpdump per interface, all at once; `timeout` ends each with SIGINT (tcpdump then flushes).
CAPTURE = r"""
set -u
seconds=$1 count=$2 snaplen=$3 filter=$4 devs=$5
command -v tcpdump >/dev/null 2>&1 || { echo "gpunet: tcpdump is not installed here" >&2; exit 2; }
for dev in $devs; do
  [ -e "/sys/class/net/$dev" ] || { echo "gpunet: no interface $dev here" >&2; exit 2; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/gpunet-capture.XXXXXXXX") || { echo "gpunet: no temporary directory" >&2; exit 1; }
pids=
for dev in $devs; do
  # -Z root: the pcaps are written into this 0700 directory, readable by root alone (a build that
  # drops to a tcpdump user could not write there); -- ends the options: the filter is one.
  set -- tcpdump -n -Z root -i "$dev" -w "$dir/$dev.pcap" -s "$snaplen" -U
  [ "$count" -gt 0 ] && set -- "$@" -c "$count"
  timeout --signal=INT "$seconds" "$@" -- "$filter" 2>"$dir/$dev.log" &
  pids="$pids $!"
done
failed=
for pid in $pids; do wait "$pid"; rc=$?; [ $rc = 0 ] || [ $rc = 124 ] || failed=$rc; done
echo "dir=$dir"
for dev in $devs; do echo "captured=$dev $(sed -n 's/^\([0-9]*\) packets\{0,1\} captured.*/\1/p' "$dir/$dev.log")"; done
if [ -n "$failed" ]; then
  echo "gpunet: tcpdump failed: $(grep -hv 'listening on' "$dir"/*.log | head -n 3)" >&2
  rm -rf -- "$dir"
  exit 1
fi
rm -f -- "$dir"/*.log
"""


def check_capture(count: int | None, seconds: float | None, limit: float, interfaces: Sequence[str],
                  bpf: str) -> float:
    """The time bound the capture runs under; UsageError for an unbounded or malformed one."""
    if count is None and seconds is None:
        raise UsageError("refusing an unbounded capture: give --count PACKETS and/or --duration SECONDS")
    if count is not None and not 1 <= count <= MAX_PACKETS:
        raise UsageError(f"--count {count}: between 1 and {MAX_PACKETS}")
    bound = seconds if seconds is not None else limit
    if not (math.isfinite(bound) and 0 < bound <= MAX_SECONDS):
        raise UsageError(f"--duration {bound}: above 0 and at most {MAX_SECONDS:g} seconds")
    if not interfaces:
        raise UsageError("name the interfaces: --iface DEV (repeat), or --plane with a plan or lab")
    bad = [i for i in interfaces if not DEVICE.fullmatch(i)]
    if bad:
        raise UsageError(f"not interface names: {', '.join(repr(b) for b in bad[:3])}")
    if len(bpf) > MAX_FILTER or any(ord(c) < 32 for c in bpf):
        raise UsageError(f"--filter: one line of at most {MAX_FILTER} characters")
    if bpf.lstrip().startswith("-"):
        raise UsageError(f"--filter {bpf!r}: a filter expression, not a tcpdump option")
    return bound


def capture_plan(nodes: NodeSet, plan: Plan | None, *, iface: Sequence[str], plane: str | None,
                 between: str | None, bpf: str, count: int | None, duration: float | None,
                 limit: float) -> tuple[dict[str, list[str]], str, float]:
    """node -> interfaces, the tcpdump filter and the time bound, from the options; UsageError for
    an unbounded capture, a flow without a plan, or names that are not interfaces."""
    expression = bpf
    if between:
        first, _, second = between.partition(",")
        if plan is None or plane is None:
            raise UsageError("--between needs --plane and a plan (--plan or --lab)")
        flow = flow_between(plan, first.strip(), second.strip(), plane)
        expression = f"({flow}) and ({bpf})" if bpf else flow
    if plane and not iface and plan is None:
        raise UsageError("--plane needs a plan (--plan or --lab); or name --iface")
    interfaces = {n: list(iface) for n in nodes} if iface else plane_interfaces(plan, nodes, plane) \
        if plan is not None and plane else {}
    seconds = check_capture(count, duration, limit, [d for devices in interfaces.values() for d in devices],
                            expression)
    return interfaces, expression, seconds


def plane_interfaces(plan: Plan, nodes: NodeSet, plane: str) -> dict[str, list[str]]:
    """node -> its interfaces that carry an address on PLANE (what tcpdump can see)."""
    by_name = {n.name: n for n in plan.nodes}
    unknown = [n for n in nodes if n not in by_name]
    if unknown:
        raise UsageError(f"not nodes of the plan: {', '.join(unknown[:5])}")
    found = {n: [i.layer3 for i in by_name[n].interfaces if i.plane == plane and i.address] for n in nodes}
    empty = [n for n, devices in found.items() if not devices]
    if empty:
        raise UsageError(f"no addressed interface on plane {plane!r} on {', '.join(empty[:5])}; "
                         f"planes: {', '.join(p.name for p in plan.planes)}")
    return found


def flow_between(plan: Plan, first: str, second: str, plane: str) -> str:
    """A tcpdump filter for the traffic between two nodes on a plane, from the Plan's addresses."""
    both = plane_addresses(plan, first, plane), plane_addresses(plan, second, plane)
    return " and ".join("(" + " or ".join(f"host {a}" for a in addresses) + ")" for addresses in both)


def plane_addresses(plan: Plan, node: str, plane: str) -> list[str]:
    match = next((n for n in plan.nodes if n.name == node), None)
    if match is None:
        raise UsageError(f"--between: {node!r} is not a node of the plan")
    found = [i.address.split("/")[0] for i in match.interfaces if i.plane == plane and i.address]
    if not found:
        raise UsageError(f"--between: {node} has no address on plane {plane!r}")
    return found


def capture(runner: ClusterShellRunner, interfaces: Mapping[str, Sequence[str]], out: Path, *, count: int | None,
            seconds: float, bpf: str = "", snaplen: int = 0) -> TransferResult:
    """tcpdump on every node's interfaces until COUNT packets or SECONDS, then the pcaps here."""
    output_root(out)
    with multiplexed(runner) as shared:
        ran = run_each(shared, {n: ["sh", "-c", CAPTURE, "gpunet-capture", f"{seconds:g}", str(count or 0),
                                    str(snaplen), bpf, " ".join(devices)] for n, devices in interfaces.items()},
                       timeout=seconds + 60)
        dirs, counts, failed = _captured(ran)
        result = gather_each(shared, dirs, out, place=lambda node, unpacked: _place(unpacked, out, node),
                             remove_source=True) if dirs else None
    outcomes = {n: o.model_copy(update={"packets": counts[n]}) for n, o in (result.outcomes if result else {}).items()}
    outcomes.update(failed)
    return TransferResult(operation="gather", source="tcpdump", dest=str(out), compress="auto",
                          seconds=result.seconds if result else 0.0, outcomes=outcomes)


def _captured(ran: Mapping[str, NodeOutcome]) -> tuple[dict[str, str], dict[str, dict[str, int]],
                                                     dict[str, TransferOutcome]]:
    """Each node's capture directory and packets per interface, or why it has none."""
    dirs: dict[str, str] = {}
    counts: dict[str, dict[str, int]] = {}
    failed: dict[str, TransferOutcome] = {}
    for node, outcome in ran.items():
        lines = [line.split("=", 1) for line in outcome.stdout.splitlines() if "=" in line]
        fields = dict(lines)
        if outcome.rc == 0 and fields.get("dir", "").startswith("/"):
            dirs[node] = fields["dir"]
            counts[node] = {dev: int(n) for dev, _, n in (v.partition(" ") for k, v in lines if k == "captured")
                            if re.fullmatch(r"[0-9]{1,20}", n)}
        else:
            failed[node] = TransferOutcome(node=node, ok=False, error=why(outcome), reached=reached(outcome))
    return dirs, counts, failed


def _place(unpacked: Path, out: Path, node: str) -> str:
    """<dir>/<iface>.pcap -> OUT/<node>.<iface>.pcap; the paths, one a line."""
    placed = []
    for pcap in sorted(unpacked.glob("*.pcap")):
        final = out / f"{node}.{pcap.name}"
        if final.is_symlink() or final.is_dir():
            raise TransferRefused(f"{final} is a symlink or a directory; gpunet does not replace it")
        placed.append(str(replace(pcap, final)))
    return "\n".join(placed)
