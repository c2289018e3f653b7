"""summary.md: each plane's MTU with the reason for it."""

from __future__ import annotations

from gpunet.api.plans import plan_spec
from gpunet.model.plan import Plan
from gpunet.render.plan_files import render_summary_md
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from gpunet.spec.plan import design_loaded


def _mtu_rows(plan: Plan) -> dict[str, list[str]]:
    text = render_summary_md(plan)
    section = text.split("## MTU\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")][1:]
    return {row[0].strip(): [cell.strip() for cell in row[1:]] for row in rows}


def test_summary_gives_each_planes_mtu_and_why() -> None:
    rows = _mtu_rows(plan_spec(None))
    assert {plane: row[:2] for plane, row in rows.items()} == {
        "management": ["ethernet", "1500"], "oob": ["ethernet", "1500"], "compute": ["infiniband", "4092"],
        "storage": ["roce", "9000"]}
    assert "NFS, Lustre over TCP" in rows["storage"][2]


def test_an_mtu_the_spec_sets_is_said_to_be_the_specs() -> None:
    text = example_text("scalable-unit").replace("    technology: roce\n", "    technology: roce\n    mtu: 4200\n")
    plan, _ = design_loaded(*parse_spec(text, "su.yaml"))
    assert _mtu_rows(plan)["storage"][1:] == [
        "4200", "set in the spec (the default would be 9000: storage carries TCP (NFS, Lustre over TCP) beside "
        "RDMA: jumbo frames for it, while RDMA still sends 4096-byte frames (the largest IB MTU under the "
        "interface MTU))"]
