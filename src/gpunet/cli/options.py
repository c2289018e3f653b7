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

Old spellings keep working for one release, each with a line on stderr (DEPRECATED below).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

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
NodesArg = Annotated[str, typer.Argument(metavar="NODES", help=NODES_HELP, show_default=False)]
OptionalNodesArg = Annotated[str | None, typer.Argument(metavar="[NODES]", help=NODES_HELP, show_default=False)]
UserOpt = Annotated[str | None, typer.Option("--user", help="SSH user (default: yours, or the ssh_config's).")]
KeyOpt = Annotated[Path | None, typer.Option("--key", help="SSH private key.")]
FanoutOpt = Annotated[int, typer.Option("--fanout", help="Connections at once.")]
ConnectTimeoutOpt = Annotated[float, typer.Option(
    "--connect-timeout", help="Seconds to wait for each node's SSH connection (a dead node costs this much).")]
OutOpt = Annotated[Path, typer.Option("-o", "--out", help="Output directory.")]

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
