"""Bad input: a result of another plan (another site, nodes, switches or cables) is refused naming the
file and why; a file that is no result, too large or not a file is refused; a family not given is
said to be missing, never shown as clean."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpunet.bench.store import Measurement, add_measurements, start_run
from gpunet.errors import UsageError
from gpunet.model.plan import Plan
from gpunet.report.build import ReportFiles, read_results
from gpunet.report.families import FAMILIES
from gpunet.report.load import read_bounded
from gpunet.report.page import render_report
from tests.render.rendered import example_plan
from tests.report.conftest import GENERATED
from tests.report.results import cabling_json, compare_json, localize_json


def refused(plan: Plan, files: ReportFiles, *needles: str) -> str:
    with pytest.raises(UsageError) as caught:
        read_results(plan, files)
    message = str(caught.value)
    for needle in needles:
        assert needle in message, message
    return message


@pytest.fixture(scope="module")
def other() -> Plan:
    return example_plan("small-ethernet")


def test_a_cabling_check_of_another_plan_is_refused(tmp_path: Path, su_plan: Plan, other: Plan) -> None:
    path = tmp_path / "other-cabling.json"
    path.write_text(json.dumps({"source": "LLDP", "planes": ["compute"], "findings": [], "cables": [
        {"plane": "compute", "a": "node01:ens1f0", "b": "comp-leaf001:1", "verdict": "ok"}]}))
    refused(su_plan, ReportFiles(cabling=path), str(path), "cables that plan 'su1' does not have",
            "node01:ens1f0 comp-leaf001:1", "another plan")
    del other


def test_a_localization_of_another_fabric_is_refused(tmp_path: Path, su_plan: Plan) -> None:
    path = tmp_path / "localize.json"
    data = json.loads(localize_json(su_plan))
    data["suspects"][0]["cable"] = "comp-leaf099:1 comp-spine001:1"
    path.write_text(json.dumps(data))
    refused(su_plan, ReportFiles(localize=path), str(path), "comp-leaf099:1 comp-spine001:1")


def test_the_doctor_of_a_node_not_in_the_plan_is_refused(tmp_path: Path, su_plan: Plan,
                                                         seeded: dict[str, Path]) -> None:
    data = json.loads(seeded["doctor"].read_text()) | {"node": "node07"}
    (tmp_path / "doctor.json").write_text(json.dumps(data))
    refused(su_plan, ReportFiles(doctor=(seeded["doctor2"], tmp_path / "doctor.json")), "doctor.json", "node07")


def test_a_fleet_doctor_naming_other_nodes_is_refused(tmp_path: Path, su_plan: Plan) -> None:
    fleet = {"nodes": 40, "findings": [{"check": "GN-MTU-01", "verdict": "fail", "subject": "ens1f0",
                                        "nodes": "node[01-40]", "count": 40, "observed": "1500", "variants": 1,
                                        "expected": "9000", "fix": "ip link set dev ens1f0 mtu 9000"}],
             "unreachable": {}}
    (tmp_path / "fleet.json").write_text(json.dumps(fleet))
    refused(su_plan, ReportFiles(doctor=(tmp_path / "fleet.json",)), "fleet.json", "node01, node02, node03 and 37 more")


def test_simulated_times_of_another_site_are_refused(tmp_path: Path, su_plan: Plan) -> None:
    (tmp_path / "sim.json").write_text(json.dumps({"site": "roce12500", "jobs": []}))
    refused(su_plan, ReportFiles(sim=tmp_path / "sim.json"), "sim.json", "site 'roce12500'", "'su1'")


def test_a_comparison_of_other_designs_is_refused(tmp_path: Path, su_plan: Plan, other: Plan) -> None:
    data = json.loads(compare_json(su_plan))
    for design in data["designs"]:
        design["site"] = other.site.name
    (tmp_path / "compare.json").write_text(json.dumps(data))
    refused(su_plan, ReportFiles(compare=tmp_path / "compare.json"), "compare.json", "none of them 'su1'")


def test_switch_checks_of_unknown_switches_are_refused(tmp_path: Path, su_plan: Plan) -> None:
    (tmp_path / "switch.json").write_text(json.dumps({"switch": "leaf-a17", "findings": [
        {"check": "SW-LINK-01", "verdict": "fail", "subject": "swp1"}]}))
    refused(su_plan, ReportFiles(switch=tmp_path / "switch.json"), "switch.json", "leaf-a17")


def test_a_bench_run_of_other_nodes_is_refused(tmp_path: Path, su_plan: Plan) -> None:
    db = tmp_path / "bench.sqlite"
    run = start_run(db, plan_hash="0" * 16, tool="iperf3", pattern="pair", arguments="plane=compute")
    add_measurements(db, run, [Measurement(source="node01", destination="node02", plane="compute",
                                           metric="throughput", value=90.0, unit="Gb/s", expected=99.0, status="ok")])
    refused(su_plan, ReportFiles(bench_db=db), str(db), "run 1", "node01, node02")
    refused(su_plan, ReportFiles(bench_db=db, run=7), "no bench run 7")
    refused(su_plan, ReportFiles(bench_db=tmp_path / "none.sqlite"), "no such bench database")
    refused(su_plan, ReportFiles(run=1), "--run", "--bench-db")


@pytest.mark.parametrize(("text", "needle"), [
    ("not json", "not JSON"), ("[1, 2]", "not a gpunet result"),
    ('{"node": "gpu001", "failed": false, "findings": [{"check": 1}]}', "not a `gpunet doctor --json` output"),
])
def test_a_file_that_is_no_result_is_refused_with_its_name(tmp_path: Path, su_plan: Plan, text: str,
                                                            needle: str) -> None:
    (tmp_path / "doctor.json").write_text(text)
    refused(su_plan, ReportFiles(doctor=(tmp_path / "doctor.json",)), "doctor.json", needle)


def test_reads_are_bounded_and_only_of_regular_files(tmp_path: Path) -> None:
    (tmp_path / "big.json").write_text("x" * 2048)
    with pytest.raises(UsageError, match="over"):
        read_bounded(tmp_path / "big.json", limit=1024)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UsageError, match="not a regular file"):
        read_bounded(tmp_path / "fifo")
    with pytest.raises(UsageError, match="No such file"):
        read_bounded(tmp_path / "absent.json")


def test_a_family_not_given_is_said_to_be_missing(su_plan: Plan) -> None:
    report = render_report(su_plan, {"cabling": _cabling(su_plan)}, generated=GENERATED)
    assert report.data["verdicts"]["cabling"]["verdict"] == "fail"  # type: ignore[index]
    for key, family in FAMILIES.items():
        if key == "cabling":
            continue
        assert report.data["verdicts"][key] == {"verdict": "not given",  # type: ignore[index]
                                                "summary": f"not given: {family.what}"}
        section = report.html.split(f'<section id="sec-{key}"', 1)[1].split("</section>", 1)[0]
        assert "Not given." in section and f"without {family.what}" in section
    assert report.html.count('<span class="pill v-not-given">') == len(FAMILIES) - 1


def test_with_nothing_given_no_cable_reads_as_ok(su_plan: Plan) -> None:
    report = render_report(su_plan, {}, generated=GENERATED)
    assert report.data["cable_states"] == {} and report.issues == ()
    assert 'data-state="ok"' not in report.html and report.html.count('data-state="unchecked"') == len(su_plan.links)


def _cabling(plan: Plan) -> object:
    from gpunet.fabric.cabling import CablingReport  # noqa: PLC0415

    return CablingReport.model_validate_json(cabling_json(plan))
