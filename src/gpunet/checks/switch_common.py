"""What the switch checks share: one way to write a finding about a switch, and how a Linux
switch's (or a SONiC alias's) port name maps to the Plan's port number."""

from __future__ import annotations

import re

from gpunet.checks.base import Finding, Verdict
from gpunet.model.plan import Switch

PORT_NAME = re.compile(r"^(?:swp|etp)(\d+)$")  # swp17 (Linux, Cumulus, the lab), etp17 (a SONiC alias)


def linux_port(port: str) -> str:
    return f"swp{port}"


def port_number(name: str | None) -> int | None:
    match = PORT_NAME.match(name or "")
    return int(match[1]) if match else None


def finding(check: str, switch: Switch, verdict: Verdict, *, title: str, subject: str, observed: str = "",
            expected: str = "", evidence: str = "", fix: str = "") -> Finding:
    """A verdict about a switch; a pass or skip carries no fix."""
    area = "bgp" if check.startswith("GN-BGP") else "switch"
    return Finding(check=check, area=area, title=title, verdict=verdict, node=switch.name, subject=subject,
                   observed=observed, expected=expected, evidence=evidence,
                   fix="" if verdict in ("pass", "skip") else fix)
