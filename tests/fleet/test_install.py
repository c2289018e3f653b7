"""`fleet install` and the launcher every fleet command runs gpunet through: the version check,
the command lines (operands, never shell words), the wheelhouse's missing wheels named."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gpunet import __version__
from gpunet.fleet import FleetResult, NodeOutcome
from gpunet.fleet.doctor import fold_doctor
from gpunet.fleet.install import INSTALL, install_argv, pip_argv
from gpunet.fleet.node_gpunet import BOOT, LAUNCH, install_command, launch_argv, node_gpunet
from gpunet.fleet.wheels import MissingWheels, canonical, collect, dependency_closure, wheels_in

HOSTILE = "/opt/x'; touch /tmp/pwned-$(id -u) #"


def _launch(prefix: str, *args: str, wanted: str = __version__) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*launch_argv(prefix, sys.executable, wanted), *args], capture_output=True, text=True,
                          timeout=60, check=False)


def test_the_launcher_runs_the_nodes_python_when_no_venv_is_there_and_says_which(tmp_path: Path) -> None:
    done = _launch(str(tmp_path / "none"), "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == __version__
    found = node_gpunet(NodeOutcome(node="n", rc=0, stderr=done.stderr))
    assert found is not None and found.matches and found.python == sys.executable


def test_another_version_stops_before_gpunet_runs_and_is_said(tmp_path: Path) -> None:
    done = _launch(str(tmp_path), "doctor", "--json", wanted="9.9.9")
    assert done.returncode == 3 and done.stdout == ""
    found = node_gpunet(NodeOutcome(node="n", rc=3, stderr=done.stderr))
    assert found is not None and (found.found, found.wanted) == (__version__, "9.9.9") and not found.matches
    assert f"gpunet {__version__} on the node ({sys.executable}), 9.9.9 here" == found.problem()


def test_the_launcher_prefers_the_venv(tmp_path: Path) -> None:
    """A venv under PREFIX is run isolated (-I) with the same arguments; here a stand-in python
    that prints what it was given."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text('#!/bin/sh\nprintf "%s\\0" "$0" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    done = _launch(str(tmp_path), "doctor")
    assert done.stdout.split("\0")[:-1] == [str(bin_dir / "python"), "-I", "-c", BOOT, __version__, "doctor"]


def test_hostile_paths_stay_operands() -> None:
    argv = launch_argv(HOSTILE, "python3", "0.1.0")
    assert argv[:4] == ["sh", "-c", LAUNCH, "gpunet-launch"] and argv[4] == HOSTILE
    assert HOSTILE not in LAUNCH and HOSTILE not in BOOT
    installing = install_argv("python3", HOSTILE, "0.1.0")
    assert installing[:6] == ["sh", "-c", INSTALL, "gpunet-install", "python3", HOSTILE]
    assert installing[6:] == pip_argv(f"{HOSTILE}/wheels", "0.1.0")


def test_pip_on_the_node_never_asks_an_index() -> None:
    argv = pip_argv("/opt/gpunet/wheels", "0.1.0")
    assert argv[:4] == ["install", "--no-index", "--find-links", "/opt/gpunet/wheels"]
    assert {"--only-binary", ":all:", "--isolated"} <= set(argv) and argv[-1] == "gpunet==0.1.0"
    assert "PIP_CONFIG_FILE=/dev/null" in INSTALL  # the node's pip.conf cannot add an index either


def test_the_fix_command_is_quoted_for_pasting() -> None:
    fix = install_command("gpu[1-2];reboot", ["--plan", "my plan.json", "--user", "root"])
    assert shlex.split(fix) == ["gpunet", "fleet", "install", "gpu[1-2];reboot", "--plan", "my plan.json",
                                "--user", "root"]
    assert install_command("gpu1", ["--lab", "a"], "/srv/gpunet").endswith("--prefix /srv/gpunet")


def _doctor_outcome(node: str, found: str, python: str) -> NodeOutcome:
    mark = f'gpunet-version {{"found": "{found}", "wanted": "0.1.0", "python": "{python}"}}'
    if found != "0.1.0":
        return NodeOutcome(node=node, rc=3, stderr=mark + "\ngpunet: other")
    return NodeOutcome(node=node, rc=0, stdout='{"node": "x", "failed": false, "findings": []}', stderr=mark)


def test_a_missing_or_other_gpunet_is_named_per_node_with_its_fix() -> None:
    venv = "/run/gpunet/labs/a/root/{}/opt/gpunet/venv/bin/python"
    outcomes = {"gpu1": _doctor_outcome("gpu1", "0.1.0", venv.format("gpu1")),
                "gpu2": _doctor_outcome("gpu2", "0.1.0", venv.format("gpu2")),
                "gpu3": _doctor_outcome("gpu3", "0.0.9", venv.format("gpu3")),
                "gpu4": _doctor_outcome("gpu4", "", "/usr/bin/python3"),
                "gpu5": _doctor_outcome("gpu5", "", "/usr/bin/python3")}
    report = fold_doctor(FleetResult(command="gpunet doctor", outcomes=outcomes),
                         fix=lambda nodes: install_command(nodes, ["--lab", "a"]))
    pattern = venv.format("<node>")
    assert report.gpunet == {"gpu[1-2]": f"0.1.0 ({pattern})"}
    assert report.unreachable == {
        "gpu3": f"gpunet 0.0.9 on the node ({venv.format('gpu3')}), 0.1.0 here: gpunet fleet install gpu3 --lab a",
        "gpu[4-5]": "no gpunet on the node (/usr/bin/python3), 0.1.0 here: gpunet fleet install 'gpu[4-5]' --lab a"}


def test_a_node_that_ran_no_launcher_is_not_taken_for_a_version_problem() -> None:
    forged = NodeOutcome(node="n", rc=3, stderr='gpunet-version {"found": 1}')
    assert node_gpunet(forged) is None and node_gpunet(NodeOutcome(node="n", rc=255, stderr="ssh: refused")) is None


def _fake_wheel(directory: Path, name: str, version: str = "1.0") -> Path:
    path = directory / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    path.write_bytes(b"PK")
    return path


def test_every_missing_wheel_is_named_with_the_command_that_fetches_it(tmp_path: Path) -> None:
    needed = dependency_closure()
    assert {"pydantic", "clustershell", "typer", "pydantic-core"} <= needed.keys()
    for name in sorted(needed)[1:]:
        _fake_wheel(tmp_path, name)
    _fake_wheel(tmp_path, "gpunet", __version__)
    first = sorted(needed)[0]
    with pytest.raises(MissingWheels) as missing:
        collect(tmp_path, tmp_path / "stage")
    assert f"lacks wheels for: {needed[first]}." in str(missing.value)
    assert f"pip wheel --wheel-dir {tmp_path} {shlex.quote(needed[first])}" in str(missing.value)
    assert not (tmp_path / "stage").exists()  # nothing gathered, nothing sent


def test_a_complete_wheelhouse_is_gathered_with_gpunets_own_wheel(tmp_path: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    for name in dependency_closure():
        _fake_wheel(house, name)
    own = _fake_wheel(house, "gpunet", __version__)
    _fake_wheel(house, "gpunet", "0.0.1")
    _fake_wheel(house, "unrelated")
    got = {p.name for p in collect(house, tmp_path / "stage")}
    assert own.name in got and "gpunet-0.0.1-py3-none-any.whl" not in got and "unrelated-1.0-py3-none-any.whl" \
        not in got
    assert len(got) == len(dependency_closure()) + 1 and {p.name for p in (tmp_path / "stage").iterdir()} == got


def test_wheel_names_are_compared_as_indexes_compare_them(tmp_path: Path) -> None:
    _fake_wheel(tmp_path, "Typing_Extensions", "4.12")
    (tmp_path / "notawheel.whl").write_bytes(b"")
    assert canonical("typing.extensions") == "typing-extensions"
    assert list(wheels_in(tmp_path)) == ["typing-extensions"] and wheels_in(tmp_path / "absent") == {}


def test_a_python_without_venv_is_said_with_the_fix(tmp_path: Path) -> None:
    python = tmp_path / "python3"
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    done = subprocess.run(install_argv(str(python), str(tmp_path / "prefix")), capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1 and "has no venv module or no ensurepip" in done.stderr
    assert "apt-get install python3-venv" in done.stderr and not (tmp_path / "prefix").exists()


def test_a_prefix_holding_something_else_is_never_cleared(tmp_path: Path) -> None:
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "precious").write_text("keep")
    done = subprocess.run(install_argv(sys.executable, str(tmp_path)), capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1 and "is not a venv: not replacing it" in done.stderr
    assert (tmp_path / "venv" / "precious").read_text() == "keep"
