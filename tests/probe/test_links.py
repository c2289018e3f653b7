"""LinkReader (sysfs files held open between reads) reads what a fresh read_interfaces reads: on a
recorded tree, within its file budget, and in a live namespace while links change, are renamed,
deleted and created again under an old name (lab marker)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpunet.probe.links import LinkReader
from gpunet.probe.sysfs import read_interfaces

FIXTURES = Path(__file__).parent.parent / "fixtures"


def recorded_tree(tmp_path: Path) -> Path:
    """The recorded veth pair, plus three copies of it under other names."""
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "sysfs/veth-pair/sys", root / "sys")
    for name in ("gnrc", "gnrd", "gnre"):
        shutil.copytree(root / "sys/class/net/gnra", root / f"sys/class/net/{name}")
    return root


def test_held_files_read_what_a_fresh_read_does_and_see_changes(tmp_path: Path) -> None:
    root = recorded_tree(tmp_path)
    reader = LinkReader(root)
    assert reader.read() == read_interfaces(root, full=False)
    assert reader.open_files == 5 * 4
    (root / "sys/class/net/gnrc/mtu").write_text("4200\n")  # the same file rewritten, as sysfs renders anew
    (root / "sys/class/net/gnrd/operstate").write_text("down\n")
    again = {i.name: i for i in reader.read({"gnrc": {"rx_bytes": 7}})}
    assert (again["gnrc"].mtu, again["gnrd"].operstate, again["gnrc"].statistics) == (4200, "down", {"rx_bytes": 7})
    assert list(again.values()) == read_interfaces(root, full=False, statistics={"gnrc": {"rx_bytes": 7}})


def test_an_interface_gone_from_the_listing_is_forgotten_and_its_files_closed(tmp_path: Path) -> None:
    root = recorded_tree(tmp_path)
    reader = LinkReader(root)
    reader.read()
    shutil.rmtree(root / "sys/class/net/gnre")
    assert [i.name for i in reader.read()] == ["gnra", "gnrb", "gnrc", "gnrd"]
    assert reader.open_files == 4 * 4
    reader.close()
    assert reader.open_files == 0 and reader.read() == read_interfaces(root, full=False)


def test_beyond_its_file_budget_it_reads_the_fresh_way(tmp_path: Path) -> None:
    root = recorded_tree(tmp_path)
    reader = LinkReader(root, max_open=9)  # room for two interfaces' four files
    assert reader.read() == read_interfaces(root, full=False)
    assert reader.open_files == 8
    assert LinkReader(root, max_open=0).read() == read_interfaces(root, full=False)


# The kernel settles a link's operstate after the command returns (linkwatch, up to a second, more
# on a loaded host), so the held and the fresh read are compared once two reads agree and the
# fresh one shows what the step is waiting for (an operstate), at most 30 s after.
LIVE_SCRIPT = """
import json, subprocess, time
from gpunet.probe.links import LinkReader
from gpunet.probe.sysfs import read_interfaces
reader, steps = LinkReader(), []
def shows(interfaces, expect):
    return expect is None or any(i.name == expect[0] and i.operstate == expect[1] for i in interfaces)
def step(expect, *commands):
    for command in commands:
        subprocess.run(["ip", *command.split()], check=True)
    deadline = time.monotonic() + 30
    held, fresh = reader.read(), read_interfaces(full=False)
    while not (held == fresh and shows(fresh, expect)) and time.monotonic() < deadline:
        time.sleep(0.05)
        held, fresh = reader.read(), read_interfaces(full=False)
    steps.append({"same": held == fresh, "open": reader.open_files,
                  "links": {i.name: [i.mtu, i.operstate, i.carrier] for i in held}})
step(None, "link add gnla mtu 1500 type veth peer name gnlb", "link set gnla up", "link set gnlb up")
step(None, "link set gnla mtu 4000")
step(("gnla", "lowerlayerdown"), "link set gnlb down")
step(None, "link set gnla down", "link set gnla name gnlc", "link add gnla mtu 1400 type veth peer name gnld")
step(None, "link del gnlc")
print(json.dumps(steps))
"""


@pytest.mark.lab
def test_live_links_changed_renamed_and_made_again_under_an_old_name() -> None:
    name = "gnlinkreader"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        done = subprocess.run(["ip", "netns", "exec", name, sys.executable, "-c", LIVE_SCRIPT], capture_output=True,
                              text=True, check=True)
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)
    steps = json.loads(done.stdout)
    assert all(step["same"] for step in steps), steps
    links = [step["links"] for step in steps]
    assert links[1]["gnla"][0] == 4000
    assert links[2]["gnla"][1:] == ["lowerlayerdown", False]  # its peer went down
    assert links[3]["gnla"][0] == 1400 and links[3]["gnlc"][0] == 4000  # the new gnla, the renamed old one
    assert set(links[4]) == {"lo", "gnla", "gnld"}  # gnlc went with its peer gnlb
    assert steps[4]["open"] == steps[3]["open"] - 2 * 4
