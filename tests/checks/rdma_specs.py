"""Plans of 8-GPU, 8-NIC nodes on a rail-optimized RoCE or InfiniBand compute plane, for the RDMA path
checks (their recorded node trees are tests/fixtures/node_trees/)."""

from __future__ import annotations

from functools import cache

from gpunet.design import design
from gpunet.model.plan import Plan
from gpunet.spec.loader import parse_spec

COMPUTE = {
    "roce": "technology: roce\n    speed: 400G\n    qos: {dscp: 26, priority: 3, cnp_dscp: 48, cnp_priority: 6}",
    "infiniband": "technology: infiniband\n    speed: NDR\n    partition: {key: 0x0001, index: 1}",
}
SPEC = """version: 1
site: {{name: rdma, domain: rdma.example}}
planes:
  management: {{subnet: 198.18.0.0/24, gateway: 198.18.0.1, speed: 25G}}
  compute:
    subnet: 198.18.16.0/22
    {compute}
    fabric:
      style: rail-optimized
      switch: {{model: generic-64x400G, radix: 64, port_speed: 400G}}
groups:
  - name: gpu
    nodes: gpu[01-02]
    gpus: 8
    nics:
      management: {{devices: [eno1]}}
      compute:
        count: 8
        devices: [{devices}]
        hcas: [mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7]
"""


@cache
def rdma_plan(technology: str) -> Plan:
    devices = ", ".join(f"ens{i}np0" if technology == "roce" else f"ib{i}" for i in range(8))
    return design(parse_spec(SPEC.format(compute=COMPUTE[technology], devices=devices))[0])
