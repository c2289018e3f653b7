"""The scale examples (million-gpu: 125,000 8-GPU servers): listed and written like the others, a
valid spec whose three-tier rail-optimized fabric fits its 128-port switches; `gpunet validate`
accepts it (a full design: a minute and 6 GB on 2 cores) in benchmarks/scale_examples.py, outside the
suite's 10 minutes. The tests that design every example loop over EXAMPLES, which does not hold
them; benchmarks/plan_scale.py --big plans one of the same shape."""

from __future__ import annotations

import json
from math import ceil
from pathlib import Path

from typer.testing import CliRunner

from gpunet.cli.main import app
from gpunet.design.layout import leaf_shape, upper_shape
from gpunet.model.nodeset import parse_nodeset
from gpunet.spec.checks import spec_problems, spec_warnings
from gpunet.spec.examples import EXAMPLES, SCALE_EXAMPLES, example_text
from gpunet.spec.loader import parse_spec

runner = CliRunner()


def test_scale_examples_stay_out_of_the_per_example_loops() -> None:
    assert "million-gpu" in SCALE_EXAMPLES
    assert not set(SCALE_EXAMPLES) & set(EXAMPLES)


def test_the_million_gpu_spec_is_valid_and_names_a_million_gpus() -> None:
    spec, _ = parse_spec(example_text("million-gpu"), "<example million-gpu>")
    assert spec_problems(spec) == [] and spec_warnings(spec) == []
    gpus = sum(len(parse_nodeset(g.nodes)) * g.gpus for g in spec.groups)
    assert gpus == 1_000_000
    compute = spec.planes["compute"].fabric
    assert compute.style == "rail-optimized" and compute.switch.radix == 128


def test_its_compute_fabric_is_three_tiers_of_128_port_switches() -> None:
    """The sizing alone (design/layout.py), not the million cables: 8 rails of 400G NICs on
    128-port NDR switches, 2:1 at the leaf and 3:1 at the spine, fit in three tiers."""
    spec, _ = parse_spec(example_text("million-gpu"), "<example million-gpu>")
    fabric = spec.planes["compute"].fabric
    shape = leaf_shape(rails=8, nics=8, nodes_per_leaf=None, radix=128, ratio=fabric.oversubscription.leaf,
                       nic_gbps=400, port_gbps=400, min_spines=fabric.min_spines)
    units = ceil(125_000 / shape.slots_per_group)
    upper = upper_shape(leaves=units * shape.leaves_per_group, up=shape.up_ports, radix=128,
                        ratio=fabric.oversubscription.spine, leaves_per_group=shape.leaves_per_group,
                        min_tiers=2, min_spines=fabric.min_spines)
    assert upper.tiers == 3 and upper.pods <= 128


def test_init_writes_it_and_examples_lists_it(tmp_path: Path) -> None:
    listed = json.loads(runner.invoke(app, ["examples", "--json"]).stdout)
    assert "million-gpu" in listed
    target = tmp_path / "mega.yaml"
    assert runner.invoke(app, ["init", "--example", "million-gpu", "-o", str(target)]).exit_code == 0
    assert target.read_text() == example_text("million-gpu")
