"""Inject every bad change of tests/apply/bad_changes.py (7 kinds x 8 variants = 56) into a lab's
servers with `gpunet apply`, 8 servers at a time (one round per kind, the 8 variants of the kind
on gpu1..gpu8), and count lockouts: a server that is not reverted, or that a new SSH connection
cannot reach afterwards. Prints per kind how each was reverted (the controller after a failed
verification, the node's own apply failing, or the guard at the deadline) and the median time
from `begin` to the end of the revert on the node. Root (a lab).

    sudo python benchmarks/apply_lockouts.py [--timeout 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from ClusterShell.NodeSet import NodeSet

sys.path.insert(0, str(Path(__file__).parent.parent))
from tests.apply.bad_changes import KINDS, VARIANTS

from gpunet.api import plan_spec
from gpunet.api.apply import reach
from gpunet.apply import ApplyOptions, apply_rollout
from gpunet.apply.manifest import DEFAULT_TARGETS
from gpunet.lab.build import lab_down, lab_up

SPEC = Path(__file__).parent.parent / "tests" / "fixtures" / "lab" / "small.yaml"
LAB = "bk"
NODES = NodeSet(f"gpu[1-{VARIANTS}]")


def how(reason: str) -> str:
    if reason.startswith("verification failed"):
        return "verification"
    if reason.startswith("apply failed"):
        return "apply failed"
    return "guard at deadline" if reason.startswith("not confirmed") else reason[:40]


def one_kind(kind: str, timeout: float) -> dict[str, object]:
    plan, remote, _ = reach(lab=LAB, plan=None)
    make = KINDS[kind]
    report = apply_rollout(plan, NODES, remote, ApplyOptions(
        targets=DEFAULT_TARGETS, timeout_s=timeout, canary=0, batch=VARIANTS, max_fail=VARIANTS,
        change=lambda node, files: make(int(node[3:]) - 1)(files)))
    lockouts = [n.node for n in report.nodes if n.outcome != "reverted" or not n.ssh_after]
    took = [n.node_seconds for n in report.nodes if n.node_seconds is not None]
    ways = dict(Counter(how(n.reason) for n in report.nodes))
    return {"kind": kind, "injected": len(report.nodes), "lockouts": lockouts, "reverted_by": ways,
            "median_revert_s": round(statistics.median(took), 2) if took else None,
            "max_revert_s": max(took) if took else None}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lab_up(plan_spec(SPEC), LAB)
    start = time.monotonic()
    try:
        plan, remote, _ = reach(lab=LAB, plan=None)
        good = apply_rollout(plan, NODES, remote, ApplyOptions(targets=DEFAULT_TARGETS, timeout_s=args.timeout,
                                                               canary=0, batch=VARIANTS))
        assert all(n.outcome == "applied" for n in good.nodes), good.nodes
        rows = [one_kind(kind, args.timeout) for kind in KINDS]
    finally:
        lab_down(LAB)
    total = sum(int(r["injected"]) for r in rows)  # type: ignore[call-overload]
    lockouts = sum(len(r["lockouts"]) for r in rows)  # type: ignore[arg-type]
    if args.json:
        print(json.dumps({"rows": rows, "injected": total, "lockouts": lockouts, "timeout_s": args.timeout}, indent=1))
        return
    for r in rows:
        print(f"{r['kind']:<45} {r['injected']:>3} injected, lockouts {len(r['lockouts'])}  "  # type: ignore[arg-type]
              f"reverted by {r['reverted_by']}  median {r['median_revert_s']} s, max {r['max_revert_s']} s")
    print(f"{total} bad changes, {lockouts} lockouts (timeout {args.timeout:g} s; {time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
