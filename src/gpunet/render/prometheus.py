"""Prometheus: a scrape configuration whose targets (file_sd) are every node's gpunet exporter and
node_exporter on its management address, labelled node, group and leaf; and alert rules over the
metrics of docs/metrics.md, each naming the `gpunet doctor` check that explains it.

The files go under admin/prometheus/ and keep their relative paths when copied to the
Prometheus host (e.g. /etc/prometheus/): prometheus.yml names targets/*.json and rules/*.yml
relative to itself, and Prometheus re-reads the target files when they change."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from gpunet.model.flows import GPUNET_EXPORTER_PORT, NODE_EXPORTER_PORT
from gpunet.model.nodeset import parse_nodeset
from gpunet.model.plan import Node, Plan, Switch
from gpunet.render.common import header

CONFIG_PATH = "prometheus/prometheus.yml"
RULES_FILE = "rules/gpunet-alerts.yml"
RULES_PATH = f"prometheus/{RULES_FILE}"
JOBS = {"gpunet": GPUNET_EXPORTER_PORT, "node": NODE_EXPORTER_PORT}
SNMP_JOB = "snmp"
# snmp_exporter runs beside Prometheus (its default port) and walks each switch for it; `auth`
# names the credentials in its snmp.yml (public_v2: community "public", its shipped default).
SNMP_EXPORTER = "127.0.0.1:9116"
SNMP_MODULE = "if_mib"
SNMP_AUTH = "public_v2"
SWITCH_ERRORS = 10  # received errored frames per 10 minutes: as ibqueryerrors' symbol error threshold
SWITCH_DISCARD_RATIO = 1e-4  # discarded / sent packets: a lossless class discards none; this is a full queue
SCRAPE_INTERVAL = "15s"  # 20 samples in every 5m rate window
RATE_WINDOW = "5m"
# Thresholds, and why:
NIC_ERROR_RATIO = 1e-6  # errored / all packets: a sound cable or optic errs ~1e-12; one in a million is bad
RETRANS_RATIO = 0.01  # retransmitted / sent segments: GN-TCP-01's fail level (its 0.1 % warn is noise here)
MIN_SEGMENTS_PER_S = 50  # as GN-TCP-01: below this the ratio of a few segments means nothing
IB_SYMBOL_ERRORS = 10  # per 10 minutes: ibqueryerrors' default SymbolErrorCounter threshold
PEER_LOSS_RATIO = 0.01  # failed / sent probes: a healthy fabric loses none
MIN_LOST_PROBES = 2  # one lost ping is noise (ICMP rate limits, a busy CPU); two in a window is not
# The exporter pings each peer every few rounds of 10 s (every few minutes on a large cluster):
# peer rates need a longer window than interface counters to hold several probes.
PEER_WINDOW = "15m"
# In a big cluster a peer is probed every few minutes (32 probes per 10 s round, round-robin), so a
# dead peer may get 1 probe per window: its run of failures, not a windowed ratio, says it is gone.
PEER_DEAD_AFTER_FAILURES = 3
PEER_RTT_P99_SECONDS = 0.001  # inside one site a probe's RTT is ~0.1 ms; 10x that is congestion or a detour
IB_PORT_ACTIVE = 4  # /sys/class/infiniband/*/ports/*/state: 4 = ACTIVE
# Regular fabric tests (gpunet_bench_*, served by the exporter given --bench-db):
BENCH_REGRESSION = -0.10  # a class's median 10 % under its baseline: `bench compare`'s default fail_below
BENCH_INCONCLUSIVE_RUNS = 3  # runs in a row with saturated ends: the runs land on busy hosts, not a passing burst
CONFIG_COMMENT = """\
# Copy admin/prometheus/ to the Prometheus host (e.g. /etc/prometheus/) and check it with
# `promtool check config prometheus.yml`. Targets are the nodes' management addresses; the node
# firewalls admit scrapes from the site's monitoring subnet ({monitoring}).
# The snmp job walks each switch's management address through snmp_exporter (if_mib module) on this
# host, {exporter}, under the switch's planned name (instance); set `auth` to your snmp.yml's.
# Plain http by default. For TLS and basic auth, add to each scrape job:
#   scheme: https
#   tls_config: {{ca_file: /etc/prometheus/ca.pem}}
#   basic_auth: {{username: prometheus, password_file: /etc/prometheus/exporter.password}}
"""


def render_prometheus(plan: Plan) -> dict[str, str]:
    """prometheus.yml, its target files (one per job) and the alert rules, by path."""
    files = {CONFIG_PATH: render_config(plan), RULES_PATH: render_rules(plan)}
    files |= {f"prometheus/{_targets_file(job)}": render_targets(plan, port) for job, port in JOBS.items()}
    if managed_switches(plan):
        files[f"prometheus/{_targets_file(SNMP_JOB)}"] = render_switch_targets(plan)
    return files


def render_config(plan: Plan) -> str:
    config: dict[str, Any] = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL,
                   "external_labels": {"site": plan.site.name}},
        "rule_files": [RULES_FILE],
        "scrape_configs": [{"job_name": job, "file_sd_configs": [{"files": [_targets_file(job)]}]} for job in JOBS],
    }
    if managed_switches(plan):
        config["scrape_configs"].append(snmp_job())
    comment = CONFIG_COMMENT.format(monitoring=plan.site.monitoring or "site.monitoring not set",
                                    exporter=SNMP_EXPORTER)
    return header("Prometheus configuration") + comment + _yaml(config)


def render_targets(plan: Plan, port: int) -> str:
    """file_sd JSON: one target group per node (its labels are its own): the nodes the scrape flow
    on this port reaches (the ones whose firewall admits the monitoring subnet), every node where
    the spec names no monitoring subnet (and the firewalls admit no scrape yet)."""
    leaves = compute_leaves(plan)
    scraped = _scraped(plan, port)
    groups = [{"targets": [f"{_address(node)}:{port}"],
               "labels": {"node": node.name, "group": node.group, "leaf": leaves.get(node.name, "")}}
              for node in plan.nodes if scraped is None or node.name in scraped]
    return "[\n" + ",\n".join(f" {json.dumps(group)}" for group in groups) + "\n]\n"  # a node a line


def managed_switches(plan: Plan) -> list[Switch]:
    return [s for s in plan.switches if s.management]


def snmp_job() -> dict[str, Any]:
    """snmp_exporter's if_mib module against every switch's management address (the target),
    `instance` set to the switch's planned name: what `gpunet localize --prometheus` and the
    switch-port alerts name a switch by."""
    return {"job_name": SNMP_JOB, "metrics_path": "/snmp", "params": {"module": [SNMP_MODULE], "auth": [SNMP_AUTH]},
            "file_sd_configs": [{"files": [_targets_file(SNMP_JOB)]}],
            "relabel_configs": [
                {"source_labels": ["__address__"], "target_label": "__param_target"},
                {"source_labels": ["switch"], "target_label": "instance"},
                {"target_label": "__address__", "replacement": SNMP_EXPORTER}]}


def render_switch_targets(plan: Plan) -> str:
    """file_sd JSON: a target group per switch with a management address, a switch a line."""
    groups = [{"targets": [s.management.split("/")[0]], "labels": {"switch": s.name, "plane": s.plane,
                                                                   "tier": s.tier}}
              for s in managed_switches(plan) if s.management]
    return "[\n" + ",\n".join(f" {json.dumps(group)}" for group in groups) + "\n]\n"


def _scraped(plan: Plan, port: int) -> set[str] | None:
    flows = [f for f in plan.flows if f.port_range and f.port_range.low == port and f.to_nodes
             and f.service in ("node-exporter", "gpunet-exporter")]
    return {n for f in flows for n in parse_nodeset(f.to_nodes)} if flows else None


def _yaml(data: Any) -> str:
    """common.to_yaml without line folding: a PromQL expression stays on one line."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=False, width=1 << 16)


def compute_leaves(plan: Plan) -> dict[str, str]:
    """Each node's compute leaf: the switch of its first compute cable. In a rail-optimized unit
    every node's first cable goes to the unit's rail-0 leaf, so the label names the unit."""
    leaves: dict[str, str] = {}
    for link in plan.links:
        if link.plane == "compute" and link.tier == "node_leaf":
            leaves.setdefault(link.a.device, link.b.device)
    return leaves


def _targets_file(job: str) -> str:
    return f"targets/{job}.json"


def _address(node: Node) -> str:
    """The management address; the node's name (DNS) when it has none."""
    return node.management_ip or node.name


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    wait: str  # the rule's `for`
    severity: str
    summary: str
    check: str  # the doctor check that explains it
    runbook: str = ""  # default: run the doctor on the node and read `check`


def render_rules(plan: Plan) -> str:
    groups = [{"name": name, "rules": [_rule(a) for a in alerts]} for name, alerts in alert_groups(plan).items()]
    return header("Prometheus alert rules") + _yaml({"groups": groups})


def _rule(alert: Alert) -> dict[str, Any]:
    runbook = alert.runbook or f"On {{{{ $labels.node }}}}: gpunet doctor --plan plan.json, check {alert.check}"
    return {"alert": alert.name, "expr": alert.expr, "for": alert.wait, "labels": {"severity": alert.severity},
            "annotations": {"summary": alert.summary, "runbook": runbook}}


def alert_groups(plan: Plan) -> dict[str, list[Alert]]:
    """Every alert by rule group; the InfiniBand port alerts only where the Plan has HCAs."""
    return {"gpunet-links": link_alerts(), "gpunet-counters": counter_alerts(),
            "gpunet-infiniband": infiniband_alerts(plan), "gpunet-peers": peer_alerts(),
            "gpunet-fabric": fabric_alerts(), "gpunet-exporter": exporter_alerts(), "gpunet-bench": bench_alerts(),
            **({"gpunet-switch-ports": switch_port_alerts()} if managed_switches(plan) else {})}


def _ratio(part: str, whole: str, window: str = RATE_WINDOW) -> str:
    return f"rate({part}[{window}]) / rate({whole}[{window}])"


def _sum_rates(*counters: str) -> str:
    return "(" + " + ".join(f"rate({c}[{RATE_WINDOW}])" for c in counters) + ")"


ON_DEVICE = "{{ $labels.device }} on {{ $labels.node }}"


def link_alerts() -> list[Alert]:
    return [
        Alert("GpunetLinkDown", 'max without (kind) (gpunet_plan_drift{kind="link"}) == 1'
              ' or gpunet_network_carrier{plane!=""} == 0', "1m", "critical",
              f"Planned interface {ON_DEVICE} ({{{{ $labels.plane }}}} plane) is missing or has no carrier",
              "GN-LINK-01"),
        # The exporter's drift gauges judge as doctor does (physical links only, the VLAN's layer-3
        # device for the MTU); the observed value rides along for the summary.
        Alert("GpunetLinkSpeedBelowPlan",
              'gpunet_network_speed_bytes_per_second and on(node, device) gpunet_plan_drift{kind="speed"} == 1', "5m",
              "warning", f"{ON_DEVICE} runs at {{{{ $value | humanize }}}}B/s, below the plan", "GN-LINK-02"),
        Alert("GpunetMtuDrift", 'gpunet_network_mtu_bytes and on(node, device) gpunet_plan_drift{kind="mtu"} == 1',
              "5m", "warning",
              f"{ON_DEVICE} has MTU {{{{ $value }}}}, not the plan's", "GN-MTU-01"),
        Alert("GpunetPlannedAddressMissing", 'gpunet_plan_drift{kind="address"} == 1', "5m", "warning",
              f"{ON_DEVICE} lacks its planned address", "GN-ADDR-01"),
        Alert("GpunetBondMemberDown", "gpunet_bond_member_up == 0", "1m", "warning",
              f"Bond member {ON_DEVICE} is down ({{{{ $labels.bond }}}} runs degraded)", "GN-BOND-01"),
    ]


def counter_alerts() -> list[Alert]:
    errors = _sum_rates("gpunet_network_receive_errors_total", "gpunet_network_transmit_errors_total")
    packets = _sum_rates("gpunet_network_receive_packets_total", "gpunet_network_transmit_packets_total")
    sent = f"rate(gpunet_tcp_out_segments_total[{RATE_WINDOW}])"
    return [
        Alert("GpunetNicErrorRatioHigh", f"{errors} / {packets} > {NIC_ERROR_RATIO:g}", "10m", "warning",
              f"{ON_DEVICE} errs on {{{{ $value | humanizePercentage }}}} of packets", "GN-CNT-01"),
        Alert("GpunetTcpRetransmissionRatioHigh",
              f"{_ratio('gpunet_tcp_retransmitted_segments_total', 'gpunet_tcp_out_segments_total')}"
              f" > {RETRANS_RATIO:g} and {sent} > {MIN_SEGMENTS_PER_S}", "10m", "warning",
              "{{ $labels.node }} retransmits {{ $value | humanizePercentage }} of its TCP segments", "GN-TCP-01"),
    ]


def infiniband_alerts(plan: Plan) -> list[Alert]:
    ports = "{{ $labels.device }} port {{ $labels.port }} on {{ $labels.node }}"
    alerts = [
        Alert("GpunetInfinibandSymbolErrors", f"increase(gpunet_infiniband_symbol_errors_total[10m]) > "
              f"{IB_SYMBOL_ERRORS}", "0m", "warning",
              f"{ports}: {{{{ $value | humanize }}}} symbol errors in 10 minutes", "GN-IB-02"),
        Alert("GpunetInfinibandLinkDowned", "increase(gpunet_infiniband_link_downed_total[10m]) > 0", "0m",
              "warning", f"{ports}: link downed {{{{ $value | humanize }}}} time(s) in 10 minutes", "GN-IB-02"),
    ]
    if not any(i.hca for n in plan.nodes for i in n.interfaces):
        return alerts
    # The exporter labels each HCA with its plane and exports the Plan's rate for it, so one rule
    # holds every port to its own node's plan (HCA names repeat across node groups).
    below = ("gpunet_infiniband_rate_bytes_per_second < on(node, device) group_left() "
             "gpunet_plan_expected_infiniband_rate_bytes_per_second")
    return [
        Alert("GpunetInfinibandPortNotActive",
              f'gpunet_infiniband_port_state{{plane!=""}} != {IB_PORT_ACTIVE}', "1m", "critical",
              f"Planned {ports} is not Active (state {{{{ $value }}}})", "GN-IB-01"),
        Alert("GpunetInfinibandRateBelowPlan", below, "5m", "warning",
              f"{ports} runs at {{{{ $value | humanize }}}}B/s, below the plan", "GN-IB-01"),
        *alerts,
    ]


def peer_alerts() -> list[Alert]:
    to_peer = "{{ $labels.peer }} on the {{ $labels.plane }} plane"
    doctor = "On {{ $labels.node }}: gpunet doctor --plan plan.json --peers, check GN-PEER-01"
    failures = "gpunet_peer_probe_failures_total"
    return [
        Alert("GpunetPeerUnreachable", f"gpunet_peer_consecutive_failures >= {PEER_DEAD_AFTER_FAILURES}", "0m",
              "critical",
              f"{{{{ $labels.node }}}} has had no answer from {to_peer} for {{{{ $value }}}} probes in a row",
              "GN-PEER-01", doctor),
        Alert("GpunetPeerLoss", f"{_ratio(failures, 'gpunet_peer_probes_total', PEER_WINDOW)} > {PEER_LOSS_RATIO:g}"
              f" and increase({failures}[{PEER_WINDOW}]) >= {MIN_LOST_PROBES}", "5m", "warning",
              f"{{{{ $labels.node }}}} loses {{{{ $value | humanizePercentage }}}} of probes to {to_peer}",
              "GN-PEER-01", doctor),
        Alert("GpunetPeerLatencyHigh", f"histogram_quantile(0.99, rate(gpunet_peer_rtt_seconds_bucket[{PEER_WINDOW}]))"
              f" > {PEER_RTT_P99_SECONDS:g}", "10m", "warning",
              f"99th percentile RTT from {{{{ $labels.node }}}} to {to_peer} is {{{{ $value | humanizeDuration }}}}",
              "GN-PEER-01", doctor),
    ]


# The counters that mean a bad signal on the cable into the port (localize/counters.DAMAGE), not
# congestion (PortXmitWait) or drops on the way out.
FABRIC_DAMAGE = ("SymbolErrorCounter|LinkErrorRecoveryCounter|LinkDownedCounter|PortRcvErrors"
                 "|PortRcvRemotePhysicalErrors|LocalLinkIntegrityErrors|ExcessiveBufferOverrunErrors")


def fabric_alerts() -> list[Alert]:
    """From the fabric exporter: a cable whose ports count errors, named as the Plan names it."""
    errors = (f'sum by (node, cable, plane) (increase(gpunet_fabric_port_errors_total{{counter=~"{FABRIC_DAMAGE}"}}'
              f"[10m])) > {IB_SYMBOL_ERRORS}")
    return [Alert("GpunetFabricCableErrors", errors, "0m", "warning",
                  "Cable {{ $labels.cable }} ({{ $labels.plane }} plane) counted {{ $value | humanize }} port errors "
                  "in 10 minutes (fabric exporter on {{ $labels.node }})", "GN-IB-02",
                  "gpunet localize --ibqueryerrors <now> --before <earlier> --plan plan.json names it with the fix; "
                  "reseat, then replace the cable {{ $labels.cable }}; on its hosts gpunet doctor, check GN-IB-02")]


SWITCH_PORT = "{{ $labels.switch }} port {{ $labels.ifName }}"
SWITCH_RUNBOOK = ("gpunet localize --prometheus <this Prometheus> --plan plan.json --window 600 names the cable "
                  "and its fix; on a server at its far end gpunet doctor, check GN-CNT-01")


def switch_port_alerts() -> list[Alert]:
    """From snmp_exporter's IF-MIB series (the snmp job): a switch port receiving errored frames
    (a bad signal on the cable into it, or the far end's optic), one discarding what it should
    send (a full queue: congestion, or a PFC/ECN setting that does not hold)."""
    sent = 'rate(ifHCOutUcastPkts{job="snmp"}[5m])'
    return [
        Alert("GpunetSwitchPortErrors", f'increase(ifInErrors{{job="snmp"}}[10m]) > {SWITCH_ERRORS}', "0m", "warning",
              f"{SWITCH_PORT} received {{{{ $value | humanize }}}} errored frames in 10 minutes", "GN-CNT-01",
              SWITCH_RUNBOOK),
        Alert("GpunetSwitchPortDiscards", f'rate(ifOutDiscards{{job="snmp"}}[5m]) / {sent} > {SWITCH_DISCARD_RATIO:g}'
              f" and {sent} > 0", "10m", "warning",
              f"{SWITCH_PORT} discards {{{{ $value | humanizePercentage }}}} of the packets it sends", "GN-QOS-02",
              "congestion, not a bad cable: gpunet bench run finds the pairs it slows; for RoCE the switch's PFC and "
              "ECN for the plane's class (gpunet doctor on its servers, checks GN-QOS-02 and GN-QOS-04)"),
    ]


BENCH_CLASS = "{{ $labels.path }} rail {{ $labels.rail }} on the {{ $labels.plane }} plane"
BENCH_SERVED = "(bench results served by {{ $labels.node }})"


def bench_alerts() -> list[Alert]:
    """From the bench database: a pair class slower than its baseline, one whose latest run flagged
    pairs (a slow equal-cost path leaves the median at line rate: the pair's other streams fill its
    NIC), one the rotation has not measured within its period, runs that keep landing on saturated
    ends."""
    return [
        Alert("GpunetBenchRegression", f"gpunet_bench_class_variance_ratio < {BENCH_REGRESSION:g}", "0m", "warning",
              f"Pair class {BENCH_CLASS} measures {{{{ $value | humanizePercentage }}}} against its baseline "
              f"{BENCH_SERVED}", "GN-LINK-02",
              "gpunet bench check names the class and its latest run; gpunet bench show RUN its pairs; "
              "gpunet localize names the cable; on the pairs' hosts gpunet doctor, checks GN-LINK-02 and GN-CNT-01"),
        Alert("GpunetBenchPairsFlagged", "gpunet_bench_class_flagged_pairs > 0", "0m", "warning",
              f"{{{{ $value }}}} pairs of class {BENCH_CLASS} were low, failed or congested in its latest run "
              f"{BENCH_SERVED}", "GN-LINK-02",
              "gpunet bench check names the run; gpunet bench show RUN gives each pair's reason (a slow "
              "equal-cost path: gpunet localize names the cable); on the pairs' hosts gpunet doctor, checks GN-LINK-02 "
              "and GN-CNT-01"),
        Alert("GpunetBenchClassNotMeasured",
              "gpunet_bench_class_age_seconds > on(instance) group_left() gpunet_bench_period_seconds", "0m",
              "warning", f"Pair class {BENCH_CLASS} was not measured within the schedule's period {BENCH_SERVED}",
              "GN-SSH-01",
              "systemctl status gpunet-bench.timer; journalctl -u gpunet-bench; gpunet bench history; the runs reach "
              "the nodes over SSH: gpunet doctor, check GN-SSH-01"),
        Alert("GpunetBenchInconclusiveRuns", f"gpunet_bench_inconclusive_runs_in_a_row >= {BENCH_INCONCLUSIVE_RUNS}",
              "0m", "warning", "The last {{ $value }} bench runs on the {{ $labels.plane }} plane left pairs "
              f"inconclusive: their ends' CPUs were saturated {BENCH_SERVED}", "GN-AFF-01",
              "gpunet bench show RUN names the saturated ends; schedule the runs at idle hours or as Slurm jobs "
              "(bench schedule --partition); on those hosts gpunet doctor, check GN-AFF-01"),
    ]


# The doctor check that reads what each collector reads.
COLLECTOR_CHECKS = {"netdev": "GN-LINK-01", "netstat": "GN-TCP-01", "bonding": "GN-BOND-01",
                    "infiniband": "GN-IB-01", "plan": "GN-ADDR-01", "peers": "GN-PEER-01", "fabric": "GN-IB-02"}


def exporter_alerts() -> list[Alert]:
    branches = "".join(f'{{{{ {"if" if i == 0 else "else if"} eq $labels.collector "{name}" }}}}{check}'
                       for i, (name, check) in enumerate(COLLECTOR_CHECKS.items()))
    return [
        Alert("GpunetCollectorFailing", "gpunet_collector_success == 0", "5m", "warning",
              "The {{ $labels.collector }} collector of {{ $labels.node }}'s gpunet exporter fails", "GN-LINK-01",
              "On {{ $labels.node }}: gpunet probe lists what could not be read; gpunet doctor --plan plan.json,"
              f" check {branches}{{{{ else }}}}GN-LINK-01{{{{ end }}}}"),
        Alert("GpunetExporterDown", 'up{job="gpunet"} == 0', "2m", "critical",
              "The gpunet exporter of {{ $labels.node }} does not answer", "GN-PEER-01",
              "From another node: gpunet doctor --plan plan.json --peers, checks GN-PEER-01 and GN-FW-02"
              f" (is {{{{ $labels.node }}}} up, and port {GPUNET_EXPORTER_PORT} open to the monitoring subnet?)"),
    ]
