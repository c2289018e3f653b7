"""Run the real tools that read each rendered file, in throwaway directories (and, where a tool
touches the network stack or /etc, in a namespace of its own)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

NM_CHECK = Path(__file__).parent / "nm_keyfile_check.py"
SYSTEM_PYTHON = "/usr/bin/python3"  # python3-gi and libnm's typelib live in Debian's Python


def run(*argv: str, stdin: str | None = None, cwd: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), input=stdin, capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120, check=False)


def need(tool: str) -> str | None:
    """None when `tool` is installed, else the reason to skip."""
    return None if shutil.which(tool) or Path(tool).exists() else f"{tool} is not installed (.ci/run installs it)"


@contextlib.contextmanager
def netns(name: str) -> Iterator[str]:
    """A fresh, empty network namespace (lo up), removed on exit."""
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def netplan_generate(root: Path, yaml_text: str) -> subprocess.CompletedProcess[str]:
    path = root / "etc/netplan/60-gpunet.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml_text)
    path.chmod(0o600)
    return run("netplan", "generate", "--root-dir", str(root))


def sshd_check(tmp: Path, dropin: str) -> subprocess.CompletedProcess[str]:
    """`sshd -t` on a main config that includes the drop-in, with a throwaway host key."""
    key = tmp / "host_ed25519"
    if not key.exists():
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
    (tmp / "50-gpunet.conf").write_text(dropin)
    main = tmp / "sshd_config"
    main.write_text(f"Include {tmp}/50-gpunet.conf\nHostKey {key}\nPidFile {tmp}/sshd.pid\n")
    Path("/run/sshd").mkdir(exist_ok=True)
    return run("/usr/sbin/sshd", "-t", "-f", str(main))


def firewalld_check(tmp: Path, zones: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """firewall-offline-cmd --check-config over a private copy of /etc/firewalld holding the zones
    (bind-mounted in a mount namespace of its own: the host's configuration is never touched)."""
    conf = tmp / "firewalld"
    (conf / "zones").mkdir(parents=True, exist_ok=True)
    shutil.copy("/etc/firewalld/firewalld.conf", conf / "firewalld.conf")
    for name, text in zones.items():
        (conf / "zones" / Path(name).name).write_text(text)
    script = f"mount --bind {conf} /etc/firewalld && firewall-offline-cmd --check-config"
    return run("unshare", "--mount", "--propagation", "private", "sh", "-c", script)


def nm_check(tmp: Path, keyfiles: dict[str, str]) -> subprocess.CompletedProcess[str]:
    paths = []
    for name, text in keyfiles.items():
        path = tmp / Path(name).name
        path.write_text(text)
        paths.append(str(path))
    return run(SYSTEM_PYTHON, str(NM_CHECK), *paths)


def nm_available() -> str | None:
    probe = run(SYSTEM_PYTHON, "-c", "import gi; gi.require_version('NM', '1.0'); from gi.repository import NM")
    return None if probe.returncode == 0 else "python3-gi with gir1.2-nm-1.0 is not installed (.ci/run installs it)"


FRR_DAEMONS = ("zebra", "staticd", "bgpd", "bfdd")  # every daemon an integrated frr.conf gpunet writes speaks to


def frr_check(text: str) -> list[str]:
    """FRR's own parsers on an integrated frr.conf: `vtysh -C` (every daemon's command syntax, in
    context), then each daemon's dry run (`<daemon> -C -f`), which applies what syntax cannot show
    (a peer-group member overriding the group's remote-as, a maximum-paths above the build's
    limit). A daemon's dry run exits 0 whatever it finds and logs the other daemons' lines as
    unknown (out of context after an `exit` it cannot place), so from it only its `%` refusals
    count. The daemons read the file after dropping to user frr, so it goes in a world-readable
    directory of its own under /tmp (pytest's tmp_path is root's alone), and a file a daemon could
    not open is a problem, never a pass. Returns the problems (empty: accepted)."""
    directory = Path(tempfile.mkdtemp(prefix="gpunet-frr-", dir="/tmp"))
    try:
        directory.chmod(0o755)
        conf = directory / "frr.conf"
        conf.write_text(text)
        conf.chmod(0o644)
        return _frr_problems(conf)
    finally:
        shutil.rmtree(directory)


def _dry_run(daemon: str, conf: Path) -> str:
    """`<daemon> -C -f conf`'s output; the crash-log folder the daemon makes for itself at start
    (/var/tmp/frr/<daemon>.<pid>, left behind by a dry run) removed after it."""
    with subprocess.Popen([f"/usr/lib/frr/{daemon}", "-C", "-f", str(conf)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as process:
        output, _ = process.communicate(timeout=60)
    shutil.rmtree(f"/var/tmp/frr/{daemon}.{process.pid}", ignore_errors=True)
    return output


def _frr_problems(conf: Path) -> list[str]:
    problems = []
    vtysh = run("vtysh", "-C", "-f", str(conf))
    if vtysh.returncode != 0:
        problems.append(f"vtysh -C exit {vtysh.returncode}: {(vtysh.stdout + vtysh.stderr).strip()[:500]}")
    for daemon in FRR_DAEMONS:
        output = _dry_run(daemon, conf)
        if "can't open configuration file" in output or "failed to open configuration file" in output:
            problems.append(f"{daemon} could not read {conf}")
        problems += [f"{daemon}: {line}" for line in output.splitlines() if line.startswith("%")]
    return problems
