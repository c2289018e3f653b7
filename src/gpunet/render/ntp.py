"""Time: chrony sources from the Plan's ntp flow (the servers the firewall lets every node reach)."""

from __future__ import annotations

from gpunet.model.plan import Node, Plan
from gpunet.render.common import header
from gpunet.render.quote import token

PATH = "etc/chrony/conf.d/gpunet.conf"  # Debian's chrony.conf reads conf.d; on RHEL add `confdir /etc/chrony/conf.d`


def render_chrony(plan: Plan, node: Node | None = None) -> str:
    del node  # the same sources on every node
    servers = [host for f in plan.flows if f.service == "ntp" for host in f.to_hosts]
    text = header("chrony sources")
    if not servers:
        return text + "# The spec names no NTP server (site.ntp_servers): chrony keeps its own sources.\n"
    text += "# iburst: four quick polls at start, so a node that just booted is in sync within seconds.\n"
    return text + "".join(f"server {token(host, 'site.ntp_servers')} iburst\n" for host in servers)
