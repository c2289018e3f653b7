"""Record real FRR outputs for the switch-check fixtures (run by hand as root; not a test).

A two-leaf, two-spine routed plane is designed from a small spec (every address in the RFC 2544
lab range 198.18.0.0/15), each switch's frr.conf rendered by gpunet, and each switch run as
Debian's FRR (zebra, staticd, bgpd) in a network namespace of its own (`gnfr-<switch>`), the
frr.conf handed to them through `vtysh -f` (the recordings in tests/fixtures were made while each
daemon read the file itself, which left staticd without the leaves' host routes), its
cables veth pairs named as the render names ports (swpN). Once every session is Established and
routes are installed, it writes what the switch checks read, per switch: `show bgp summary json`,
`show ip route json`, `ip -j link show`, and `lldpcli -f json show neighbors` from lldpd reading
the lldpd.d drop-in gpunet renders for the switch. Everything it made is removed at the end (namespaces;
daemons killed by the PIDs in their own pid files).

    python -m tests.checks.frr_record OUTDIR
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpunet.design import design
from gpunet.model.plan import Plan
from gpunet.model.spec import Spec
from gpunet.render.switch.frr import render_frr, render_lldpd

SPEC = {
    "site": {"name": "rec"},
    "planes": {"compute": {
        "subnet": "198.19.0.0/24", "speed": "100G",
        "routing": {"loopbacks": "198.19.255.0/24", "p2p": "198.19.254.0/24"},
        "fabric": {"style": "spine-leaf", "switch": {"model": "rec-8x100G", "radix": 8, "port_speed": "100G"}}}},
    "groups": [{"name": "gpu", "nodes": "gpu[1-8]", "nics": {"compute": {"devices": ["eth1"]}}}],
}
DAEMONS = ("zebra", "staticd", "bgpd")
FRR = Path("/usr/lib/frr")
NETNS_ETC = Path("/etc/netns")  # `ip netns exec` mounts /etc/netns/<ns>/lldpd.d over /etc/lldpd.d
LLDP_SOCKET = "/etc/lldpd.d/gnfr.socket"
LLDPD_PIDS: list[int] = []


def plan() -> Plan:
    return design(Spec.model_validate(SPEC))


def sh(*argv: str, check: bool = True) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=60).stdout


def build(fabric: Plan, work: Path) -> dict[str, Path]:
    """A namespace per switch, veth cables between them, host ports, FRR started."""
    dirs = {}
    for s in fabric.switches:
        sh("ip", "netns", "add", f"gnfr-{s.name}")
        sh("ip", "-n", f"gnfr-{s.name}", "link", "set", "lo", "up")
    for i, c in enumerate(c for c in fabric.links if c.tier == "leaf_spine"):
        a, b = f"gnfra{i}", f"gnfrb{i}"
        sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        for end, name in ((c.a, a), (c.b, b)):
            sh("ip", "link", "set", name, "netns", f"gnfr-{end.device}")
            sh("ip", "-n", f"gnfr-{end.device}", "link", "set", name, "name", f"swp{end.port}", "mtu", "9216", "up")
    for c in (c for c in fabric.links if c.tier == "node_leaf"):  # host ports: a veth, its far end unused
        ns = f"gnfr-{c.b.device}"
        sh("ip", "-n", ns, "link", "add", f"swp{c.b.port}", "mtu", "9216", "type", "veth", "peer", "name",
           f"host{c.b.port}")
        sh("ip", "-n", ns, "link", "set", f"swp{c.b.port}", "up")
    for s in fabric.switches:
        d = work / s.name
        d.mkdir()
        (d / "frr.conf").write_text(render_frr(fabric, s))
        (d / "bare.conf").write_text("")
        shutil.chown(d, "frr", "frr")
        d.chmod(0o755)
        for daemon in DAEMONS:  # started bare; the integrated file goes through vtysh, as the lab does
            args = [str(FRR / daemon), "-d", "-f", str(d / "bare.conf"), "-i", str(d / f"{daemon}.pid"),
                    "--vty_socket", str(d), "-z", str(d / "zserv.api")]
            sh("ip", "netns", "exec", f"gnfr-{s.name}", *args)
            time.sleep(0.3)
        sh("vtysh", "--vty_socket", str(d), "-f", str(d / "frr.conf"))
        dirs[s.name] = d
        _start_lldpd(fabric, s.name)
    return dirs


def _start_lldpd(fabric: Plan, name: str) -> None:
    """lldpd in the namespace, reading the drop-in gpunet renders for the switch (a fast cadence
    added so the recording need not wait 30 s)."""
    conf = NETNS_ETC / f"gnfr-{name}" / "lldpd.d"
    conf.mkdir(parents=True)
    switch = next(s for s in fabric.switches if s.name == name)
    (conf / "gpunet.conf").write_text(render_lldpd(fabric, switch) + "configure lldp tx-interval 1\n")
    process = subprocess.Popen(["ip", "netns", "exec", f"gnfr-{name}", "lldpd", "-d", "-u", LLDP_SOCKET],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    LLDPD_PIDS.append(process.pid)


def lldpcli(name: str, *command: str) -> str:
    return sh("ip", "netns", "exec", f"gnfr-{name}", "lldpcli", "-u", LLDP_SOCKET, *command)


def vtysh(d: Path, command: str) -> str:
    return sh("vtysh", "--vty_socket", str(d), "-c", command)


def converged(fabric: Plan, dirs: dict[str, Path]) -> bool:
    for name, d in dirs.items():
        peers = json.loads(vtysh(d, "show bgp summary json")).get("ipv4Unicast", {}).get("peers", {})
        planned = sum(1 for c in fabric.links_at[name] if c.tier == "leaf_spine")
        if len(peers) != planned or any(p.get("state") != "Established" for p in peers.values()):
            return False
    return True


def teardown(fabric: Plan, dirs: dict[str, Path]) -> None:
    for pid in LLDPD_PIDS:
        subprocess.run(["kill", "-TERM", str(pid)], check=False)
    for d in dirs.values():
        for pid_file in d.glob("*.pid"):
            with contextlib.suppress(OSError):
                subprocess.run(["kill", "-TERM", pid_file.read_text().strip()], check=False)
    time.sleep(1)
    for s in fabric.switches:
        sh("ip", "netns", "del", f"gnfr-{s.name}", check=False)
        shutil.rmtree(NETNS_ETC / f"gnfr-{s.name}", ignore_errors=True)


def main(out: Path) -> int:
    fabric = plan()
    work = Path(tempfile.mkdtemp(prefix="gnfr-", dir="/tmp"))
    work.chmod(0o755)
    dirs: dict[str, Path] = {}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        dirs = build(fabric, work)
        deadline = time.monotonic() + 60
        while not converged(fabric, dirs) and time.monotonic() < deadline:
            time.sleep(1)
        for name in dirs:
            lldpcli(name, "update")
        time.sleep(4)  # routes from the last sessions to reach zebra; LLDP frames both ways
        for name, d in dirs.items():
            target = out / name
            target.mkdir(parents=True, exist_ok=True)
            (target / "show_bgp_summary_json.txt").write_text(vtysh(d, "show bgp summary json"))
            (target / "show_ip_route_json.txt").write_text(vtysh(d, "show ip route json"))
            (target / "ip_j_link.txt").write_text(sh("ip", "-n", f"gnfr-{name}", "-j", "link", "show"))
            (target / "lldpcli_json.txt").write_text(lldpcli(name, "-f", "json", "show", "neighbors"))
            (target / "frr.conf").write_text((d / "frr.conf").read_text())
        (out / "version.txt").write_text(vtysh(next(iter(dirs.values())), "show version"))
    finally:
        teardown(fabric, dirs)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
