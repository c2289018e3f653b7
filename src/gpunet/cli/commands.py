"""Where each command that lives in a module of its own is found, and the line `gpunet --help`
lists for it.

The listing is written out here so that `gpunet --help` imports none of those modules: importing
them all (the lab, the simulator, the renderers, numpy, networkx) tripled its start-up. The
summary is the first paragraph of the command's own help, exactly (line breaks too, which Rich
keeps); tests/cli/test_startup.py holds every summary to it.
"""

from __future__ import annotations

from typing import NamedTuple


class Lazy(NamedTuple):
    module: str  # imported when the command is named, not before
    attribute: str  # a typer.Typer (a group of commands) or one command's function
    summary: str  # the first paragraph of its help: what `gpunet --help` lists


LAZY: dict[str, Lazy] = {
    "lab": Lazy("gpunet.cli.lab", "app",
                "Build the Plan in Linux network namespaces, break it on purpose, tear it down."),
    "apply": Lazy("gpunet.cli.apply", "app",
                  "Push the rendered configuration with a backup, verification against the Plan and an automatic "
                  "revert unless confirmed."),
    "fleet": Lazy("gpunet.cli.fleet", "app",
                  "Run commands on many nodes through ClusterShell; copy files, capture packets, install gpunet."),
    "bench": Lazy("gpunet.cli.bench", "app",
                  "Measure the fabric against the Plan (iperf3, perftest, nccl-tests), keep the history."),
    "cabling": Lazy("gpunet.cli.cabling", "app",
                    "Check every cable against the plan with what the fabric reports (LLDP, ibnetdiscover)."),
    "switch": Lazy("gpunet.cli.switch", "app",
                   "Check the switches against the Plan: BGP sessions and ECMP, port MTU and state, LLDP."),
    "ibsim": Lazy("gpunet.cli.ibsim", "app",
                  "Simulate the plan's InfiniBand fabric (ibsim + opensm) for ibnetdiscover, perfquery, ibtracert, "
                  "and break it on purpose."),
    "localize": Lazy("gpunet.cli.localize", "localize",
                     "Ranked suspect cables, each with its evidence, a confidence and the fix: probing every\n"
                     "equal-cost path of a lab's routed planes (--lab) or a real fabric's (--probe with --plan),\n"
                     "InfiniBand port counters (--ibsim, or a saved --ibqueryerrors with --plan), switch port "
                     "counters\nfrom Prometheus (--prometheus with --plan) or from the switches over SSH (--switches "
                     "with --plan,\n"
                     "or with --lab).\n"
                     "Exit 1 when one is named, 0 when the fabric looks clean, 2 on bad input, 3 when it cannot "
                     "judge."),
    "doctor": Lazy("gpunet.cli.doctor", "doctor",
                   "Every applicable check on this node, or with NODES on each of them (their findings folded):\n"
                   "failures first, each with its fix. Exit 1 on a failure, 3 when a node could not be judged."),
    "probe": Lazy("gpunet.cli.doctor", "probe",
                  "Read this node as it is: links, addresses, routes, bonds, InfiniBand, counters, settings."),
    "exporter": Lazy("gpunet.cli.exporter", "exporter",
                     "Prometheus exporter: interfaces, TCP, bonds, InfiniBand/RoCE counters and drift from the "
                     "Plan;\n"
                     "with --fabric-ibqueryerrors or --ibsim also the fabric's port counters per planned cable."),
    "compare": Lazy("gpunet.cli.compare", "compare",
                    "Designs side by side per plane: what they are built of, cost and draw, carry, how far they "
                    "grow\n"
                    "and what one failure takes away; the rows that differ highlighted."),
    "report": Lazy("gpunet.cli.report", "report",
                   "Write one HTML page: the fabric drawn with every cable in its latest state, the findings "
                   "linked\n"
                   "to their place in the drawing, bill of materials, flows, and each result given (a result not\n"
                   "given is said to be missing, never shown as clean). Exit 0 when written, 2 on bad input (a\n"
                   "result of another plan included)."),
    "sim": Lazy("gpunet.cli.sim", "sim",
                "Simulated algbw and busbw per message size (nccl-tests' formulas), the cables that set the\n"
                "pace, and the job on a non-blocking fabric of the same NICs; what-ifs side by side."),
    "place": Lazy("gpunet.cli.place", "place_job",
                  "The nodes to give the job (packed under leaves, whole scalable units, rail-aligned), its\n"
                  "predicted busbw and spine share, against as many free nodes taken at random."),
}
