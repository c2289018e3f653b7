"""`gpunet cabling check` through the real Typer app, from folders of lldpcli JSON written as
lldpd 1.0 writes it (one file per device) and from a saved ibnetdiscover file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpunet.cli.main import app
from gpunet.fabric import collect
from gpunet.model.io import read_plan
from gpunet.model.plan import Plan
from gpunet.spec.examples import example_text

runner = CliRunner()
FIXTURES = Path(__file__).parent.parent / "fixtures" / "ibnetdiscover"


def lldpcli_json(neighbours: list[tuple[str, str, str]]) -> str:
    """What `lldpcli -f json show neighbors` prints: (local port, system name, port id) each;
    one interface is an object, several a list of one-key objects (lldpd 1.0)."""
    entries = [{local: {"via": "LLDP", "chassis": {system: {"id": {"type": "mac", "value": "02:00:00:00:00:01"}}},
                        "port": {"id": {"type": "ifname", "value": port}, "descr": port}}}
               for local, system, port in neighbours]
    interface: object = entries[0] if len(entries) == 1 else entries
    return json.dumps({"lldp": {"interface": interface}}, indent=2)


def write_tables(plan: Plan, folder: Path, planes: set[str], swap: tuple[int, int] | None = None) -> list[str]:
    """Every device's neighbour file from the plan's cables (switch ports as swpN); `swap` swaps
    the far ends of two server cables (by index); returns the cables swapped."""
    links = [link for link in plan.links if link.plane in planes]
    far = {(link.a.device, link.a.port): (link.b.device, link.b.port) for link in links}
    far |= {b: a for a, b in far.items()}
    swapped = []
    if swap is not None:
        first, second = (links[i] for i in swap)
        a, b, y, x = ((first.a.device, first.a.port), (first.b.device, first.b.port),
                      (second.a.device, second.a.port), (second.b.device, second.b.port))
        far[a], far[x], far[y], far[b] = x, a, b, y
        swapped = [f"{a[0]}:{a[1]} {b[0]}:{b[1]}", f"{y[0]}:{y[1]} {x[0]}:{x[1]}"]
    switches = {s.name for s in plan.switches}
    folder.mkdir(exist_ok=True)
    by_device: dict[str, list[tuple[str, str, str]]] = {}
    for (device, port), (other, other_port) in sorted(far.items()):
        local = f"swp{port}" if device in switches else port
        by_device.setdefault(device, []).append((local, other, f"swp{other_port}" if other in switches else other_port))
    for device, neighbours in by_device.items():
        (folder / f"{device}.json").write_text(lldpcli_json(neighbours))
    return swapped


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Plan]:
    spec = tmp_path_factory.mktemp("spec") / "cluster.yaml"
    spec.write_text(example_text("small-ethernet"))
    out = tmp_path_factory.mktemp("plan")
    result = runner.invoke(app, ["plan", str(spec), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out / "plan.json", read_plan(out / "plan.json")


def test_a_folder_matching_the_plan_passes(planned: tuple[Path, Plan], tmp_path: Path) -> None:
    plan_file, plan = planned
    write_tables(plan, tmp_path / "lldp", {"compute", "storage", "management"})
    result = runner.invoke(app, ["cabling", "check", "--plan", str(plan_file), "--lldp-dir", str(tmp_path / "lldp"),
                                 "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["findings"] == [] and report["source"] == "LLDP"
    assert {c["verdict"] for c in report["cables"]} == {"ok"}


def test_a_swap_exits_1_and_says_which_cables(planned: tuple[Path, Plan], tmp_path: Path) -> None:
    plan_file, plan = planned
    swapped = write_tables(plan, tmp_path / "lldp", {"compute"}, swap=(0, 5))
    result = runner.invoke(app, ["cabling", "check", "--plan", str(plan_file), "--lldp-dir", str(tmp_path / "lldp"),
                                 "--plane", "compute", "--json"])
    assert result.exit_code == 1, result.output
    findings = json.loads(result.stdout)["findings"]
    assert [(f["kind"], sorted(f["cables"])) for f in findings] == [("swapped", sorted(swapped))]
    table = runner.invoke(app, ["cabling", "check", "--plan", str(plan_file), "--lldp-dir", str(tmp_path / "lldp"),
                                "--plane", "compute"])
    assert table.exit_code == 1 and "swap the cables in" in table.stdout


def test_only_devices_read_are_judged(planned: tuple[Path, Plan], tmp_path: Path) -> None:
    """A site that saved LLDP from some nodes only: the other cables are unchecked, not missing."""
    plan_file, plan = planned
    write_tables(plan, tmp_path / "lldp", {"compute"})
    kept = {"node01.json", "comp-leaf001.json"}
    for path in (tmp_path / "lldp").iterdir():
        if path.name not in kept:
            path.unlink()
    result = runner.invoke(app, ["cabling", "check", "--plan", str(plan_file), "--lldp-dir", str(tmp_path / "lldp"),
                                 "--plane", "compute", "--json"])
    assert result.exit_code == 0, result.output
    verdicts = {c["verdict"] for c in json.loads(result.stdout)["cables"]}
    assert verdicts == {"ok", "unchecked"}


def test_an_unparseable_neighbour_file_names_the_file_and_line(planned: tuple[Path, Plan], tmp_path: Path) -> None:
    plan_file, plan = planned
    write_tables(plan, tmp_path / "lldp", {"compute"})
    bad = tmp_path / "lldp" / "node02.json"
    bad.write_text('{\n  "lldp": {\n    "interface": [\n      {"ens1f0": {"via": "LLDP",,}}\n')
    result = runner.invoke(app, ["cabling", "check", "--plan", str(plan_file), "--lldp-dir", str(tmp_path / "lldp")])
    assert result.exit_code == 2
    assert f"{bad}: line 4:" in result.output


@pytest.mark.parametrize("apart_from", [collect.BACKGROUND_FROM_BYTES, 0], ids=["read-here", "read-apart"])
def test_a_saved_ibnetdiscover_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, apart_from: int) -> None:
    """Read here, or in a process of its own while the plan is read (as a large file is): the same findings."""
    monkeypatch.setattr(collect, "BACKGROUND_FROM_BYTES", apart_from)
    spec = FIXTURES / "ibsim-0.10-tiny-hdr-healthy" / "spec.yaml"
    result = runner.invoke(app, ["cabling", "check", "--plan", str(spec), "--ibnetdiscover",
                                 str(FIXTURES / "ibsim-0.10-tiny-hdr-faults" / "output.txt"), "--json"])
    assert result.exit_code == 1, result.output
    kinds = sorted(f["kind"] for f in json.loads(result.stdout)["findings"])
    assert kinds == ["missing", "speed", "swapped", "width"]


@pytest.mark.parametrize("arguments", [[], ["--lab", "a", "--ibsim", "a"]])
def test_exactly_one_source(arguments: list[str]) -> None:
    result = runner.invoke(app, ["cabling", "check", *arguments])
    assert result.exit_code == 2
    assert "give exactly one source" in result.output


def test_a_plan_is_needed_for_files(tmp_path: Path) -> None:
    (tmp_path / "lldp").mkdir()
    (tmp_path / "lldp" / "node01.json").write_text('{"lldp": {}}')
    result = runner.invoke(app, ["cabling", "check", "--lldp-dir", str(tmp_path / "lldp")])
    assert result.exit_code == 2 and "--plan" in result.output
