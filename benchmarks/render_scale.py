"""Render every target for every node of a 2048-node cluster (8-rail NDR compute, bonded RoCE
storage, management) and print files per second: rendering alone, and rendering plus the
atomic writes `gpunet render` does (median of --runs).

    python benchmarks/render_scale.py [--nodes 2048] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from gpunet.design import design
from gpunet.files.write import write_files
from gpunet.model.spec import Spec
from gpunet.render import TARGETS, file_mode, render_all


def cluster(nodes: int) -> Spec:
    return Spec.model_validate({
        "site": {"name": "bench", "domain": "bench.example", "dns_servers": ["198.18.0.53"], "bastion": "login01",
                 "admin_subnet": "198.18.0.0/28", "monitoring": "198.18.0.10/32"},
        "planes": {
            "management": {"subnet": "198.18.0.0/20", "gateway": "198.18.0.1", "speed": "25G",
                           "fabric": {"switch": {"radix": 64, "port_speed": "25G"},
                                      "oversubscription": {"leaf": "3:1", "spine": "3:1"}}},
            "compute": {"subnet": "198.19.0.0/17", "technology": "infiniband", "speed": "NDR",
                        "fabric": {"style": "rail-optimized", "switch": {"radix": 64, "port_speed": "NDR"}}},
            "storage": {"subnet": "198.18.32.0/19", "technology": "roce", "speed": "200G",
                        "fabric": {"switch": {"radix": 64, "port_speed": "400G"}}},
        },
        "groups": [
            {"name": "gpu", "nodes": f"gpu[0001-{nodes:04d}]", "gpus": 8,
             "nics": {"management": {}, "compute": {"count": 8},
                      "storage": {"count": 2, "bond": {"name": "bond0"}}}},
            {"name": "login", "nodes": "login01", "role": "login", "nics": {"management": {}}},
        ],
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2048)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    plan = design(cluster(args.nodes))
    render_s, write_s, count = [], [], 0
    for _ in range(args.runs):
        out = Path(tempfile.mkdtemp(prefix="gpunet-render-"))
        try:
            start = time.perf_counter()
            files = render_all(plan, plan.nodes, TARGETS)
            rendered = time.perf_counter()
            write_files(out, files, file_mode)
            written = time.perf_counter()
        finally:
            shutil.rmtree(out)
        count = len(files)
        render_s.append(rendered - start)
        write_s.append(written - start)
    result = {"nodes": len(plan.nodes), "targets": len(TARGETS), "files": count,
              "render_s": statistics.median(render_s), "render_and_write_s": statistics.median(write_s)}
    result["files_per_s_render"] = count / result["render_s"]
    result["files_per_s_with_writes"] = count / result["render_and_write_s"]
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{result['nodes']} nodes, {result['targets']} targets, {count} files, median of {args.runs} run(s)")
    print(f"render only:      {result['render_s']:.2f} s  {result['files_per_s_render']:,.0f} files/s")
    print(f"render + writes:  {result['render_and_write_s']:.2f} s  {result['files_per_s_with_writes']:,.0f} files/s")


if __name__ == "__main__":
    main()
