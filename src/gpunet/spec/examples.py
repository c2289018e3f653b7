"""Built-in example specs, shipped as package data."""

from __future__ import annotations

from importlib import resources

DEFAULT_EXAMPLE = "scalable-unit"
EXAMPLES = {
    "one-server": "One server: static address, gateway and DNS on the site network.",
    "two-servers-direct": "Two GPU servers joined by a direct 100G RoCE cable.",
    "small-ethernet": "40 GPU nodes on 25G Ethernet spine-leaf, bonded storage NICs.",
    "scalable-unit": "32 8-GPU servers: 8-rail NDR InfiniBand, storage, management, OOB.",
    "multi-unit-large": "1024 8-GPU servers: a rail-optimized fabric that needs three tiers.",
}
# Examples too large for the tests that design every example (a minute and gigabytes each): listed
# and written by `gpunet examples` / `init` like the others, planned by benchmarks/plan_scale.py.
SCALE_EXAMPLES = {
    "million-gpu": "125,000 8-GPU servers (1M GPUs): rail-optimized NDR, three tiers of 128-port switches.",
}
ALL_EXAMPLES = EXAMPLES | SCALE_EXAMPLES


def example_text(name: str) -> str:
    """The YAML of a built-in example; KeyError names the known ones."""
    if name not in ALL_EXAMPLES:
        raise KeyError(f"no example {name!r}; known: {', '.join(ALL_EXAMPLES)}")
    return resources.files("gpunet.spec").joinpath("examples", f"{name}.yaml").read_text()
