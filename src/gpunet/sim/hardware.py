"""Inside a node: NVLink per GPU and PCIe per NIC, capacities of their own beside the network.

Nominal figures per GPU model, each direction (Gb/s): NVLink 4 (H100, H200) 18 links x 25 GB/s =
450 GB/s; NVLink 3 (A100) 300 GB/s; NVLink 5 (B200, GB200) 900 GB/s; V100 150 GB/s. PCIe per NIC:
Gen5 x16 = 32 GT/s x 16 x 128/130 = 504 Gb/s; Gen4 x16 = 252 Gb/s; Gen3 x16 = 126 Gb/s. A model not
in the table gets no inside limit, and the report says so."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpunet.sim.fabric import SimFabric
from gpunet.sim.maxmin import Incidence, max_min_rates

NVLINK_GBPS = {"H100": 3600.0, "H200": 3600.0, "GH200": 3600.0, "A100": 2400.0, "B200": 7200.0,
               "GB200": 7200.0, "B300": 7200.0, "V100": 1200.0}
PCIE_GBPS = {"H100": 504.0, "H200": 504.0, "GH200": 504.0, "A100": 252.0, "B200": 504.0, "GB200": 504.0,
             "B300": 504.0, "V100": 126.0}


def _family(model: str | None) -> str | None:
    """'H100-SXM5' -> 'H100': the longest table key the model starts with."""
    if not model:
        return None
    found = [k for k in NVLINK_GBPS if model.upper().startswith(k)]
    return max(found, key=len) if found else None


@dataclass(frozen=True)
class NodeLimits:
    gpus: int
    nvlink_gbps: float | None  # per GPU, each direction; None: not limited
    pcie_gbps: float | None  # per NIC, each direction
    note: str | None = None

    @classmethod
    def of(cls, fabric: SimFabric, nodes: Sequence[str], nvlink_gbps: float | None = None,
           pcie_gbps: float | None = None) -> NodeLimits:
        models = {fabric.gpu_model.get(n) for n in nodes}
        family = _family(next(iter(models))) if len(models) == 1 else None
        note = None
        if family is None and (nvlink_gbps is None or pcie_gbps is None):
            note = (f"GPU model {', '.join(sorted(str(m) for m in models))} not in the NVLink/PCIe table: "
                    "inside the node is not limited unless --nvlink/--pcie give it")
        gpus = min((fabric.gpus.get(n, 0) for n in nodes), default=0)
        return cls(gpus, nvlink_gbps if nvlink_gbps is not None else NVLINK_GBPS.get(family or ""),
                   pcie_gbps if pcie_gbps is not None else PCIE_GBPS.get(family or ""), note)

    def capped(self, fabric: SimFabric, nodes: Sequence[str]) -> np.ndarray:
        """The fabric's capacities with each job NIC's cable directions held to its PCIe link."""
        capacity = fabric.capacity.copy()
        if self.pcie_gbps is not None:
            for node in nodes:
                for nic in fabric.nics.get(node, []):
                    for r in (nic.up, nic.down):
                        capacity[r] = min(capacity[r], self.pcie_gbps)
        return capacity

    def local_seconds_per_byte(self, local: Sequence[tuple[int, int, float]]) -> float:
        """Seconds per byte of S for the slowest NVLink transfer inside one node (all nodes alike):
        each GPU's NVLink out and in are resources of their own."""
        if not local or self.nvlink_gbps is None:
            return 0.0
        flows = np.repeat(np.arange(len(local)), 2)
        resources = np.asarray([r for a, b, _ in local for r in (a, self.gpus + b)], dtype=np.int64)
        incidence = Incidence(flows, resources, np.ones(len(resources)), len(local))
        rates = max_min_rates(incidence, np.full(2 * self.gpus, self.nvlink_gbps))
        fractions = np.asarray([f for _, _, f in local])
        return float(np.max(fractions * 8 / (rates * 1e9)))
