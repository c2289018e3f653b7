"""ClusterShell groups from the Plan: one group source per kind (role, group, plane, rail, leaf),
so `clush -w @leaf:comp-leaf003 ...` and `nodeset -e @role:storage` work on the admin host as
`gpunet fleet` does. Installed under /etc/clustershell/groups.d/, which ClusterShell reads by default."""

from __future__ import annotations

from gpunet.model.inventory import node_groups
from gpunet.model.nodeset import fold
from gpunet.model.plan import Plan
from gpunet.render.common import header, to_yaml

PATH = "clustershell/groups.d/gpunet.yaml"


def render_clustershell_groups(plan: Plan) -> str:
    sources = {kind: {name: fold(nodes) for name, nodes in members.items()}
               for kind, members in node_groups(plan).items()}
    return header("ClusterShell groups (copy to /etc/clustershell/groups.d/)") + to_yaml(sources)
