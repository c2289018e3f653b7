"""Flow-level collective simulation over the Plan's cables (pure: no I/O).

Entry points: `simulate` (one collective of one job), `compare_scenarios` (what-ifs side by
side), `SimOptions`, `SimReport`."""

from gpunet.sim.report import Bottleneck, SimReport, SizeRow
from gpunet.sim.simulate import DEFAULT_SIZES, SimOptions, simulate

__all__ = ["DEFAULT_SIZES", "Bottleneck", "SimOptions", "SimReport", "SizeRow", "simulate"]
