"""NCCL's network environment per node, each setting with why (sourced by job prologs): the
values of model/tuning.py, which doctor checks against too."""

from __future__ import annotations

from gpunet.model.plan import Node, Plan
from gpunet.model.tuning import nccl_settings
from gpunet.render.common import header
from gpunet.render.quote import shell_word

PATH = "etc/gpunet/nccl.env"


def render_nccl_env(plan: Plan, node: Node) -> str:
    settings = nccl_settings(plan, node)
    text = header("NCCL environment")
    if not settings:
        return text + "# This node has no compute-plane interface: NCCL traffic does not start here.\n"
    return text + "".join(f"# {s.why}\nexport {s.name}={shell_word(s.value)}\n" for s in settings)
