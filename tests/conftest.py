"""Test tiers (DESIGN.md #12): `lab` tests need root and network namespaces; elsewhere they skip
with the reason instead of passing silently."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    lab_items = [i for i in items if i.get_closest_marker("lab")]
    if not lab_items:
        return
    reason = lab_unavailable()
    if reason:
        for item in lab_items:
            item.add_marker(pytest.mark.skip(reason=f"lab test: {reason}"))
