"""Flow-control and congestion counters of a NIC: per-priority and global pause frames (mlx5 `ethtool -S`
names), ECN marks, the RoCE congestion-notification counters of /sys/class/infiniband/<hca>/ports/<p>/
hw_counters, and InfiniBand's PortXmitWait. Read on a node through one command that also works on a
recorded tree (`root`), so a benchmark samples both ends before and after each pair."""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpunet.errors import ParseError
from gpunet.files.inputs import integer
from gpunet.probe.parsers import parse_ethtool_stats

TOOL = "flow counter sample"
# mlx5 names: rx/tx_prio<N>_pause[_duration|_transition], the global (802.3x) pause counters and their
# transitions, the pause-storm watchdog's events (the NIC stopped sending pause: a storm, not loss), per-
# priority discards and ECN marks, per-ring ECN marks (summed), and the RDMA congestion counters. The older
# mlx5 driver (3.0-1, Ubuntu 16.04's kernel) printed the 802.3x pause frames as pause_ctrl_rx/tx: the same
# register as rx/tx_pause_ctrl_phy (tests/fixtures/ethtool_stats/cx4lx_kernel4.4_legacy_names_no_per_priority).
KEPT = re.compile(
    r"(rx|tx)_prio\d_pause(_duration|_transition)?|(rx|tx)_(global_pause|pause_ctrl_phy)(_duration)?"
    r"|pause_ctrl_(rx|tx)|rx_global_pause_transition|tx_pause_storm_(warning|error)_events"
    r"|rx_prio\d_(discards|buf_discard|cong_discard|marked)|(rx|tx)_discards_phy|rx_ecn_mark"
    r"|np_ecn_marked_roce_packets|np_cnp_sent|rp_cnp_handled|rp_cnp_ignored|port_xmit_wait")
RING_ECN = re.compile(r"rx\d+_ecn_mark")
PAUSE = re.compile(r"(rx|tx)_(prio\d_pause|global_pause|pause_ctrl_phy)$|pause_ctrl_(rx|tx)$|port_xmit_wait")
CONGESTION = ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rx_ecn_mark")
REPLAY = "var/lib/gpunet/replay/ethtool-S"  # under a root other than /: a recorded `ethtool -S` per device
# One argv for both ends: POSIX sh, the root and the devices as arguments, never inside the script.
SAMPLE_SCRIPT = r"""root=$1; shift
for arg; do
  case $arg in
    eth=*) dev=${arg#eth=}; printf '@ethtool %s\n' "$dev"
      if [ "$root" = / ]; then ethtool -S "$dev" 2>/dev/null; else cat "$root/%s/$dev" 2>/dev/null; fi ;;
    ib=*) hca=${arg#ib=}
      for f in "$root"/sys/class/infiniband/"$hca"/ports/*/counters/port_xmit_wait \
               "$root"/sys/class/infiniband/"$hca"/ports/*/hw_counters/*; do
        [ -f "$f" ] && printf '@file %s %s\n' "${f#"$root"}" "$(cat "$f")"
      done ;;
  esac
done
""".replace("%s/$dev", REPLAY + "/$dev")


def sample_argv(root: str, netdevs: Sequence[str], hcas: Sequence[str]) -> list[str]:
    """The command that prints a node's flow counters (names are the Plan's validated device names)."""
    return ["sh", "-c", SAMPLE_SCRIPT, "gpunet-flow", root, *(f"eth={d}" for d in netdevs),
            *(f"ib={h}" for h in hcas)]


def flow_counters(stats: dict[str, int]) -> dict[str, int]:
    """The flow-control and congestion counters among a NIC's statistics; per-ring ECN marks summed."""
    kept = {name: value for name, value in stats.items() if KEPT.fullmatch(name)}
    rings = [value for name, value in stats.items() if RING_ECN.fullmatch(name)]
    return kept | ({"rx_ecn_mark": sum(rings)} if rings and "rx_ecn_mark" not in kept else {})


def parse_ethtool_flow(text: str) -> dict[str, int]:
    """`ethtool -S` of a NIC that reports flow-control counters (mlx5); other NICs are refused."""
    counters = flow_counters(parse_ethtool_stats(text))
    if not any(PAUSE.match(name) for name in counters):
        raise ParseError("ethtool -S", 1, "no pause counter (rx/tx_prioN_pause, *_pause_ctrl_phy, "
                                          "pause_ctrl_rx/tx): not an mlx5-style output")
    return counters


def parse_flow_sample(text: str) -> dict[str, dict[str, int]]:
    """SAMPLE_SCRIPT's output: device (netdev, or "hca/port") -> its flow counters. A netdev whose
    statistics could not be read (no ethtool, no such device) has an empty dict."""
    result: dict[str, dict[str, int]] = {}
    sections: list[tuple[str, list[str]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("@ethtool "):
            sections.append((line[len("@ethtool "):].strip(), []))
        elif line.startswith("@file "):
            _file_line(result, line, number)
        elif sections:
            sections[-1][1].append(line)
        elif line.strip():
            raise ParseError(TOOL, number, f"outside any device section: {line.strip()[:60]!r}")
    for device, lines in sections:
        body = "\n".join(lines)
        result[device] = flow_counters(parse_ethtool_stats(body)) if body.strip() else {}
    return result


def _file_line(result: dict[str, dict[str, int]], line: str, number: int) -> None:
    """'@file /sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent 12' into result["mlx5_0/1"]."""
    match = re.fullmatch(r"@file /sys/class/infiniband/([^/\s]+)/ports/(\d+)/(?:hw_)?counters/(\w+) (\d+)", line)
    if match is None:
        raise ParseError(TOOL, number, f"not a counter file line: {line[:80]!r}")
    if KEPT.fullmatch(match[3]):
        result.setdefault(f"{match[1]}/{match[2]}", {})[match[3]] = integer(match[4], TOOL, number)


def growth(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, int]:
    """"device:counter" -> how much it grew between two samples (counters present in both and grown)."""
    grown = {}
    for device, counters in after.items():
        for name, value in counters.items():
            old = before.get(device, {}).get(name)
            if old is not None and value > old:
                grown[f"{device}:{name}"] = value - old
    return grown


def is_pause(key: str) -> bool:
    return bool(PAUSE.match(key.rsplit(":", 1)[-1]))


def is_congestion(key: str) -> bool:
    return key.rsplit(":", 1)[-1] in CONGESTION
