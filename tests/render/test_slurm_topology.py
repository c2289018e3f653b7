"""The rendered Slurm topology as slurmctld reads it: slurm.conf that sets no TopologyPlugin of its
own but includes the rendered gpunet-network.conf, with topology.conf and topology.yaml side by side
in its directory. Slurm before 25.05 (Debian 12 has 22.05) reads topology.conf and leaves
topology.yaml alone; 25.05 and later read topology.yaml, whose cluster default is the same switch
tree: either way `scontrol show topology` reports the rendered switches."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gpunet.render.slurm import topology_plugin_problem
from tests.render import test_slurm
from tests.render import validators as v
from tests.render.rendered import files_matching, text_of

# TopologyPlugin only where topology.conf describes switches: a plane of direct cables has none to read.
SWITCHED = {example for example, _ in files_matching("slurm/topology.conf", tag="switches")}
NETWORKS = {example: path for example, path in files_matching("slurm/gpunet-network.conf") if example in SWITCHED}
YAMLS = {example: path for example, path in files_matching("slurm/topology.yaml")}
CASES = [(example, path) for example, path in test_slurm.TOPOLOGIES if example in NETWORKS]


@pytest.mark.lab
@pytest.mark.skipif(bool(v.need("slurmctld") or v.need("munged")), reason=str(v.need("slurmctld") or v.need("munged")))
@pytest.mark.parametrize(("example", "path"), CASES, ids=[c[0] for c in CASES])
def test_slurmctld_reads_the_topology_with_the_rendered_plugin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example: str, path: str, text: str) -> None:
    monkeypatch.setattr(test_slurm, "SLURM_CONF", test_slurm.SLURM_CONF.replace("TopologyPlugin=topology/tree\n", ""))
    network = re.sub(r"^SlurmctldHost=.*$", f"SlurmctldHost=gnctl({test_slurm.ADDRESS})",
                     text_of(example, NETWORKS[example]), flags=re.MULTILINE)
    (tmp_path / "topology.yaml").write_text(text_of(example, YAMLS[example]))
    code, shown = test_slurm.scontrol_topology(tmp_path, text, network=network)
    assert code == 0, (tmp_path / "slurmctld.log").read_text()[-2000:]
    rendered = {line.split()[0].split("=")[1] for line in text.splitlines() if line.startswith("SwitchName=")}
    reported = {line.split()[0].split("=")[1] for line in shown.splitlines() if line.startswith("SwitchName=")}
    assert reported == rendered


@pytest.mark.lab
@pytest.mark.skipif(bool(v.need("slurmctld") or v.need("munged")), reason=str(v.need("slurmctld") or v.need("munged")))
def test_without_the_plugin_slurmctld_ignores_the_topology(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure the snippet prevents (NVIDIA/aicr#1554): topology.conf written, TopologyPlugin never set."""
    monkeypatch.setattr(test_slurm, "SLURM_CONF", test_slurm.SLURM_CONF.replace("TopologyPlugin=topology/tree\n", ""))
    code, shown = test_slurm.scontrol_topology(tmp_path, text_of(*test_slurm.TOPOLOGIES[0]))
    assert code != 0 and "SwitchName" not in shown


@pytest.mark.parametrize("example", sorted(YAMLS))
def test_topology_yaml_has_the_documented_shape(example: str) -> None:
    """topology.yaml(5): a list of topologies, each named first, one cluster_default, exactly one of
    tree (switches: switch + nodes or children) / block (block_sizes, blocks: block + nodes) / flat."""
    topologies = yaml.safe_load(text_of(example, YAMLS[example]))
    assert isinstance(topologies, list) and [next(iter(t)) for t in topologies] == ["topology"] * len(topologies)
    assert sum(t["cluster_default"] for t in topologies) == 1
    for t in topologies:
        kinds = {"tree", "block", "flat"} & set(t)
        assert len(kinds) == 1
        if "tree" in t:
            assert all({"switch"} < set(s) and len({"nodes", "children"} & set(s)) == 1 for s in t["tree"]["switches"])
        if "block" in t:
            sizes = t["block"]["block_sizes"]  # each a power of two times the base (the first)
            assert all(b % sizes[0] == 0 and (b // sizes[0]).bit_count() == 1 for b in sizes) and t["block"]["blocks"]
            assert all(set(b) == {"block", "nodes"} for b in t["block"]["blocks"])


@pytest.mark.parametrize(("conf", "problem"), [
    ("ClusterName=x\n", "sets no TopologyPlugin"),
    ("TopologyPlugin=topology/none\n", "ignores the fabric"),
    ("TopologyPlugin=topology/tree\nTopologyPlugin=topology/flat\n", "topology/flat ignores"),
    ("TopologyPlugin=topology/flat\nTopologyPlugin=topology/tree  # from gpunet\n", None),
    ("topologyplugin=topology/block\n", None),
])
def test_the_plugin_check(conf: str, problem: str | None) -> None:
    found = topology_plugin_problem(conf)
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize("example", sorted(NETWORKS))
def test_the_rendered_snippet_sets_the_plugin(example: str) -> None:
    assert topology_plugin_problem(text_of(example, NETWORKS[example])) is None


def test_no_plugin_where_there_are_no_switches() -> None:
    """two-servers-direct: its one cable joins the two nodes; the snippet names the controller and
    ports, and no plugin for a topology.conf with nothing in it."""
    text = text_of("two-servers-direct", "admin/slurm/gpunet-network.conf")
    assert "SlurmctldHost=gpu01(" in text and "\nTopologyPlugin=" not in text
