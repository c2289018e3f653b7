"""The lab's admin ssh_config: the same renderer as a real cluster's, with the lab's key, its own
known_hosts and multiplexing sockets in the lab directory, and a lab server as the bastion."""

from __future__ import annotations

from gpunet.errors import LabUsageError
from gpunet.lab.access import LAB_PLAN
from gpunet.lab.state import lab_dir, read_state
from gpunet.model.io import read_plan
from gpunet.render.ssh import SshClient, render_ssh_config

SSH_CONFIG = "ssh_config"


def lab_ssh_config(lab_id: str, bastion: str | None = None) -> str:
    """ssh_config for the lab's servers at their lab addresses; `bastion` (a lab server) is the
    jump host, else the plan's bastion when it is one of the lab's servers, else none."""
    state = read_state(lab_id)
    if state is None:
        raise LabUsageError(f"no lab {lab_id!r}; `gpunet lab up` builds one")
    plan = read_plan(lab_dir(lab_id) / LAB_PLAN)
    if bastion is not None and bastion not in state.servers:
        raise LabUsageError(f"--bastion {bastion!r} is not a server of lab {lab_id}: {', '.join(state.servers)}")
    chosen = bastion or (plan.site.bastion if plan.site.bastion in state.servers else None)
    lab_plan = plan.model_copy(update={"site": plan.site.model_copy(update={"bastion": chosen, "admin_user": "root"}),
                                       "nodes": tuple(n for n in plan.nodes if n.name in state.servers)})
    directory = lab_dir(lab_id)
    return render_ssh_config(lab_plan, SshClient(identity_file=str(directory / "id_ed25519"),
                                                 known_hosts=str(directory / "known_hosts"),
                                                 control_path=str(directory / "cm-%C")))
