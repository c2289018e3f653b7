"""Spec builders shared by tests: small dicts that grow into valid Specs."""

from __future__ import annotations

from typing import Any

from gpunet.model.spec import Spec


def rail_spec(nodes: int, radix: int = 64, rails: int = 8, **fabric: Any) -> Spec:
    """`nodes` 8-GPU servers on an NDR rail-optimized compute plane of `radix`-port switches."""
    return Spec.model_validate({
        "site": {"name": "t"},
        "planes": {"compute": {
            "subnet": "10.0.0.0/12", "technology": "infiniband", "speed": "NDR",
            "fabric": {"style": "rail-optimized",
                       "switch": {"model": f"ib-{radix}", "radix": radix, "port_speed": "NDR"}, **fabric},
        }},
        "groups": [{"name": "gpu", "nodes": f"gpu[00001-{nodes:05d}]", "gpus": 8,
                    "nics": {"compute": {"count": rails}}}],
    })
