"""/etc/hosts: every node on every plane, identical on all nodes."""

from __future__ import annotations

from gpunet.model.plan import Node, Plan
from gpunet.render.common import header
from gpunet.render.quote import token

PATH = "etc/hosts"


def render_hosts(plan: Plan, node: Node | None = None) -> str:
    del node  # the same file everywhere, so any node resolves any other on any plane
    domain = token(plan.site.domain, "site.domain")
    lines = [header("/etc/hosts").rstrip(), "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    for n in plan.nodes:
        for i in n.interfaces:
            if i.address and i.hostname:
                name = token(i.hostname, f"{n.name}/{i.name} hostname")
                lines.append(f"{i.address.split('/')[0]}\t{name}.{domain} {name}")
    return "\n".join(lines) + "\n"
