"""Topology-aware placement: choose a job's nodes from the free ones by predicted collective time.

Entry points: `place`, `Placement`, and the pure parsers `parse_sinfo`, `parse_scontrol_nodes`,
`parse_free_nodes` (which nodes Slurm can give a job now)."""

from gpunet.place.choose import Placement, place
from gpunet.place.slurm import SlurmNodes, parse_free_nodes, parse_scontrol_nodes, parse_sinfo

__all__ = ["Placement", "SlurmNodes", "parse_free_nodes", "parse_scontrol_nodes", "parse_sinfo", "place"]
