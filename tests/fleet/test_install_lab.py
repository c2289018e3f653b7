"""`fleet install` on a lab's servers over real SSH, from wheels only: each server gets a venv in
its own tree (never this host's site-packages), pip never asks an index, `doctor NODES` then runs
that venv's gpunet, and a server holding another version is named with the command that fixes it.

The wheelhouse is what an admin would carry in: the wheels this machine's offline mirror holds
(/opt/pypi), and ClusterShell, which has no wheel there, packed from its installed files."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from importlib.metadata import distribution
from pathlib import Path

import pytest

from gpunet import __version__
from gpunet.fleet.wheels import source_tree
from gpunet.lab.access import apply_paths
from gpunet.lab.state import LabState
from tests.lab.helpers import built_lab
from tests.labs import lab_id
from tests.zygote import run_gpunet

LAB = lab_id("fi")
MIRRORS = [Path("/opt/pypi/files"), Path("/opt/pypi-more/files")]
pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with built_lab(LAB) as state:
        yield state


def _repack(name: str, out: Path) -> Path:
    """An installed pure-Python distribution as a wheel again (its files, its WHEEL tag, a new RECORD)."""
    dist = distribution(name)
    info = next(f for f in dist.files or [] if f.name == "WHEEL").parent
    tag = next(line.split(": ", 1)[1] for line in dist.read_text("WHEEL").splitlines() if line.startswith("Tag:"))
    wheel = out / f"{info.name.removesuffix('.dist-info')}-{tag}.whl"
    skip = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    records = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in dist.files or []:
            if file.parts[0] == ".." or "__pycache__" in file.parts or (file.parent == info and file.name in skip):
                continue
            data = Path(dist.locate_file(file)).read_bytes()
            archive.writestr(str(file), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{file},sha256={digest},{len(data)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*records, f"{info}/RECORD,,"]) + "\n")
    return wheel


def _direct() -> list[str]:
    """gpunet's own requirements (pip resolves the rest from the mirror's versions)."""
    return [r.partition(";")[0].strip() for r in distribution("gpunet").requires or [] if "extra" not in r]


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mirrors = [m for m in MIRRORS if m.is_dir()]
    if not mirrors or source_tree() is None:
        pytest.skip("needs this machine's offline wheel mirror (/opt/pypi/files) and gpunet's source tree")
    house = tmp_path_factory.mktemp("wheelhouse")
    _repack("ClusterShell", house)
    links = [arg for m in [house, *mirrors] for arg in ("--find-links", str(m))]
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-index", *links, "--only-binary", ":all:",
                           "--isolated", "--disable-pip-version-check", "-d", str(house), "setuptools>=68",
                           *_direct()], capture_output=True, text=True,
                          timeout=600, check=False, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return house


def gpunet(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return run_gpunet(list(args), timeout=timeout)


def test_install_from_wheels_then_the_doctor_runs_the_venv_and_names_another_version(lab: LabState,
                                                                                    wheelhouse: Path) -> None:
    del lab
    host_gpunet = distribution("gpunet").locate_file("")
    installed = gpunet("fleet", "install", "gpu[1-2]", "--lab", LAB, "--wheelhouse", str(wheelhouse), "--json")
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-2000:]
    result = json.loads(installed.stdout)
    trees = apply_paths(LAB)[0]
    venv = {n: f"{trees}/{n}/opt/gpunet/venv/bin/python" for n in ("gpu1", "gpu2")}
    for node, outcome in result["outcomes"].items():
        assert outcome["ok"] and outcome["python"] == venv[node]
        assert outcome["pip"][:4] == ["install", "--no-index", "--find-links", f"{trees}/{node}/opt/gpunet/wheels"]
        assert "Looking in links:" in outcome["log"] and "Looking in indexes" not in outcome["log"]
        assert "Successfully installed" in outcome["log"] and f"gpunet-{__version__}" in outcome["log"]
    assert distribution("gpunet").locate_file("") == host_gpunet  # this host's Python untouched

    doctor = gpunet("doctor", "gpu[1-2]", "--lab", LAB, "--interval", "0.5", "--json", timeout=300)
    report = json.loads(doctor.stdout)
    assert doctor.returncode in (0, 1) and report["unreachable"] == {}, doctor.stdout[-2000:] + doctor.stderr
    assert report["gpunet"] == {"gpu[1-2]": f"{__version__} ({trees}/<node>/opt/gpunet/venv/bin/python)"}

    site = Path(f"{trees}/gpu2/opt/gpunet/venv/lib")
    metadata = next(site.glob("python3*/site-packages/gpunet-*.dist-info/METADATA"))
    metadata.write_text(metadata.read_text().replace(f"\nVersion: {__version__}\n", "\nVersion: 0.0.1\n", 1))
    doctor = gpunet("doctor", "gpu[1-2]", "--lab", LAB, "--interval", "0.5", "--json", timeout=300)
    report = json.loads(doctor.stdout)
    failing = [f["check"] for f in report["findings"] if f["verdict"] == "fail"]
    # gpu2 not judged: 3, unless gpu1's own findings fail (1 comes first, as the README's table says)
    assert doctor.returncode == (1 if failing else 3), (failing, doctor.stdout[-2000:] + doctor.stderr)
    assert report["unreachable"] == {"gpu2": f"gpunet 0.0.1 on the node ({venv['gpu2']}), {__version__} here: "
                                             f"gpunet fleet install gpu2 --lab {LAB}"}
    assert report["gpunet"] == {"gpu1": f"{__version__} ({venv['gpu1']})"}
