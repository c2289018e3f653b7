"""Counters, TCP tuning, name resolution, SSH, security modules, InfiniBand and NCCL checks."""

from __future__ import annotations

import re
from ipaddress import IPv4Address, IPv4Network

from gpunet.checks.base import NO_GPU_HERE, Context, FunctionCheck, Outcome, Verdict, no_gpu_here
from gpunet.checks.links import NO_PLAN
from gpunet.model.tuning import fastest_tcp_gbps, nccl_settings, tcp_buffer_max

ERROR_COUNTERS = ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped", "rx_crc_errors", "rx_missed_errors")
RETRANS_WARN, RETRANS_FAIL = 0.001, 0.01  # retransmitted / sent segments
MIN_SEGMENTS_PER_S = 50  # below this, too little traffic to judge a ratio


HW_ERROR = re.compile(r"(err|drop|discard|crc|symbol|fcs|out_of_buffer)", re.IGNORECASE)
IB_ERROR_COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
                     "local_link_integrity_errors", "excessive_buffer_overrun_errors")


def counters(ctx: Context) -> list[Outcome]:
    if ctx.state.interval_s <= 0:
        return [Outcome("skip", evidence="one sample only (--interval 0): no rates")]
    names = [i.name for i in ctx.planned(cabled=True)] or [i.name for i in ctx.state.interfaces if not i.virtual]
    result = []
    for name in names:
        rising = {c: ctx.state.rates.get(f"{name}/{c}", 0.0) for c in ERROR_COUNTERS}
        rising |= {f"ethtool {k.split('/')[-1]}": v for k, v in ctx.state.rates.items()
                   if k.startswith(f"{name}/ethtool/") and HW_ERROR.search(k.split("/")[-1])}
        rising = {c: r for c, r in rising.items() if r > 0}
        verdict: Verdict = "pass" if not rising else "fail" if max(rising.values()) >= 1 else "warn"
        observed = ", ".join(f"{c} +{r:.2f}/s" for c, r in rising.items()) or "no error or drop increase"
        result.append(Outcome(verdict, name, observed, "0/s", f"over {ctx.state.interval_s:g} s"))
    return result


def retransmissions(ctx: Context) -> list[Outcome]:
    sent, again = ctx.state.rates.get("Tcp/OutSegs"), ctx.state.rates.get("Tcp/RetransSegs")
    if sent is None or again is None:
        return [Outcome("skip", evidence="no /proc/net/snmp rates (--interval 0?)")]
    if sent < MIN_SEGMENTS_PER_S:
        return [Outcome("skip", evidence=f"{sent:.0f} segments/s sent: too little TCP traffic to judge")]
    ratio = again / sent
    verdict: Verdict = "fail" if ratio >= RETRANS_FAIL else "warn" if ratio >= RETRANS_WARN else "pass"
    return [Outcome(verdict, "tcp", f"{ratio:.2%} of {sent:.0f} segments/s", f"< {RETRANS_WARN:.1%}",
                    "Tcp RetransSegs / OutSegs rates")]


def tcp_buffers(ctx: Context) -> list[Outcome]:
    if ctx.node is None or ctx.plan is None:
        return [NO_PLAN]
    wanted = tcp_buffer_max(fastest_tcp_gbps(ctx.node))
    result = []
    for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
        value = ctx.state.sysctls.get(key)
        if value is None:
            result.append(Outcome("skip", key, evidence="not readable"))
            continue
        last = value.split()[-1] if value.split() else ""
        if not re.fullmatch(r"[0-9]{1,20}", last):
            result.append(Outcome("skip", key, evidence=f"not a number: {value[:40]!r}"))
            continue
        top = int(last)
        result.append(Outcome("pass" if top >= wanted else "warn", key, str(top), str(wanted)))
    return result


def resolution(ctx: Context) -> list[Outcome]:
    if ctx.plan is None:
        return [NO_PLAN]
    planned = {i.hostname: i.address.split("/")[0] for n in ctx.plan.nodes for i in n.interfaces
               if i.hostname and i.address}
    result = []
    for name, got in sorted(ctx.state.resolved.items()):
        want = planned.get(name)
        if want is None:
            continue
        verdict: Verdict = "pass" if got == (want,) else "fail"
        result.append(Outcome(verdict, name, ", ".join(got) or "does not resolve", want))
    return result or [Outcome("skip", evidence="no plan hostname was resolved")]


def sshd_passwords(ctx: Context) -> list[Outcome]:
    settings = ctx.state.sshd
    if settings is None:
        return [Outcome("skip", evidence="sshd not installed here, or `sshd -T` failed")]
    open_ = {k: settings.get(k) for k in ("passwordauthentication", "kbdinteractiveauthentication")}
    bad = {k: v for k, v in open_.items() if v == "yes"}
    if bad:
        return [Outcome("fail", "sshd", ", ".join(f"{k} {v}" for k, v in bad.items()), "no", "sshd -T")]
    return [Outcome("pass", "sshd", "keys only")]


def security_modules(ctx: Context) -> list[Outcome]:
    result = []
    if ctx.state.selinux == "enforcing":
        result.append(Outcome("warn", "selinux", "enforcing", "a policy allowing the plan's ports",
                              "/sys/fs/selinux/enforce = 1; denials: ausearch -m avc -ts recent"))
    if ctx.state.apparmor:
        result.append(Outcome("warn", "apparmor", "enabled", "no profile confining network daemons",
                              "/sys/module/apparmor/parameters/enabled = Y; aa-status"))
    return result or [Outcome("pass", "lsm", "no SELinux enforcing, no AppArmor")]


def infiniband(ctx: Context) -> list[Outcome]:
    if ctx.node is None or ctx.plan is None:
        return [NO_PLAN]
    wanted = [i for i in ctx.planned(cabled=True) if i.hca]
    if not wanted:
        return [Outcome("skip", evidence="no InfiniBand/RoCE interface in the plan for this node")]
    ports = {p.ca: p for p in ctx.state.ib_ports}
    if not ports:
        return [Outcome("skip", evidence="no InfiniBand device (/sys/class/infiniband is empty)")]
    result = []
    for iface in wanted:
        port = ports.get(iface.hca or "")
        if port is None:
            result.append(Outcome("fail", f"{iface.hca}", "HCA missing", "present"))
            continue
        healthy = port.state.upper() == "ACTIVE" and port.physical_state.lower() == "linkup"
        fast = port.rate_gbps is None or port.rate_gbps >= iface.speed_gbps
        result.append(Outcome("pass" if healthy and fast else "fail", f"{iface.hca}/{port.port}",
                              f"{port.state}/{port.physical_state} {port.rate_gbps} Gb/s",
                              f"ACTIVE/LinkUp {iface.speed_gbps} Gb/s"))
    return result


def ib_counters(ctx: Context) -> list[Outcome]:
    if not ctx.state.ib_ports:
        return [Outcome("skip", evidence="no InfiniBand device (/sys/class/infiniband is empty)")]
    if ctx.state.interval_s <= 0:
        return [Outcome("skip", evidence="one sample only (--interval 0): no rates")]
    result = []
    for port in ctx.state.ib_ports:
        where = f"{port.ca}/{port.port}"
        rising = {c: ctx.state.rates.get(f"{where}/{c}", 0.0) for c in IB_ERROR_COUNTERS}
        rising = {c: r for c, r in rising.items() if r > 0}
        observed = ", ".join(f"{c} +{r:.2f}/s" for c, r in rising.items()) or "not rising"
        result.append(Outcome("fail" if rising else "pass", where, observed, "0/s", f"over {ctx.state.interval_s:g} s"))
    return result


def nccl(ctx: Context) -> list[Outcome]:
    if ctx.node is None or ctx.plan is None:
        return [NO_PLAN]
    if no_gpu_here(ctx):
        return [NO_GPU_HERE]
    wanted = {s.name: s.value for s in nccl_settings(ctx.plan, ctx.node)}
    if not wanted:
        return [Outcome("skip", evidence="the plan sets no NCCL variable for this node")]
    have = ctx.state.nccl_env
    if have is None:
        return [Outcome("warn", "/etc/gpunet/nccl.env", "missing", "present",
                        fix="gpunet render --target nccl, install nodes/<node>/etc/gpunet/nccl.env, source it "
                            "in the job prolog")]
    wrong = {k: (have.get(k), v) for k, v in wanted.items() if have.get(k) != v}
    if wrong:
        return [Outcome("fail", k, str(got), want) for k, (got, want) in wrong.items()]
    return [Outcome("pass", "nccl.env", f"{len(wanted)} settings as planned")]


def addresses_in_subnet(ctx: Context) -> list[Outcome]:
    """The gateway of the plan's management plane inside the node's management subnet."""
    if ctx.plan is None:
        return [NO_PLAN]
    mgmt = next((p for p in ctx.plan.planes if p.name == "management"), None)
    if mgmt is None or mgmt.gateway is None:
        return [Outcome("skip", evidence="no management gateway in the plan")]
    inside = IPv4Address(mgmt.gateway) in IPv4Network(mgmt.subnet)
    return [Outcome("pass" if inside else "fail", "gateway", mgmt.gateway, f"inside {mgmt.subnet}")]


HOST_CHECKS = [
    FunctionCheck("GN-CNT-01", "counters", "NIC error and drop counters not rising",
                  "ethtool -S {subject} | grep -Ei 'err|drop|discard'; check cable, optics and the switch port",
                  counters),
    FunctionCheck("GN-TCP-01", "tcp", "TCP retransmission ratio low",
                  "nstat -az TcpRetransSegs; find the lossy link: gpunet doctor on peers, ethtool -S", retransmissions),
    FunctionCheck("GN-TCP-02", "tcp", "TCP buffer maxima cover 2 x bandwidth x delay",
                  "sysctl -w {subject}='4096 131072 {expected}' (gpunet render --target sysctl)", tcp_buffers),
    FunctionCheck("GN-DNS-01", "names", "plan hostnames resolve to their planned addresses",
                  "fix /etc/hosts or DNS for {subject} (gpunet render --target hosts)", resolution),
    FunctionCheck("GN-SSH-01", "ssh", "sshd accepts keys only",
                  "set PasswordAuthentication no and KbdInteractiveAuthentication no (gpunet render --target "
                  "sshd), then sshd -t && systemctl reload ssh", sshd_passwords),
    FunctionCheck("GN-SEC-01", "security", "SELinux/AppArmor not in the way",
                  "check denials for the plan's ports; allow them in the policy", security_modules),
    FunctionCheck("GN-IB-01", "infiniband", "InfiniBand ports Active/LinkUp at the planned rate",
                  "ibstat {subject}; check the cable and the subnet manager (sminfo)", infiniband),
    FunctionCheck("GN-IB-02", "infiniband", "InfiniBand symbol errors and link downs not rising",
                  "perfquery -x for {subject}; reseat or replace the cable; check the switch port (ibportstate)",
                  ib_counters),
    FunctionCheck("GN-NCCL-01", "nccl", "NCCL environment as planned",
                  "export {subject}={expected} (gpunet render --target nccl)", nccl),
    FunctionCheck("GN-ADDR-02", "address", "management gateway inside its subnet",
                  "fix planes.management.gateway in the spec, then gpunet plan", addresses_in_subnet),
]
