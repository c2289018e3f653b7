"""Property: a hostile string (line breaks, `$()`, backticks, ';', a leading '-', '%', unicode,
'../', quotes) put into any string field of a spec or of a plan.json is either refused where it
enters (a located SpecError / a PlanError naming the field: exit 2), or every string of the
resulting Plan is a plain token (no line break, quote, space, shell character or leading '-' can
reach a file or a command) and every rendered file reads back through its reader: the real one
where it runs here (netplan generate, ssh -G, bash, libnm), a parser of the format elsewhere."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpunet.design import design
from gpunet.errors import PlanError, SpecError
from gpunet.model.io import read_plan
from gpunet.model.plan import Plan
from gpunet.render import TARGETS, render_all
from gpunet.render.plan_files import render_plan_json
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from tests.render import validators as v

pytestmark = pytest.mark.spread  # independent tests: any free worker takes each (tests/conftest.py)

NASTY = ["\n", "\r\n", "$(touch F)", "`id`", ";reboot", "-oProxyCommand=x", "%n", "é", "../../etc", " ", "\"",
         "'", "\t", "{{ x }}", "\\", "#", "\u2028", "*", "&&", "|", "<", ">", "\x00", "a b", "--"]
# What a value reaching a file or a command may hold: one token, no quoting needed anywhere.
PLAIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.:/+-]*)?$")  # empty too (a flow of any port)
Path_ = tuple[str | int, ...]


def string_paths(data: Any, here: Path_ = ()) -> Iterator[Path_]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from string_paths(value, (*here, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from string_paths(value, (*here, i))
    elif isinstance(data, str):
        yield here


def replaced(data: Any, path: Path_, value: str) -> Any:
    copy = json.loads(json.dumps(data))
    target = copy
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return copy


def value_at(data: Any, path: Path_) -> str:
    for step in path:
        data = data[step]
    return str(data)


SPEC_TEXT = example_text("small-ethernet") + "\n"
SPEC = yaml.safe_load(SPEC_TEXT)
SPEC["site"]["ntp_servers"] = ["198.18.0.123", "ntp1.small.example"]
SPEC["groups"][0]["nics"]["compute"]["hcas"] = ["mlx5_0"]  # the HCA names reach nccl.env
SPEC["planes"]["compute"]["technology"] = "roce"
SPEC["flows"] = [{"service": "jupyter", "protocol": "tcp", "ports": "8888-8890", "from": "@role:login",
                  "to": "@role:gpu", "plane": "management", "why": "notebooks on the GPU nodes"}]  # declared flows too
SPEC_PATHS = sorted(set(string_paths(SPEC)), key=str)
BASE_PLAN = design(parse_spec(yaml.safe_dump(SPEC))[0])
PLAN_DATA = json.loads(render_plan_json(BASE_PLAN))
# One path per field shape (the interface fields of node01 stand for every node's), so every field is drawn.
PLAN_PATHS = sorted({p for p in string_paths(PLAN_DATA) if not any(isinstance(s, int) and s > 1 for s in p)},
                    key=str)
NODES = ("node01", "stor01", "login01")


def hostile(benign: str) -> st.SearchStrategy[str]:
    """A nasty fragment alone, around or inside the field's value; random text of nasty characters;
    and, as often as each of those, a plain variant of the value, which must render as well."""
    nasty = st.sampled_from(NASTY)
    plain = st.builds(lambda s: benign + s, st.sampled_from(["x", "0", "-b", "9", "q1"]))
    return st.one_of(nasty, st.builds(lambda n: benign + n, nasty), st.builds(lambda n: n + benign, nasty),
                     st.builds(lambda a, n: benign[:a] + n + benign[a:], st.integers(0, max(0, len(benign))), nasty),
                     st.text(alphabet=st.sampled_from("".join(NASTY) + "ab-._"), min_size=1, max_size=12), plain)


@st.composite
def spec_mutation(draw: st.DrawFn) -> tuple[Path_, str]:
    path = draw(st.sampled_from(SPEC_PATHS))
    return path, draw(hostile(value_at(SPEC, path)))


@st.composite
def plan_mutation(draw: st.DrawFn) -> tuple[Path_, str]:
    path = draw(st.sampled_from(PLAN_PATHS))
    return path, draw(hostile(value_at(PLAN_DATA, path)))


def assert_plain(plan: Plan) -> None:
    data = plan.model_dump(mode="json")
    for path in string_paths(data):
        value = value_at(data, path)
        if path[-1] == "why":  # a firewall comment: words and punctuation, no quote or shell character
            assert re.fullmatch(r"[A-Za-z0-9 ,.:;()/_+=@'-]*", value), (path, value)
        elif path[-1] in ("from_nodes", "to_nodes"):  # a folded NodeSet of host names
            assert re.fullmatch(r"[A-Za-z0-9,\[\]-]*", value), (path, value)
        else:
            assert PLAIN.match(value), (path, value)


# (file name, digest of its text) already read back without fault: a reader's verdict on the same
# text is the same, and most files of an example are byte-identical to another example's (one
# field changes), so each distinct file goes through the real tools once per test process
READ_BACK: set[tuple[str, str]] = set()


def read_back(plan: Plan, tmp: Path) -> None:
    """Every rendered file of the sample nodes, and of one leaf of each routed plane (a leaf's files
    hold every kind of name a switch's do), through its reader."""
    nodes = [n for n in plan.nodes if n.name in NODES] or list(plan.nodes[:3])
    leaves = {next((s.name for s in plan.switches if s.plane == p.name and s.tier == "leaf"), "") for p in plan.planes}
    for name, text in render_all(plan, nodes, list(TARGETS)).items():
        if not name.startswith("switches/") or name.split("/")[1] in leaves:
            seen = (name, hashlib.sha256(text.encode()).hexdigest())
            if seen not in READ_BACK:
                _read_one(name, text, tmp)
                READ_BACK.add(seen)


def _read_one(name: str, text: str, tmp: Path) -> None:  # noqa: C901 - one reader per format
    if name.endswith("60-gpunet.yaml") and not v.need("netplan"):
        done = v.netplan_generate(tmp / "netplan", text)
        assert done.returncode == 0, done.stderr
    elif name.endswith("nccl.env"):
        (tmp / "nccl.env").write_text(text)
        done = v.run("env", "-i", "bash", "-c", f"set -eu; . {tmp / 'nccl.env'}; env")
        assert done.returncode == 0, done.stderr
        assert all(re.match(r"^(NCCL_\w+|PWD|SHLVL|_)=", line) for line in done.stdout.splitlines()), done.stdout
    elif name.endswith("ssh_config"):
        (tmp / "ssh_config").write_text(text)
        assert v.run("ssh", "-G", "-F", str(tmp / "ssh_config"), "node01").returncode == 0
    elif name.endswith(".nmconnection") and not v.nm_available():
        assert v.nm_check(tmp, {name: text}).returncode == 0
    elif name.endswith("hosts"):
        for line in text.splitlines()[1:]:
            address, *names = line.split()
            assert ip_address(address) and names and all(PLAIN.match(n) for n in names), line
    elif name.endswith(".xml"):
        ET.fromstring(text)
    elif name.endswith((".yml", ".yaml")):
        yaml.safe_load(text)
    elif name.endswith(".json"):
        json.loads(text)
    elif name.startswith("switches/"):
        _read_switch_file(name, text)
    elif name.endswith("topology.conf"):
        assert all(re.match(r"^(#.*|SwitchName=\S+ (Nodes|Switches)=\S+)$", line) for line in text.splitlines())


def _read_switch_file(name: str, text: str) -> None:
    if name.endswith("frr.conf") and not v.need("vtysh"):
        assert v.frr_check(text) == []
    elif name.endswith("nvue.sh"):
        assert v.run("sh", "-n", stdin=text).returncode == 0
        assert all(line.startswith(("#", "set -e", "nv set ", "nv config apply")) for line in text.splitlines())
    elif name.endswith("lldpd.d/gpunet.conf"):
        assert all(re.match(r"^(#.*|configure (system hostname|lldp portidsubtype|ports) \S+.*)$", line)
                   for line in text.splitlines())
    elif name.endswith(".json"):
        json.loads(text)


def _record(tmp: Path, plan: Plan) -> None:
    assert_plain(plan)
    read_back(plan, tmp)


SETTINGS = settings(max_examples=80, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@SETTINGS
@given(spec_mutation())
def test_a_hostile_spec_value_is_refused_located_or_harmless(tmp_path: Path, mutation: tuple[Path_, str]) -> None:
    path, value = mutation
    text = yaml.safe_dump(replaced(SPEC, path, value), allow_unicode=True)
    try:
        spec, source = parse_spec(text, "cluster.yaml")
        plan = design(spec)
    except SpecError as exc:  # DesignError included: both exit 2, located as the CLI does (api.design_spec)
        problems = [p if p.file else source.locate(p) for p in exc.problems]
        assert problems and all(p.file == "cluster.yaml" and p.line >= 1 for p in problems), exc
        event("refused")
        return
    event("accepted, read back")
    _record(tmp_path, plan)


@SETTINGS
@given(plan_mutation())
def test_a_hostile_plan_json_value_is_refused_or_harmless(tmp_path: Path, mutation: tuple[Path_, str]) -> None:
    path, value = mutation
    (tmp_path / "plan.json").write_text(json.dumps(replaced(PLAN_DATA, path, value)))
    try:
        plan = read_plan(tmp_path / "plan.json")
    except PlanError as exc:
        assert "not a valid plan" in str(exc) or "schema version" in str(exc), exc
        event("refused")
        return
    event("accepted, read back")
    _record(tmp_path, plan)


def test_every_field_is_drawn_from() -> None:
    """The strategies reach every string field: the spec's and each kind of the plan's."""
    assert len(SPEC_PATHS) >= 30 and len(PLAN_PATHS) >= 60
    assert ("site", "domain") in SPEC_PATHS and ("groups", 0, "nics", "compute", "hcas", 0) in SPEC_PATHS
    assert ("flows", 0, "from") in SPEC_PATHS and ("site", "scheduler", "controller") in SPEC_PATHS
    assert ("nodes", 0, "interfaces", 0, "hostname") in PLAN_PATHS and ("switches", 0, "name") in PLAN_PATHS


@pytest.mark.parametrize("field", [("site", "domain"), ("site", "bastion"), ("groups", 0, "nodes")])
def test_a_newline_is_refused_at_its_own_line(field: Path_) -> None:
    text = yaml.safe_dump(replaced(SPEC, field, value_at(SPEC, field) + "\nProxyCommand x"))
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "cluster.yaml")
    lines = text.splitlines()
    problem = caught.value.problems[0]
    assert problem.path == field and str(field[-1]) in lines[problem.line - 1], (problem, lines[problem.line - 1])


def test_a_line_break_in_a_name_never_reaches_a_subprocess(tmp_path: Path) -> None:
    """Sanity check of the reader used above: bash would run a second line of nccl.env."""
    (tmp_path / "nccl.env").write_text("export NCCL_IB_HCA==mlx5_0\ntouch " + str(tmp_path / "F") + "\n")
    subprocess.run(["env", "-i", "bash", "-c", f". {tmp_path / 'nccl.env'}"], check=False)
    assert (tmp_path / "F").exists()
