"""The doctor's catalogue: checks with stable IDs over a NodeState (and the Plan), run together."""

from __future__ import annotations

from gpunet.checks.affinity import AFFINITY_CHECKS
from gpunet.checks.base import VERDICT_ORDER, Check, Context, Finding
from gpunet.checks.fabric_features import FABRIC_FEATURE_CHECKS
from gpunet.checks.firewall import FIREWALL_CHECKS
from gpunet.checks.gpudirect import GPUDIRECT_CHECKS
from gpunet.checks.host import HOST_CHECKS
from gpunet.checks.links import LINK_CHECKS
from gpunet.checks.peers import PEER_CHECKS
from gpunet.checks.roce_qos import ROCE_QOS_CHECKS
from gpunet.checks.stack import STACK_CHECKS

CHECKS: dict[str, Check] = {c.id: c for c in (*LINK_CHECKS, *HOST_CHECKS, *STACK_CHECKS, *FIREWALL_CHECKS,
                                              *PEER_CHECKS, *AFFINITY_CHECKS, *GPUDIRECT_CHECKS, *ROCE_QOS_CHECKS,
                                              *FABRIC_FEATURE_CHECKS)}


def run_checks(ctx: Context) -> list[Finding]:
    """Every check's findings, failures first; a check that breaks reports skip, never raises."""
    findings: list[Finding] = []
    for check in CHECKS.values():
        try:
            findings += check(ctx)
        except Exception as exc:
            findings.append(Finding(check=check.id, area=check.area, title=check.title, verdict="skip",
                                    node=ctx.name, evidence=f"check could not run: {type(exc).__name__}: {exc}"))
    return sorted(findings, key=lambda f: (VERDICT_ORDER[f.verdict], f.area, f.check, f.subject))


__all__ = ["CHECKS", "Context", "Finding", "run_checks"]
