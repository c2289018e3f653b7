"""Switch configuration from the Plan, per switch under switches/<name>/ at the paths the switch
reads them from: `frr` (a Linux switch running FRR and lldpd: etc/frr/frr.conf,
etc/lldpd.d/gpunet.conf), `sonic` (etc/sonic/config_db.json, and etc/sonic/frr/frr.conf on
routed planes), `nvue` (nvue.sh, `nv set` commands for Cumulus Linux). Ethernet and RoCE switches
only: InfiniBand switches are configured by the subnet manager. Pure; gpunet never pushes them."""

from __future__ import annotations

from collections.abc import Callable

from gpunet.model.plan import Plan, Switch
from gpunet.render.switch.common import renderable, routed
from gpunet.render.switch.frr import render_frr, render_lldpd
from gpunet.render.switch.nvue import render_nvue
from gpunet.render.switch.sonic import render_config_db, render_sonic_frr

SwitchRenderer = Callable[[Plan, Switch], dict[str, str]]
FRR_PATH, LLDPD_PATH = "etc/frr/frr.conf", "etc/lldpd.d/gpunet.conf"
CONFIG_DB_PATH, SONIC_FRR_PATH = "etc/sonic/config_db.json", "etc/sonic/frr/frr.conf"
NVUE_PATH = "nvue.sh"


def _frr(plan: Plan, switch: Switch) -> dict[str, str]:
    """An L2 switch (single-switch plane) routes nothing: lldpd only."""
    files = {LLDPD_PATH: render_lldpd(plan, switch)}
    return files | ({FRR_PATH: render_frr(plan, switch)} if routed(plan, switch) else {})


def _sonic(plan: Plan, switch: Switch) -> dict[str, str]:
    files = {CONFIG_DB_PATH: render_config_db(plan, switch)}
    return files | ({SONIC_FRR_PATH: render_sonic_frr(plan, switch)} if routed(plan, switch) else {})


def _nvue(plan: Plan, switch: Switch) -> dict[str, str]:
    return {NVUE_PATH: render_nvue(plan, switch)}


SWITCH_RENDERERS: dict[str, SwitchRenderer] = {"frr": _frr, "sonic": _sonic, "nvue": _nvue}


def render_switches(plan: Plan, targets: list[str]) -> dict[str, str]:
    """switches/<name>/<path> for every Ethernet and RoCE switch, for the chosen switch targets."""
    files: dict[str, str] = {}
    for switch in (s for s in plan.switches if renderable(plan, s)):
        for target in (t for t in targets if t in SWITCH_RENDERERS):
            rendered = SWITCH_RENDERERS[target](plan, switch)
            files |= {f"switches/{switch.name}/{path}": text for path, text in rendered.items()}
    return files
