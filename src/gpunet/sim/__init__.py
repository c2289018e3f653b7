"""Flow-level collective simulation over the Plan's cables (pure: no I/O).

Entry points: `simulate` (one collective of one job), `side_by_side` with `Scenario` (what-ifs),
`oversubscribed` (a spec designed again at another leaf ratio), `pair_rates` (concurrent
point-to-point throughput), `parse_sizes` and `parse_pattern` (the command line's readers),
`SimOptions`, `SimReport`."""

from gpunet.sim.pairs import PairRates, pair_rates
from gpunet.sim.report import Bottleneck, SimReport, SizeRow
from gpunet.sim.simulate import DEFAULT_SIZES, SimOptions, simulate
from gpunet.sim.whatif import Scenario, oversubscribed, parse_pattern, parse_sizes, side_by_side

__all__ = ["DEFAULT_SIZES", "Bottleneck", "PairRates", "Scenario", "SimOptions", "SimReport", "SizeRow",
           "oversubscribed", "pair_rates", "parse_pattern", "parse_sizes", "side_by_side", "simulate"]
