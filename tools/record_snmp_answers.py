"""Record real snmp_exporter answers, as a Prometheus server gives them to `gpunet localize --prometheus`.

Run as root on a machine with net-snmp's snmpd, Debian's prometheus-snmp-exporter and prometheus:

    apt-get install snmpd prometheus-snmp-exporter      # prometheus: as .ci/run unpacks it
    git -C <snmp_exporter checkout> show v0.21.0:snmp.yml > /tmp/snmp.yml
    PYTHONPATH=src python tools/record_snmp_answers.py --snmp-yml /tmp/snmp.yml

Debian's package ships no snmp.yml (the IETF MIBs it is generated from are not free), so --snmp-yml
names one in the format of the installed exporter: upstream's snmp.yml of the same release. Its
if_mib module is used as it is, with the community set to this tool's own.

What it does, all inside a network namespace of its own (`gnsnmp`, deleted at the end), on 127.0.0.1:
- one switch of the plan (--switch, default comp-leaf001 of tests/fixtures/lab/small.yaml) made of
  veth interfaces named as its cabled ports (swp1..), each with the far end of its planned cable as
  its alias (`ip link set swpN alias gpu1:ens1`), so the agent's ifName, ifDescr and ifAlias are real;
  each one's peer (swp1p..) is there too, as a switch's interfaces that are no planned port are;
  net-snmp 5.9 does not read the kernel's alias, so snmpd.conf gives it as ifAlias (`override`);
- snmpd (read-only community of its own) on udp 127.0.0.1:161;
- prometheus-snmp-exporter on 127.0.0.1:9116, where gpunet's rendered scrape job expects it;
- three Prometheus servers with the snmp job and targets `gpunet render --target prometheus` writes
  for the plan (the switch's target its planned management address), one relabel rule added that
  sends the exporter to this agent instead (target 127.0.0.1, the port kept), so that `instance` is
    name:         the planned switch name (the job as rendered),
    address:      the management address (instance from the target, as snmp_exporter's README
                  relabels it),
    address_port: address:port (the target written address:161, relabelled the same way);
- after at least two scrapes and `--window` seconds of them, the answers to exactly the query
  gpunet's localize makes (gpunet.localize.run.IF_MIB_QUERY) at two times `--window` apart, written
  verbatim to <out>/<variant>/earlier.json and later.json, and the answer for a time before the
  server started (unscraped.json), with <out>/SOURCE.md saying how.

Every process it starts is stopped by its PID; the namespace is deleted even on failure.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from gpunet.api import plan_spec
from gpunet.localize.run import IF_MIB_QUERY
from gpunet.model.plan import Plan
from gpunet.render.prometheus import SNMP_EXPORTER, SNMP_JOB, render_prometheus

ROOT = Path(__file__).resolve().parents[1]
NETNS = "gnsnmp"
COMMUNITY = "gnsnmp-ro"  # ours, read-only, answered on loopback only
VARIANTS = {  # name -> (what follows the planned address in the target, what instance is taken from)
    "name": ("", "switch"),
    "address": ("", "__param_target"),
    "address_port": (":161", "__param_target"),
}
# After instance is set: the exporter walks the agent on loopback, not the planned address (any
# port written in the target kept), so no packet leaves 127.0.0.1.
TO_AGENT = {"source_labels": ["__param_target"], "regex": "[^:]+(:[0-9]+)?", "target_label": "__param_target",
            "replacement": "127.0.0.1${1}"}
PROMETHEUS_PORTS = {"name": 9090, "address": 9091, "address_port": 9092}
SCRAPE_S = 15  # the rendered scrape_interval
# Each port is a veth (this host's kernel has no dummy driver); its peer, swpNp, stays in the
# namespace too: an interface of the switch that is no planned port (no trailing number).
PEER = "p"
IF_ALIAS = ".1.3.6.1.2.1.31.1.1.1.18"  # IF-MIB::ifAlias


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plan", type=Path, default=ROOT / "tests/fixtures/lab/small.yaml")
    parser.add_argument("--switch", default="comp-leaf001")
    parser.add_argument("--snmp-yml", type=Path, default=Path("/etc/prometheus/snmp.yml"))
    parser.add_argument("--out", type=Path, default=ROOT / "tests/fixtures/snmp_exporter_answers")
    parser.add_argument("--window", type=int, default=60, help="seconds between the two recorded queries")
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)  # the namespace's half: its work dir
    args = parser.parse_args()
    if args.inside:
        return record_inside(args.inside, args.window)
    if os.geteuid() != 0:
        sys.exit("record_snmp_answers: run as root (it makes a network namespace)")
    plan = plan_spec(args.plan)
    with tempfile.TemporaryDirectory(prefix="gnsnmp-") as work:
        prepare(Path(work), plan, args.switch, args.snmp_yml)
        run(["ip", "netns", "add", NETNS])  # fails where it exists: only our own is torn down below
        try:
            make_namespace(plan, args.switch)
            write_snmpd_conf(Path(work), args.switch)
            run(["ip", "netns", "exec", NETNS, sys.executable, __file__, "--inside", work, "--window",
                 str(args.window)], env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        except subprocess.CalledProcessError:
            for log in sorted((Path(work) / "logs").glob("*.log")):  # the work dir goes with the failure
                print(f"--- {log.name}:", *log.read_text(errors="replace").splitlines()[-15:], sep="\n")
            raise
        finally:
            remove_namespace()
        write_answers(Path(work), args.out, args, plan)
        print(f"recorded under {args.out}")
    return 0


def run(argv: list[str], **kwargs: Any) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, check=True, **kwargs)


def switch_ports(plan: Plan, switch: str) -> dict[str, str]:
    """swpN -> the far end of the cable planned on port N (`gpu1:ens1`), the switch's ports only."""
    ports = {}
    for link in plan.links:
        for near, far in ((link.a, link.b), (link.b, link.a)):
            if near.device == switch and near.port.isdigit():  # the name becomes an interface name
                ports[f"swp{int(near.port)}"] = f"{far.device}:{far.port}"
    if not ports:
        sys.exit(f"record_snmp_answers: {switch} has no cabled numbered port in the plan")
    return dict(sorted(ports.items(), key=lambda item: int(item[0][3:])))


def make_namespace(plan: Plan, switch: str) -> None:
    run(["ip", "-n", NETNS, "link", "set", "lo", "up"])
    for name, far_end in switch_ports(plan, switch).items():
        run(["ip", "-n", NETNS, "link", "add", name, "type", "veth", "peer", "name", f"{name}{PEER}"])
        run(["ip", "-n", NETNS, "link", "set", name, "alias", far_end])
        for end in (name, f"{name}{PEER}"):
            run(["ip", "-n", NETNS, "link", "set", end, "up"])


def remove_namespace() -> None:
    """Whatever still runs in the namespace was started by this tool: stopped by PID, then the
    namespace deleted."""
    pids = subprocess.run(["ip", "netns", "pids", NETNS], capture_output=True, text=True, check=False).stdout
    for pid in pids.split():
        os.kill(int(pid), signal.SIGKILL)
    subprocess.run(["ip", "netns", "delete", NETNS], check=False)


def prepare(work: Path, plan: Plan, switch: str, snmp_yml: Path) -> None:
    """The exporter's snmp.yml and the three Prometheus configurations under `work`."""
    modules = yaml.safe_load(snmp_yml.read_text())
    if not isinstance(modules, dict) or "if_mib" not in modules:
        sys.exit(f"record_snmp_answers: {snmp_yml} has no if_mib module (Debian ships none: see --help)")
    if_mib = modules["if_mib"] | {"auth": {"community": COMMUNITY}}  # snmp_exporter 0.21: auth per module
    (work / "snmp.yml").write_text(yaml.safe_dump({"if_mib": if_mib}, sort_keys=False))
    rendered = render_prometheus(plan)
    config = yaml.safe_load(rendered["prometheus/prometheus.yml"])
    job = next(j for j in config["scrape_configs"] if j["job_name"] == SNMP_JOB)
    groups = json.loads(rendered[f"prometheus/{job['file_sd_configs'][0]['files'][0]}"])
    group = next(g for g in groups if g["labels"]["switch"] == switch)
    for variant, (port, instance_from) in VARIANTS.items():
        (work / variant / "targets").mkdir(parents=True)
        (work / variant / job["file_sd_configs"][0]["files"][0]).write_text(
            json.dumps([{"targets": [f"{group['targets'][0]}{port}"], "labels": group["labels"]}]))
        relabel = []
        for rule in job["relabel_configs"]:
            is_instance = rule.get("target_label") == "instance"
            relabel += [rule | {"source_labels": [instance_from]}, TO_AGENT] if is_instance else [rule]
        own = {"global": config["global"], "scrape_configs": [job | {"relabel_configs": relabel}]}
        (work / variant / "prometheus.yml").write_text(yaml.safe_dump(own, sort_keys=False))


def write_snmpd_conf(work: Path, switch: str) -> None:
    """The agent read-only on loopback, each interface's ifAlias its kernel alias: net-snmp 5.9
    does not read that (its ifAlias is its own, set by SNMP SET and kept in its store), so the
    alias is given per ifIndex (the kernel's ifindex, as net-snmp numbers interfaces on Linux)
    by `override`, which keeps the agent read-only."""
    (work / "snmpd").mkdir()
    links = json.loads(subprocess.run(["ip", "-n", NETNS, "-j", "link", "show"], capture_output=True, text=True,
                                      check=True).stdout)
    aliases = "".join(f'override {IF_ALIAS}.{int(link["ifindex"])} octet_str {json.dumps(link["ifalias"])}\n'
                      for link in links if link.get("ifalias"))
    (work / "snmpd.conf").write_text(f"agentaddress udp:127.0.0.1:161\nrocommunity {COMMUNITY} 127.0.0.1\n"
                                     f"sysName {switch}\nsysLocation gpunet record_snmp_answers\n{aliases}")


def record_inside(work: Path, window: int) -> int:
    """In the namespace: the agent, the exporter and the three servers started, the answers asked
    for when the window holds two scrapes, everything stopped by PID."""
    started: list[subprocess.Popen[bytes]] = []
    logs = work / "logs"
    logs.mkdir()

    def start(name: str, argv: list[str], **env: str) -> None:
        print("+", " ".join(argv), flush=True)
        with (logs / f"{name}.log").open("wb") as log:
            started.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env}))

    try:
        start("snmpd", ["snmpd", "-f", "-Lo", "-C", "-c", str(work / "snmpd.conf"), "-p", str(work / "snmpd.pid")],
              SNMP_PERSISTENT_DIR=str(work / "snmpd"), MIBS="")
        start("snmp_exporter", ["prometheus-snmp-exporter", f"--config.file={work / 'snmp.yml'}",
                                f"--web.listen-address={SNMP_EXPORTER}"])
        unscraped = round(time.time() - 1, 3)  # before any server began: no history at all
        for variant, port in PROMETHEUS_PORTS.items():
            start(f"prometheus-{variant}", ["prometheus", f"--config.file={work / variant / 'prometheus.yml'}",
                                            f"--storage.tsdb.path={work / variant / 'data'}",
                                            f"--web.listen-address=127.0.0.1:{port}"])
        first = wait_for_series(deadline=time.time() + 120)
        time.sleep(max(0.0, first + window + 2 * SCRAPE_S - time.time()))
        later = round(time.time() - 1, 3)
        for variant, port in PROMETHEUS_PORTS.items():
            check_scrapes(port, later, window)
            for name, at in (("earlier", later - window), ("later", later), ("unscraped", unscraped)):
                (work / variant / f"{name}.json").write_bytes(query(port, at))
        (work / "times.json").write_text(json.dumps({"earlier": later - window, "later": later,
                                                     "unscraped": unscraped}))
    finally:
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return 0


def query(port: int, at: float) -> bytes:
    """The very request gpunet's localize makes (localize.run.prometheus_query), the body verbatim."""
    params = urllib.parse.urlencode({"query": IF_MIB_QUERY, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{params}", timeout=30) as answer:
        body: bytes = answer.read()
    return body


def series_in(body: bytes) -> int:
    return len(json.loads(body)["data"]["result"])


def wait_for_series(deadline: float) -> float:
    """When every server first had IF-MIB series: the start of the window's history."""
    waiting = set(PROMETHEUS_PORTS.values())
    while waiting:
        if time.time() > deadline:
            sys.exit(f"record_snmp_answers: no IF-MIB series on the servers at {sorted(waiting)} in time")
        time.sleep(2)
        for port in sorted(waiting):
            try:
                if series_in(query(port, time.time())):
                    waiting.discard(port)
            except OSError:
                pass  # not listening yet
    return time.time()


def check_scrapes(port: int, at: float, window: int) -> None:
    """Both answers fall inside the scraped history: at least two scrapes before `at - window`
    would be too strict (the first scrape starts it), so: two or more scrapes in the window, and
    the earlier answer not empty."""
    params = urllib.parse.urlencode({"query": f'count_over_time(up{{job="{SNMP_JOB}"}}[{window}s])',
                                     "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{params}", timeout=30) as answer:
        result = json.loads(answer.read())["data"]["result"]
    scrapes = int(float(result[0]["value"][1])) if result else 0
    if scrapes < 2 or not series_in(query(port, at - window)):
        sys.exit(f"record_snmp_answers: the server at {port} scraped {scrapes} time(s) in the window")


def versions() -> dict[str, str]:
    def of(argv: list[str]) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return (done.stdout or done.stderr).strip().splitlines()[0]

    packages = {name: of(["dpkg-query", "-W", "-f", "${Version}", name])
                for name in ("snmpd", "prometheus-snmp-exporter", "iproute2")}
    packages["prometheus (Debian's package unpacked, as .ci/run does)"] = of(["prometheus", "--version"])
    packages["kernel"] = os.uname().release
    return packages


def write_answers(work: Path, out: Path, args: argparse.Namespace, plan: Plan) -> None:
    times = json.loads((work / "times.json").read_text())
    for variant in VARIANTS:
        (out / variant).mkdir(parents=True, exist_ok=True)
        for name in ("earlier", "later", "unscraped"):
            shutil.copyfile(work / variant / f"{name}.json", out / variant / f"{name}.json")
        shutil.copyfile(work / variant / "prometheus.yml", out / variant / "prometheus.yml")
        shutil.copyfile(work / variant / "targets" / "snmp.json", out / variant / "snmp-targets.json")
    shutil.copyfile(work / "snmpd.conf", out / "snmpd.conf")
    (out / "SOURCE.md").write_text(source_text(times, args, plan))


def source_text(times: dict[str, float], args: argparse.Namespace, plan: Plan) -> str:
    digest = hashlib.sha256(args.snmp_yml.read_bytes()).hexdigest()
    address = next(s.management for s in plan.switches if s.name == args.switch and s.management).split("/")[0]
    when = datetime.datetime.fromtimestamp(times["later"], datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    packages = "\n".join(f"- {name}: {version}" for name, version in versions().items())
    ports = "\n".join(f"- {name}: alias `{far}`" for name, far in switch_ports(plan, args.switch).items())
    return f"""# Recorded snmp_exporter answers

Recorded on this machine (the gpunet development host), {when}, by
`tools/record_snmp_answers.py --switch {args.switch} --window {args.window} --snmp-yml <snmp_exporter v0.21.0 snmp.yml>`
(plan: {args.plan.name}), as root, in a network namespace of its own (`gnsnmp`, deleted after), on 127.0.0.1 only.

Software (Debian 12 packages, versions as dpkg reports them):
{packages}

snmp.yml: Debian's prometheus-snmp-exporter ships none (the MIBs it is generated from are not free); the
if_mib module is upstream's `snmp.yml` at tag v0.21.0 (the packaged release) of prometheus/snmp_exporter,
unchanged but for `auth: {{community: {COMMUNITY}}}` (the file given: sha256 {digest}).
snmpd.conf here is the agent's configuration.
net-snmp 5.9 does not read the kernel's interface alias (its ifAlias is its own, set by SNMP SET), so
snmpd.conf gives each swpN's ifAlias as its kernel alias with `override` lines: the agent stays read-only.

The agent's interfaces: `lo` and veth interfaces named as {args.switch}'s cabled ports, each with the far
end of its planned cable as its alias (so ifName = ifDescr = swpN, ifAlias = the far end), and each
one's peer, swpN{PEER} (no alias: an interface of the switch that is no planned port):
{ports}

Each variant directory holds the Prometheus configuration it ran (`prometheus.yml`: the snmp job of
`gpunet render --target prometheus` for the plan, one rule added after the instance rule that sends
the exporter to the agent on 127.0.0.1, and for address and address_port the instance rule taking the
target as snmp_exporter's README does) and its targets file (`snmp-targets.json`: gpunet's, for this
switch; address_port's target written address:161), and the answers, verbatim, to the query gpunet's
localize makes
(`/api/v1/query?query={IF_MIB_QUERY}&time=T`):
- `earlier.json` at T = {times['earlier']:.3f}
- `later.json` at T = {times['later']:.3f} ({args.window} s later)
- `unscraped.json` at T = {times['unscraped']:.3f}, before the server started: what a window reaching
  back past the first scrape gets (an empty vector)

| variant | target (walked at) | `instance` |
|---|---|---|
| name | {address} (127.0.0.1) | the planned name, {args.switch} (gpunet's relabel from `switch`) |
| address | {address} (127.0.0.1) | {address} (the management address: the target) |
| address_port | {address}:161 (127.0.0.1:161) | {address}:161 (address:port) |

What the test (tests/localize/test_snmp_recorded.py) does to them: the counters recorded are all zero
(veth interfaces make no errored frames), so it adds errors to one port's ifInErrors in later.json, in
code, and expects that port's cable named first. It serves each answer for the time it was recorded
at, byte for byte otherwise, with localize's clock set to the later time, against the plan the answers
were recorded for ({args.plan.name}) and, to see a switch named by no planned name or address, the same
plan with no management addresses. It also takes one port's series out of earlier.json (a port with no
earlier reading), and serves unscraped.json as the answer `window` s before later.json (a window
reaching back past the first scrape). Re-record with the command above.
"""


if __name__ == "__main__":
    sys.exit(main())
