"""summary.md: each plane's MTU with the reason for it; the CSVs as csv.writer writes them."""

from __future__ import annotations

import csv
import io

from gpunet.api.plans import plan_spec
from gpunet.model.plan import Plan, Port
from gpunet.render.plan_files import (
    ADDRESS_COLUMNS,
    CABLING_COLUMNS,
    render_addresses_csv,
    render_cabling_csv,
    render_summary_md,
)
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


def _csv_writer_text(header: tuple[str, ...], rows: list[tuple[object, ...]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def test_the_csvs_are_what_csv_writer_writes_also_where_a_cell_needs_quoting() -> None:
    """cabling.csv and addresses.csv are joined by hand for speed: the text csv.writer writes, its
    None as an empty cell included; a cell csv.writer would quote (only a plan built around
    validation can hold one) sends the file through csv.writer itself."""
    plan = plan_spec(None)
    link, node = plan.links[0], plan.nodes[0]
    odd = plan.model_copy(update={
        "links": (*plan.links[:1], link.model_copy(update={"a": Port.model_construct(device='gpu"1,', port="p")})),
        "nodes": (node.model_copy(update={"interfaces": (
            node.interfaces[0].model_copy(update={"hostname": None, "address": "10.0.0.1/24"}),
            node.interfaces[0].model_copy(update={"hostname": "a\nb", "name": "x,y"}))}),)})
    for shown in (plan, odd):
        cables = [(c.plane, c.tier, c.a.device, c.a.port, c.b.device, c.b.port, c.gbps) for c in shown.links]
        assert render_cabling_csv(shown) == _csv_writer_text(CABLING_COLUMNS, cables)
        addresses = [(n.name, n.group, i.plane, i.name, i.address, i.address6 or "", i.hostname, i.mtu,
                      "" if i.rail is None else i.rail, i.vlan or "")
                     for n in shown.nodes for i in n.interfaces if i.address]
        assert render_addresses_csv(shown) == _csv_writer_text(ADDRESS_COLUMNS, addresses)
    assert '"gpu""1,"' in render_cabling_csv(odd) and '"a\nb"' in render_addresses_csv(odd)
    assert ",,1500," in render_addresses_csv(odd).splitlines()[1]  # no hostname: an empty cell
