"""`gpunet apply run|status|rollback|install-key`: push the rendered configuration safely."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from gpunet.cli.console import cell, print_table, printable, shown, stderr, stdout
from gpunet.cli.errors import EXIT_FINDINGS, handles_errors, outcome_code
from gpunet.cli.options import (
    ApplyTargetsOpt,
    ConnectTimeoutOpt,
    FanoutOpt,
    JsonOpt,
    KeyOpt,
    LabSshOpt,
    NodesArg,
    PlanOpt,
    UserOpt,
    chosen_targets,
)
from gpunet.model.nodeset import fold

if TYPE_CHECKING:
    from gpunet.api.apply import ApplyReport, NodeDryRun, Reply

app = typer.Typer(no_args_is_help=True, help="Push the rendered configuration with a backup, verification "
                                              "against the Plan and an automatic revert unless confirmed.")

@app.command("run")
@handles_errors
def run(
    nodes: NodesArg, lab: LabSshOpt = None, plan: PlanOpt = None, target: ApplyTargetsOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds each node waits for its confirmation "
                                                             "before its guard reverts it.")] = 120,
    canary: Annotated[int, typer.Option("--canary", help="Nodes in the first batch.")] = 1,
    batch: Annotated[int, typer.Option("--batch", help="Nodes per batch after the canary.")] = 8,
    max_fail: Annotated[int, typer.Option("--max-fail", help="Failed nodes the rollout tolerates before it "
                                                             "stops.")] = 0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print each file's diff and the commands; change "
                                                            "nothing.")] = False,
    user: UserOpt = None, key: KeyOpt = None, fanout: FanoutOpt = 64, connect_timeout: ConnectTimeoutOpt = 10,
    as_json: JsonOpt = False,
) -> None:
    """Back up, write, apply, verify with the doctor, confirm over a new SSH connection; revert otherwise.

    Canary first, then batches; stops once more than --max-fail nodes failed. Exit 1 unless every
    node ended on the new configuration (3 when the ones that did not could not be reached)."""
    from gpunet.api import apply as applying

    targets = applying.targets_of(chosen_targets(target, applying.TARGETS))  # before any node is reached
    plan_model, remote, reached = applying.reach(lab=lab, plan=plan, user=user, key=key, fanout=fanout,
                                                 connect_timeout=connect_timeout)
    wanted = reached.nodes(nodes)
    if dry_run:
        _print_dry_run(applying.dry_run(plan_model, wanted, remote, targets), as_json)
        return
    options = applying.ApplyOptions(targets=targets, timeout_s=timeout, canary=canary, batch=batch,
                                    max_fail=max_fail)
    with stderr.status("applying…", spinner="dots") as spinner:
        report = applying.run(plan_model, wanted, remote, options,
                              progress=lambda step, done, total: spinner.update(f"{step} ({done}/{total} done)"))
    _print_report(report, as_json)
    unreached = [n for n in report.nodes if n.outcome == "unreachable"]
    others = [n for n in report.nodes if n.outcome not in ("applied", "unreachable")]
    raise typer.Exit(outcome_code(findings=bool(others), unjudged=bool(unreached)))


def _print_report(report: ApplyReport, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.model_dump(), indent=1))
        return
    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for n in report.nodes:
        failures = f" [new failures: {', '.join(n.new_failures)}]" if n.new_failures and n.outcome != "applied" else ""
        groups[n.outcome, n.configuration, n.reason + failures].append(n.node)
    table = Table("nodes", "outcome", "configuration", "why", title=f"gpunet apply ({len(report.nodes)} nodes, "
                                                                    f"batches {' → '.join(report.batches)})")
    for (outcome, configuration, reason), names in groups.items():
        style = "green" if outcome == "applied" else "yellow" if outcome in ("reverted", "not-started") else "red"
        table.add_row(cell(fold(names)), f"[{style}]{outcome}[/{style}]", cell(configuration), cell(reason))
    print_table(table)
    for n in report.nodes:
        if n.previous:
            stdout.print(f"{n.node}: {escape(printable(n.previous))}", highlight=False)


def _print_dry_run(results: list[NodeDryRun], as_json: bool) -> None:
    if as_json:
        print(json.dumps([r.model_dump() for r in results], indent=1))
        return
    for r in results:
        if r.error:
            stdout.print(f"[red]{r.node}[/red]: {escape(printable(r.error))}", highlight=False)
            continue
        changed = [f for f in r.files if f.diff]
        stdout.print(f"[bold]{shown(r.node)}[/bold]: {len(changed)} of {len(r.files)} files change", highlight=False)
        for f in changed:  # the node's side of a diff is its text: sanitised like every such text
            print(printable(f.diff), end="" if f.diff.endswith("\n") else "\n")
        for line in r.sysctl:
            print(f"  sysctl {printable(line, keep='')}")
        for line in r.runtime:
            print(f"  would run: {line}")


@app.command("status")
@handles_errors
def status(nodes: NodesArg, lab: LabSshOpt = None, plan: PlanOpt = None, user: UserOpt = None, key: KeyOpt = None,
           fanout: FanoutOpt = 64, connect_timeout: ConnectTimeoutOpt = 10, as_json: JsonOpt = False) -> None:
    """How each node's last apply ended: on the new or the old configuration, and why.

    A transaction found interrupted with nobody looking after it (its guard killed, the node
    restarted) is reverted first, and said so."""
    from gpunet.api import apply as applying

    _, remote, reached = applying.reach(lab=lab, plan=plan, user=user, key=key, fanout=fanout,
                                        connect_timeout=connect_timeout)
    wanted = reached.nodes(nodes)
    _print_states(applying.status(remote, wanted), as_json)


@app.command("rollback")
@handles_errors
def rollback(nodes: NodesArg, lab: LabSshOpt = None, plan: PlanOpt = None, user: UserOpt = None, key: KeyOpt = None,
             fanout: FanoutOpt = 64, connect_timeout: ConnectTimeoutOpt = 10, as_json: JsonOpt = False) -> None:
    """Revert, now, the apply each node is waiting to have confirmed (a confirmed one stays)."""
    from gpunet.api import apply as applying

    _, remote, reached = applying.reach(lab=lab, plan=plan, user=user, key=key, fanout=fanout,
                                        connect_timeout=connect_timeout)
    wanted = reached.nodes(nodes)
    _print_states(applying.rollback(remote, wanted), as_json)


def _print_states(replies: dict[str, Reply], as_json: bool) -> None:
    if as_json:
        print(json.dumps({n: r.data if r.ok else {"error": r.error} for n, r in replies.items()}, indent=1))
    else:
        groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for n, r in replies.items():
            d = r.data
            row: tuple[str, ...] = (("error", r.error, "", "") if not r.ok else
                   (str(d.get("state") or "never applied"), str(d.get("configuration", "")), str(d.get("txid") or ""),
                    str(d.get("reason") or "") + (f" (interrupted at {d['interrupted_at']})"
                                                  if d.get("interrupted_at") else "")))
            groups[row].append(n)
        table = Table("nodes", "last apply", "configuration", "transaction", "why")
        for row, names in groups.items():
            table.add_row(cell(fold(names)), *(cell(c) for c in row))
        print_table(table)
    if any(not r.ok or r.data.get("state") == "revert-failed" for r in replies.values()):
        raise typer.Exit(outcome_code(findings=any(r.reached and (not r.ok or r.data.get("state") == "revert-failed")
                                                   for r in replies.values()),
                                      unjudged=any(not r.reached for r in replies.values())))


@app.command("install-key")
@handles_errors
def install_key(
    nodes: NodesArg,
    pubkey: Annotated[Path, typer.Option("--pubkey", help="The admin's public key.")] = Path("~/.ssh/id_ed25519.pub"),
    plan: PlanOpt = None, user: UserOpt = None, as_json: JsonOpt = False,
) -> None:
    """Put the admin's public key on nodes that still take a password (asked per node, as ssh-copy-id).

    Run it before applying the keys-only sshd: apply refuses a node the key does not log in to."""
    from gpunet.api import apply as applying

    failed = applying.install_key(nodes, pubkey, plan=plan, user=user, before_each=lambda node: stderr.print(
        f"{node}: installing {pubkey} (ssh asks for the password)", highlight=False))
    if as_json:
        print(json.dumps({"failed": failed}))
    if failed:
        stderr.print(f"[red]not installed[/red] on {shown(fold(failed))}", highlight=False)
        raise typer.Exit(EXIT_FINDINGS)
