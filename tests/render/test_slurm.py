"""Slurm reads the rendered topology.conf: slurmctld runs in a namespace of its own (with munge,
SLURM_CONF pointing at a throwaway config) and `scontrol show topology` reports the switches."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

from gpunet.render.bench_schedule import SBATCH_PATH, ScheduleUnits, render_schedule
from tests.render import validators as v
from tests.render.rendered import files_matching, text_of

pytestmark = [pytest.mark.lab, pytest.mark.skipif(bool(v.need("slurmctld") or v.need("munged")),
                                                  reason=str(v.need("slurmctld") or v.need("munged")))]
TOPOLOGIES = files_matching("slurm/topology.conf", tag="switches")
SLURM_CONF = """\
ClusterName=gpunettest
{network}
SlurmUser=root
MailProg=/bin/true
AuthType=auth/munge
AuthInfo=socket={dir}/munge.sock
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmctldLogFile={dir}/slurmctld.log
TopologyPlugin=topology/tree
SchedulerType=sched/backfill
SelectType=select/cons_tres
ProctrackType=proctrack/linuxproc
NodeName={nodes} CPUs=1 State={state}
PartitionName=all Nodes=ALL Default=YES
"""
ADDRESS = "198.18.254.1"  # inside the namespace only


NETWORK = f"SlurmctldHost=gnctl({ADDRESS})\nSlurmctldPort=16817\nSlurmdPort=16818\n"


def scontrol_topology(tmp: Path, topology: str, network: str = NETWORK, ask: str = "topology", *,
                      then: tuple[str, ...] = (), state: str = "FUTURE") -> tuple[int, str]:
    """Start munged and slurmctld in a fresh namespace, ask scontrol, stop both (by PID); with
    `then`, that command's exit and output once scontrol has answered."""
    (tmp / "state").mkdir()
    (tmp / "spool").mkdir()
    tmp.chmod(0o700)
    (tmp / "munge.key").write_bytes(os.urandom(1024))
    (tmp / "munge.key").chmod(0o400)
    nodes = NodeSet.fromlist([part.split("=")[1] for line in topology.splitlines() for part in line.split()
                              if part.startswith("Nodes=")])
    (tmp / "gpunet-network.conf").write_text(network)
    (tmp / "slurm.conf").write_text(SLURM_CONF.format(network=f"Include {tmp}/gpunet-network.conf", dir=tmp,
                                                      nodes=nodes, state=state))
    (tmp / "topology.conf").write_text(topology)
    env = {"SLURM_CONF": str(tmp / "slurm.conf"), "PATH": os.environ["PATH"]}
    with v.netns(f"gnslurm{os.getpid()}") as ns:
        # getaddrinfo(AI_ADDRCONFIG) wants a non-loopback address: a veth pair inside the namespace
        for command in (["link", "add", "gnsa", "type", "veth", "peer", "name", "gnsb"],
                        ["addr", "add", f"{ADDRESS}/30", "dev", "gnsa"], ["link", "set", "gnsa", "up"]):
            subprocess.run(["ip", "-n", ns, *command], check=True)
        v.run("ip", "netns", "exec", ns, "munged", "--force", f"--key-file={tmp}/munge.key",
              f"--socket={tmp}/munge.sock", f"--pid-file={tmp}/munged.pid", f"--log-file={tmp}/munged.log",
              f"--seed-file={tmp}/munge.seed")
        ctl = subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                                "hostname gnctl && exec slurmctld -D -i"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            code, shown = _ask(ns, env, ctl, ask)
            if code or not then:
                return code, shown
            done = v.run("ip", "netns", "exec", ns, *then, env=env)
            return done.returncode, done.stdout + done.stderr
        finally:
            _stop(ctl, tmp / "munged.pid")


def _ask(ns: str, env: dict[str, str], ctl: subprocess.Popen[str], what: str) -> tuple[int, str]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and ctl.poll() is None:
        done = v.run("ip", "netns", "exec", ns, "scontrol", "show", what, env=env)
        if done.returncode == 0 and ("SwitchName" in done.stdout or what != "topology"):
            return 0, done.stdout
        time.sleep(0.3)
    return ctl.poll() or 1, ""


def _stop(ctl: subprocess.Popen[str], munged_pid: Path) -> None:
    if ctl.poll() is None:
        ctl.send_signal(signal.SIGTERM)
    ctl.wait(timeout=30)
    if munged_pid.exists():
        os.kill(int(munged_pid.read_text()), signal.SIGTERM)


@pytest.mark.parametrize(("example", "path"), TOPOLOGIES, ids=[f[0] for f in TOPOLOGIES])
def test_slurmctld_loads_the_topology(tmp_path: Path, example: str, path: str, text: str) -> None:
    code, shown = scontrol_topology(tmp_path, text)
    assert code == 0, (tmp_path / "slurmctld.log").read_text()[-2000:]
    rendered = {line.split()[0].split("=")[1] for line in text.splitlines() if line.startswith("SwitchName=")}
    reported = {line.split()[0].split("=")[1] for line in shown.splitlines() if line.startswith("SwitchName=")}
    assert reported == rendered


def test_slurmctld_refuses_a_broken_topology(tmp_path: Path) -> None:
    broken = text_of(*TOPOLOGIES[0]).replace("Nodes=", "Nodez=", 1)
    code, _ = scontrol_topology(tmp_path, broken)
    assert code != 0


NETWORKS = files_matching("slurm/gpunet-network.conf")


@pytest.mark.parametrize(("example", "path"), NETWORKS, ids=[f[0] for f in NETWORKS])
def test_slurmctld_runs_on_the_planned_ports(tmp_path: Path, example: str, path: str, text: str) -> None:
    """The rendered network settings, included from slurm.conf (the controller's name and address
    swapped for this namespace's): slurmctld starts and reports the ports the firewall opens."""
    network = "\n".join(f"SlurmctldHost=gnctl({ADDRESS})" if line.startswith("SlurmctldHost=") else line
                        for line in text.splitlines())
    code, shown = scontrol_topology(tmp_path, text_of(*TOPOLOGIES[0]), network=network, ask="config")
    assert code == 0, (tmp_path / "slurmctld.log").read_text()[-2000:]
    reported = dict(re.findall(r"^(SlurmctldPort|SlurmdPort|SrunPortRange)\s*=\s*(\S+)", shown, re.MULTILINE))
    assert reported == dict(re.findall(r"^(SlurmctldPort|SlurmdPort|SrunPortRange)=(\S+)", text, re.MULTILINE))


def test_sbatch_accepts_the_bench_job_script(tmp_path: Path) -> None:
    """The rendered regular-tests job (partition `all`, a time limit) on two nodes of the topology,
    as its submitter sends it: sbatch --test-only says when it would start, not an error."""
    units = ScheduleUnits(gpunet="/usr/local/bin/gpunet", plan="/etc/gpunet/plan.json", db="/srv/bench.sqlite",
                          plane="compute", seconds=3, slice_size="class", slices=16, hours=(1,), period="week",
                          longest_s=8, partition="all", time_limit="00:30:00")
    script = tmp_path / "gpunet-bench.sbatch"
    script.write_text(render_schedule(units)[SBATCH_PATH])
    topology = text_of(*TOPOLOGIES[0])
    node = next(part.split("=")[1] for line in topology.splitlines() for part in line.split()
                if part.startswith("Nodes="))
    first = str(NodeSet(node)[0])
    (tmp_path / "slurm").mkdir()
    code, shown = scontrol_topology(tmp_path / "slurm", topology, ask="config", then=(
        "sbatch", "--test-only", f"--nodelist={first}", "--export=ALL,GPUNET_SLICE=1/16", str(script)),
        state="CLOUD")  # powered down until a job wants them: allocatable, unlike FUTURE
    assert code == 0 and "to start at" in shown, shown
