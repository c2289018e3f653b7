"""The wheels `fleet install` sends: this gpunet's own and its dependencies', with no index.

Nothing here reaches a package index. gpunet's wheel is taken from the wheelhouse when it holds
this version, else built from the source tree this gpunet runs from (`pip wheel --no-index`, its
build requirements from the wheelhouse too); every other wheel comes from the wheelhouse, a
directory the admin fills on a machine that has the internet. Which dependencies are needed is what
this environment installed for gpunet (its metadata, followed recursively, extras left out): a
missing one is named with the command that fetches it, before anything is sent.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import gpunet
from gpunet import __version__
from gpunet.errors import FleetError

WHEELHOUSE = Path("~/.cache/gpunet/wheelhouse")
PIP_QUIET = ["--isolated", "--no-cache-dir", "--disable-pip-version-check"]
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl (PEP 427)
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


class MissingWheels(FleetError):
    """The wheelhouse lacks wheels the nodes need (exit 3: nothing was sent)."""


def canonical(name: str) -> str:
    """A distribution name as indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheels_in(wheelhouse: Path) -> dict[str, list[Path]]:
    """The wheels of a directory by canonical distribution name."""
    found: dict[str, list[Path]] = {}
    for path in sorted(wheelhouse.glob("*.whl")) if wheelhouse.is_dir() else []:
        matched = _WHEEL.match(path.name)
        if matched and path.is_file():
            found.setdefault(canonical(matched["name"]), []).append(path)
    return found


def requirements(name: str) -> Iterator[tuple[str, str]]:
    """(canonical name, requirement as written) of what `name` needs here: its extras left out,
    and a requirement under a marker kept only where the marker holds for this Python."""
    for requirement in distribution(name).requires or []:
        spec, _, marker = requirement.partition(";")
        matched = _NAME.match(spec.strip())
        if matched is None or "extra" in marker:
            continue
        if marker.strip() and not _holds(marker, matched[0]):
            continue
        yield canonical(matched[0]), spec.strip()


def _holds(marker: str, name: str) -> bool:
    """An environment marker evaluated for this Python by `packaging` (pip's own, present wherever
    pip is), else judged by whether this environment installed the requirement."""
    try:
        from packaging.markers import InvalidMarker, Marker  # noqa: PLC0415  (pip's, not a gpunet dependency)
    except ImportError:
        return _installed(name)
    try:
        return bool(Marker(marker.strip()).evaluate())
    except InvalidMarker:
        return _installed(name)


def _installed(name: str) -> bool:
    try:
        distribution(name)
    except PackageNotFoundError:
        return False
    return True


def dependency_closure() -> dict[str, str]:
    """Every distribution this gpunet runs on, by canonical name, with the requirement that first
    named it (for the fetch command)."""
    needed: dict[str, str] = {}
    queue = ["gpunet"]
    while queue:
        for name, spec in requirements(queue.pop()):
            if name not in needed:
                needed[name] = spec
                queue.append(name)
    return needed


def source_tree() -> Path | None:
    """The source tree this gpunet runs from (src/gpunet under a pyproject.toml naming gpunet), or
    None when it was installed from a wheel."""
    root = Path(gpunet.__file__).resolve().parent.parent.parent
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return root if project.get("project", {}).get("name") == "gpunet" else None


def build_requirements(tree: Path) -> dict[str, str]:
    project = tomllib.loads((tree / "pyproject.toml").read_text())
    specs = project.get("build-system", {}).get("requires", [])
    return {canonical(m[0]): s for s in specs if (m := _NAME.match(s.strip()))}


def fetch_command(wheelhouse: Path, specs: list[str]) -> str:
    """What to run on a machine with the internet (and the nodes' Python and platform): `pip wheel`
    saves the wheels an index has and builds those it has only as source (ClusterShell)."""
    return shlex.join(["pip", "wheel", "--wheel-dir", str(wheelhouse), *specs])


def collect(wheelhouse: Path, stage: Path, wanted: str = __version__) -> list[Path]:
    """Every wheel the nodes need, copied into `stage`: gpunet's (`wanted`) and each dependency's
    (every version the wheelhouse holds: the node's pip picks the one for its Python). Refused
    with the missing names and the command that fetches them."""
    have = wheels_in(wheelhouse)
    own = [p for p in have.get("gpunet", []) if _version_of(p) == wanted]
    tree = None if own else source_tree()
    needed = dependency_closure() | (build_requirements(tree) if tree else {})
    missing = sorted(spec for name, spec in needed.items() if name not in have)
    if not own and tree is None:
        missing.insert(0, f"gpunet=={wanted}")
    if missing:
        raise MissingWheels(f"the wheelhouse {wheelhouse} lacks wheels for: {', '.join(missing)}. On a machine "
                            f"with the internet: {fetch_command(wheelhouse, missing)} (then copy them here)")
    stage.mkdir(parents=True, exist_ok=True)
    built = own[:1] if own else [build_own(tree or Path(), wheelhouse, stage.parent / "build", wanted)]
    chosen = built + [p for name in sorted(needed) for p in have[name]]
    for path in chosen:
        shutil.copy2(path, stage / path.name)
    return [stage / p.name for p in chosen]


def _version_of(wheel: Path) -> str:
    matched = _WHEEL.match(wheel.name)
    return matched["version"] if matched else ""


def build_own(tree: Path, wheelhouse: Path, work: Path, wanted: str) -> Path:
    """gpunet's wheel from its source tree, offline: a copy of the tree (the build writes beside
    what it builds), built in isolation with its build requirements from the wheelhouse."""
    copy = work / "gpunet"
    shutil.copytree(tree / "src" / "gpunet", copy / "src" / "gpunet", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(tree / name, copy / name)
    out = work / "wheel"
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--find-links", str(wheelhouse),
            *PIP_QUIET, "--wheel-dir", str(out), str(copy)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600,
                          env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    wheels = sorted(out.glob("gpunet-*.whl"))
    if done.returncode != 0 or not wheels:
        raise FleetError(f"building gpunet's wheel from {tree} failed: {(done.stderr or done.stdout).strip()[-400:]}")
    if _version_of(wheels[0]) != wanted:
        raise FleetError(f"the source tree {tree} builds gpunet {_version_of(wheels[0])}, but this gpunet is "
                         f"{wanted}: reinstall it from that tree")
    return wheels[0]
