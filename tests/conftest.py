"""Test tiers (DESIGN.md #12): `lab` tests need root and network namespaces; elsewhere they skip
with the reason instead of passing silently."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator

import pytest
from hypothesis import settings

# pytest-xdist workers inherit COLUMNS=80 from pytest's own terminal; Rich fixes a console's width
# from COLUMNS when the console is made (at import), so the CLI tests that set COLUMNS per
# invocation would all see 80. A real gpunet process reads it once at start, as it should.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

from gpunet.design import design
from gpunet.model.plan import Plan
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from tests.lab.helpers import small_plan
from tests.labs import Shape, SharedLabs

# No per-example deadline anywhere: on a loaded CI host an example's wall time says more about the
# host than the code (a 90 ms example took over Hypothesis's default 200 ms). Example counts stay
# each test's own.
settings.register_profile("gpunet", deadline=None)
settings.load_profile("gpunet")


def lab_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root for network namespaces (CI runs these as root)"
    for tool in ("ip", "tc", "nft", "iperf3", "ping", "nsenter", "unshare"):
        if shutil.which(tool) is None:
            return f"needs {tool} (.ci/run installs it)"
    if not os.path.exists("/usr/sbin/sshd"):
        return "needs /usr/sbin/sshd (openssh-server)"
    name = f"gnprobe{os.getpid()}"  # unique: concurrent runs must not collide
    probe = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"cannot create a network namespace here: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], check=False)
    return None


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: five workers where the lab tests run (they mostly wait on labs, iperf3 windows
    and deadlines: two cores were half idle at four), four for the CPU-bound tests without root."""
    labs_run = os.geteuid() == 0 and "not lab" not in (config.option.markexpr or "")
    return 5 if labs_run else 4


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    _group_by_module(items)
    _longest_first(items)
    lab_items = [i for i in items if i.get_closest_marker("lab")]
    if not lab_items:
        return
    reason = lab_unavailable()
    if reason:
        for item in lab_items:
            item.add_marker(pytest.mark.skip(reason=f"lab test: {reason}"))


def _longest_first(items: list[pytest.Item]) -> None:
    """Modules marked `slow` first, then the other lab modules, then the rest, each in collection
    order: the scheduler hands modules out in this order, so the long ones start at once and the
    short ones fill the workers' ends (in collection order one 3-minute module started last was the
    whole run's tail)."""
    def tier(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("lab") else 2
    items.sort(key=tier)  # stable: a module's tests keep their order


def _group_by_module(items: list[pytest.Item]) -> None:
    """`--dist loadgroup`: a module's tests run on one worker, in order, as `loadscope` ran them
    (module fixtures, labs and per-process caches are made once), except in a module marked
    `spread`, whose tests share nothing costly and go one by one to whichever worker is free, so
    that one long module is not the whole run's tail."""
    for item in items:
        if item.get_closest_marker("spread") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def _example(name: str) -> Callable[[], Plan]:
    def plan() -> Plan:
        return design(parse_spec(example_text(name))[0])
    return plan


def _small() -> Plan:
    return small_plan()


# The shapes several test modules share (tests/labs.py): one lab each per pytest process.
SHAPES = {
    "small": Shape(_small),  # 8 servers, 2 leaves, 2 spines (tests/fixtures/lab/small.yaml)
    "default8": Shape(_example("scalable-unit"), max_nodes=8),  # the README's flagship, 8 servers
    "ethernet8": Shape(_example("small-ethernet"), max_nodes=8),
}


@pytest.fixture(scope="session")
def shared_labs() -> Iterator[SharedLabs]:
    labs = SharedLabs(SHAPES)
    try:
        yield labs
    finally:
        labs.close()


@pytest.fixture(autouse=True)
def _heal_shared_labs(request: pytest.FixtureRequest) -> Iterator[None]:
    """Faults a test left on a shared lab are undone before the next test."""
    yield
    if "shared_labs" in request.fixturenames:
        request.getfixturevalue("shared_labs").heal_all()
