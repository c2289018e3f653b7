"""The one option vocabulary: every command declares its options from here, so an option means the
same thing wherever it appears (README, "Options").

    --json        print JSON (errors too: one JSON body, the same exit code)
    --plan FILE   the plan.json (or spec) to read; nodes are reached at its management addresses
    --lab ID      this lab; how it is reached (SSH with the lab's key, or ip netns exec) follows the
                  command's nature and its help says which
    --ibsim ID    this simulated InfiniBand fabric
    --rail N      only rail N's NICs (a rail-optimized plane's rail, numbered from 0)
    --pairs N     at most N pairs, a sample that still spans the rails and leaves
    NODES         a NodeSet, always positional: gpu[001-032],login01, and with a plan @role:gpu ...
    --target T    render targets, comma-separated or repeated (-t a,b = -t a -t b), in every command
                  that takes them; an unknown one is bad input naming the valid ones

Old spellings keep working for one release, each with a line on stderr (DEPRECATED below).
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from gpunet.errors import UsageError

NODES_HELP = ("NodeSet: gpu[001-032],login01; with a plan or lab also @role:gpu, @leaf:NAME, @rail:N, @plane:NAME, "
              "@GROUP.")


def _lab(transport: str, required: bool = False) -> Any:
    return typer.Option("--lab", metavar="ID", show_default=False,
                        help=f"This lab ({'required; ' if required else ''}`gpunet lab up` built it): {transport}.")


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables; errors as one JSON body.")]
PlanOpt = Annotated[Path | None, typer.Option(
    "--plan", metavar="FILE", show_default=False,
    help="The plan.json (or spec) to read; nodes are reached over SSH at its management addresses.")]
LabSshOpt = Annotated[str | None, _lab("its servers over real SSH with the lab's key, as real nodes are reached")]
LabExecOpt = Annotated[str | None, _lab("inside its namespaces (ip netns exec)")]
LabIdOpt = Annotated[str, _lab("the lab this command acts on", required=True)]
IbsimOpt = Annotated[str | None, typer.Option(
    "--ibsim", metavar="ID", show_default=False, help="This simulated InfiniBand fabric (`gpunet ibsim up`).")]
IbsimIdOpt = Annotated[str, typer.Option(
    "--ibsim", metavar="ID", show_default=False,
    help="The simulated InfiniBand fabric this command acts on (required; 1-4 lowercase letters or digits).")]
RailOpt = Annotated[int | None, typer.Option(
    "--rail", metavar="N", min=0, show_default=False,
    help="Only rail N's NICs (rails numbered from 0, as in the Plan).")]
PairsOpt = Annotated[int | None, typer.Option(
    "--pairs", metavar="N", min=1, show_default=False,
    help="At most N pairs: a sample that still spans the rails, leaves and path classes (a short run).")]
SliceOpt = Annotated[str | None, typer.Option(
    "--slice", metavar="K/N|next/N", show_default=False,
    help="Only slice K of the N slices of the fabric pattern's cover (every node on the plane), or next/N: the "
         "slice after the last one stored in the database (`bench schedule` renders units that run this).")]
SliceSizeOpt = Annotated[str, typer.Option(
    "--slice-size", metavar="class|PAIRS|TIME",
    help="How the cover is cut into slices: class (one pair class a slice: plane, path class, rail), at most "
         "PAIRS pairs (40), or at most TIME estimated (90s, 30m, 2h).")]
DbOpt = Annotated[Path | None, typer.Option(
    "--db", help="SQLite file (default: this user's, $XDG_STATE_HOME/gpunet/bench.sqlite, "
                 "~/.local/state/gpunet/bench.sqlite without it).")]
NodesArg = Annotated[str, typer.Argument(metavar="NODES", help=NODES_HELP, show_default=False)]
OptionalNodesArg = Annotated[str | None, typer.Argument(metavar="[NODES]", help=NODES_HELP, show_default=False)]
UserOpt = Annotated[str | None, typer.Option("--user", help="SSH user (default: yours, or the ssh_config's).")]
KeyOpt = Annotated[Path | None, typer.Option("--key", help="SSH private key.")]
FanoutOpt = Annotated[int, typer.Option("--fanout", help="Connections at once.")]
ConnectTimeoutOpt = Annotated[float, typer.Option(
    "--connect-timeout", help="Seconds to wait for each node's SSH connection (a dead node costs this much).")]
OutOpt = Annotated[Path, typer.Option("-o", "--out", help="Output directory.")]

# The render targets, written out so `--help` need not import the renderers (tests hold them to
# gpunet.api.plans.TARGETS and gpunet.api.apply.TARGETS).
RENDER_TARGETS = ("netplan, networkmanager, sysctl, nftables, firewalld, sshd, hosts, nccl, ntp, roce_qos, "
                  "ssh_config, slurm, ansible, clustershell, prometheus, grafana, frr, sonic, nvue")
APPLY_TARGETS = "netplan, networkmanager, sysctl, nftables, sshd, hosts, nccl, ntp"


def _targets(choices: str, default: str) -> Any:
    return typer.Option("--target", "-t", metavar="TARGET[,TARGET...]", show_default=False,
                        help=f"Render targets, comma-separated or repeated (-t a,b or -t a -t b); default {default}: "
                             f"{choices}.")


RenderTargetsOpt = Annotated[list[str] | None, _targets(RENDER_TARGETS, "all")]
ApplyTargetsOpt = Annotated[list[str] | None, _targets(APPLY_TARGETS, "netplan, sysctl, nftables, sshd")]


def chosen_targets(given: Sequence[str] | None, known: Collection[str]) -> list[str]:
    """--target's values as one list, in order, each once: `a,b` and `-t a -t b` alike; empty when
    none was given (the command's default). An unknown one is bad input (exit 2) naming the valid ones."""
    chosen = list(dict.fromkeys(t.strip() for value in given or () for t in value.split(",") if t.strip()))
    unknown = [t for t in chosen if t not in known]
    if unknown:
        raise UsageError(f"--target: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    return chosen

NODES = "NODES"  # in DEPRECATED: the old option's value becomes the positional NodeSet

# Command (its first one or two words) -> old spelling -> new one, for one release.
DEPRECATED: dict[tuple[str, ...], dict[str, str]] = {
    ("lab",): {"--id": "--lab"},
    ("ibsim",): {"--id": "--ibsim"},
    ("fleet",): {"--ssh-lab": "--lab"},
    ("apply",): {"--ssh-lab": "--lab"},
    ("doctor",): {"--ssh-lab": "--lab", "--fleet": NODES},
    ("cabling", "check"): {"--nodes": NODES},
    ("bench", "run"): {"--nodes": NODES},
    ("exporter",): {"--fabric-ibsim": "--ibsim"},
}
REMOVED_IN = "0.3"


def modernize(args: Sequence[str]) -> list[str]:
    """The command line with old spellings replaced, each said once on stderr."""
    replacing = next((v for k, v in DEPRECATED.items() if tuple(args[:len(k)]) == k), None)
    if not replacing:
        return list(args)
    out: list[str] = []
    words = iter(args)
    for word in words:
        if word == "--":
            out += [word, *words]
            break
        old, _, value = word.partition("=")
        new = replacing.get(old)
        if new is None:
            out.append(word)
            continue
        _say(old, new)
        if new == NODES:
            out.append(value or next(words, ""))
        else:
            out.append(f"{new}={value}" if value else new)
    return out


def _say(old: str, new: str) -> None:
    instead = "the NODES argument" if new == NODES else new
    print(f"gpunet: {old} is deprecated, use {instead} (the old spelling goes in {REMOVED_IN})", file=sys.stderr)
