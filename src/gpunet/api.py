"""Library entry points the CLI calls: one function per command, no printing."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from ClusterShell.NodeSet import NodeSet

from gpunet.bench import bench_nodes, pattern_rounds
from gpunet.bench.launch import TOOLS, NcclJob, pick_launcher
from gpunet.bench.run import BenchSetup, Progress, run_nccl, run_rounds
from gpunet.bench.store import Measurement, add_measurements, start_run
from gpunet.checks import Finding
from gpunet.checks.doctor import doctor_node
from gpunet.decide.catalog import Catalog
from gpunet.decide.cost import Costing, price_plan
from gpunet.design import design
from gpunet.errors import DesignError, SpecError, SpecProblem, UsageError
from gpunet.fleet import ClusterShellRunner, lab_runner
from gpunet.fleet.doctor import FleetDoctorReport, doctor_command, fold_doctor
from gpunet.fleet.groups import resolve_nodes
from gpunet.lab.build import node_argv, plan_digest
from gpunet.lab.state import LabState, lab_dir, read_state
from gpunet.model.io import read_plan
from gpunet.model.nodeset import describe
from gpunet.model.plan import Node, Plan
from gpunet.model.spec import Spec
from gpunet.model.state import NodeState
from gpunet.model.types import USER
from gpunet.probe.node import probe_node
from gpunet.render import TARGETS, file_mode, render_all
from gpunet.render.plan_files import PLAN_FILES, render_bom_csv, render_summary_md
from gpunet.render.plan_output import recover as recover_plan_output
from gpunet.render.plan_output import write_plan_set
from gpunet.files.write import write_files
from gpunet.runner import CommandRunner, run_local
from gpunet.spec.checks import spec_warnings
from gpunet.spec.examples import DEFAULT_EXAMPLE, example_text
from gpunet.spec.loader import SourceMap, load_spec, parse_spec


def load(spec_path: Path | None) -> tuple[Spec, SourceMap]:
    """A spec file, or the default built-in example when no path is given."""
    if spec_path is None:
        return parse_spec(example_text(DEFAULT_EXAMPLE), f"<example {DEFAULT_EXAMPLE}>")
    return load_spec(spec_path)


def validate_spec(spec_path: Path) -> tuple[Plan, list[SpecProblem]]:
    """Full validation: schema, cross-field checks and a design attempt (radix, subnet fit); and
    the warnings of what a running cluster would miss (monitoring, NTP, a scheduler)."""
    return design_spec(spec_path)


def plan_spec(spec_path: Path | None, previous: Path | None = None) -> Plan:
    """Design the plan of a spec; with `previous` (an earlier plan.json), keep its assignments."""
    return design_spec(spec_path, previous)[0]


def design_spec(spec_path: Path | None, previous: Path | None = None) -> tuple[Plan, list[SpecProblem]]:
    """plan_spec, with the spec's located warnings."""
    spec, source = load(spec_path)
    baseline = read_plan(previous) if previous is not None and previous.exists() else None
    if baseline is not None and baseline.site.name != spec.site.name:
        raise UsageError(f"{previous} is the plan of site {baseline.site.name!r} ({len(baseline.nodes)} nodes) and "
                         f"this spec is site {spec.site.name!r}: write to another directory (-o), or give --fresh "
                         "to replace it (the old plan is kept as plan.json.1)")
    try:
        plan = design(spec, baseline)
    except DesignError as exc:
        raise DesignError([source.locate(p) for p in exc.problems]) from None
    if baseline is not None:
        _refuse_dropped_nodes(baseline, plan, previous)
    return plan, [source.locate(w) for w in spec_warnings(spec)]


def _refuse_dropped_nodes(baseline: Plan, plan: Plan, previous: Path | None) -> None:
    dropped = [n.name for n in baseline.nodes if plan.node(n.name) is None]
    if dropped:
        raise UsageError(f"this spec drops {len(dropped)} node(s) that {previous} has: {describe(dropped)}; "
                         "give --fresh to accept (the old plan is kept as plan.json.1)")


def plan_into(spec_path: Path | None, out_dir: Path, *, fresh: bool, catalog: Catalog | None = None
              ) -> tuple[Plan, list[str], list[SpecProblem], Costing | None]:
    """`gpunet plan`: design against OUT/plan.json (unless fresh) and replace OUT's plan files as
    one set, the previous plan.json kept as plan.json.1; the changed files, the spec's warnings and,
    with a catalog, the priced bill of materials (in bom.csv and summary.md too)."""
    recover_plan_output(out_dir)  # a killed earlier run: its old or new set, before reading it
    plan, warnings = design_spec(spec_path, None if fresh else out_dir / "plan.json")
    costing = price_plan(plan, catalog) if catalog is not None else None
    return plan, write_plan(plan, out_dir, costing), warnings, costing


def load_plan(source: Path | None) -> Plan:
    """A plan.json as it is, or the plan of a spec (the built-in example when None)."""
    if source is not None and source.suffix == ".json":
        return read_plan(source)
    return plan_spec(source)


def render_plan(
    plan: Plan, out_dir: Path, nodes: str | None = None, targets: list[str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Render the chosen targets (all by default) for the chosen nodes (a NodeSet, all by
    default) under out_dir; returns every file rendered and those that changed on disk."""
    chosen = targets or list(TARGETS)
    unknown = [t for t in chosen if t not in TARGETS]
    if unknown:
        raise UsageError(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    picked = _pick_nodes(plan, nodes)
    files = render_all(plan, picked, chosen)
    return files, write_files(out_dir, files, file_mode)


def _pick_nodes(plan: Plan, nodes: str | None) -> list[Node]:
    if nodes is None:
        return list(plan.nodes)
    wanted = set(resolve_nodes(nodes, plan))
    missing = wanted - {n.name for n in plan.nodes}
    if missing:
        raise UsageError(f"not in the plan: {describe(sorted(missing))}")
    return [n for n in plan.nodes if n.name in wanted]


def doctor(
    plan_source: Path | None, node_name: str | None, *, peers: bool, interval: float,
    run: CommandRunner = run_local, root: Path = Path("/"), listen: bool = False,
    listening: frozenset[str] = frozenset(),
) -> tuple[NodeState, list[Finding]]:
    """gpunet.checks.doctor.doctor_node on a plan.json or spec (none: no plan to compare with)."""
    plan = load_plan(plan_source) if plan_source is not None else None
    return doctor_node(plan, node_name, peers=peers, interval=interval, run=run, root=root, listen=listen,
                       listening=listening)


def fleet_runner(*, lab: str | None = None, ssh_lab: str | None = None, plan: Path | None = None,
                 user: str | None = None, key: Path | None = None, fanout: int = 64,
                 timeout: float = 600) -> ClusterShellRunner:
    """Lab servers through ip netns exec, lab servers over real SSH with the lab key, or real nodes
    over SSH (at their management addresses when a plan is given)."""
    if fanout < 1:
        raise UsageError(f"--fanout {fanout}: at least one connection at a time")
    if user is not None and not USER.fullmatch(user):
        raise UsageError(f"--user {user!r} is not a user name (lowercase letters, digits, '_' and '-')")
    if lab:
        return lab_runner(lab, str(lab_dir(lab) / "uts"), timeout)
    if ssh_lab:
        state = _lab_state(ssh_lab)
        return ClusterShellRunner(user="root", key=str(lab_dir(ssh_lab) / "id_ed25519"),
                                  addresses=state.mgmt_addresses, fanout=fanout, command_timeout=timeout,
                                  ssh_options=("-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                                               "-o", "LogLevel=ERROR"))
    addresses = management_addresses(plan) if plan else {}
    return ClusterShellRunner(user=user, key=str(key) if key else None, addresses=addresses, fanout=fanout,
                              command_timeout=timeout)


def fleet_nodes(pattern: str, *, plan: Path | None = None, lab: str | None = None) -> NodeSet:
    """A NodeSet; with a plan (or a lab's), `@role:gpu`, `@leaf:NAME`, `@rail:N`, `@plane:NAME`
    and `@GROUP` name the Plan's nodes."""
    source = lab_dir(lab) / "plan.json" if lab else plan
    nodes = resolve_nodes(pattern, load_plan(source) if source else None)
    if lab:
        servers = _lab_state(lab).servers
        unknown = [n for n in nodes if n not in servers]
        if unknown:
            raise UsageError(f"not servers of lab {lab}: {describe(unknown)}; servers: {describe(list(servers))}")
    return nodes


def _lab_state(lab: str) -> LabState:
    state = read_state(lab)
    if state is None:
        raise UsageError(f"no lab {lab!r}; `gpunet lab up` builds one")
    return state


def fleet_doctor(runner: ClusterShellRunner, nodes: NodeSet, *, remote_plan: str, gpunet: Sequence[str],
                 peers: bool, interval: float) -> FleetDoctorReport:
    """`gpunet doctor --json` on every node of the NodeSet, findings folded across nodes."""
    return fold_doctor(runner.run(doctor_command(gpunet, remote_plan, peers, interval, str(nodes)), nodes))


def probe(interval: float, run: CommandRunner = run_local, root: Path = Path("/")) -> NodeState:
    return probe_node(run, root, (), interval)


def bench(
    *, plan_source: Path | None, lab: str | None, pattern: str, plane: str, nodes: str | None, seconds: int,
    db: Path, tool: str = "iperf3", nccl_test: str = "all_reduce_perf", launcher: str | None = None,
    congestion: str | None = "cubic", progress: Progress | None = None, retry_inconclusive: int = 1,
) -> tuple[int, list[Measurement]]:
    """A tool over a pattern of pairs (iperf3, ib_*_bw), each against the Plan's expectation, or one
    nccl-tests job over the nodes; stored in db. `congestion`: iperf3's TCP congestion control
    (None: the hosts' default); `retry_inconclusive`: rounds of re-measuring, one at a time, the
    pairs an end's saturation left inconclusive (not incast's: one pair alone is no incast)."""
    if tool not in TOOLS:
        raise UsageError(f"unknown tool {tool!r}; known: {', '.join(TOOLS)}")
    plan, setup = _bench_setup(plan_source, lab, plane, seconds, tool)
    setup = replace(setup, congestion=congestion, retries=0 if pattern == "incast" else retry_inconclusive)
    chosen = bench_nodes(plan, plane, nodes)
    rounds = pattern_rounds(plan, plane, pattern, chosen) if tool != "nccl" else []
    launch = (launcher or pick_launcher()) if tool == "nccl" else ""  # refused before a run is recorded
    run_id = start_run(db, plan_hash=plan_digest(plan), tool=nccl_test if tool == "nccl" else tool,
                       pattern="job" if tool == "nccl" else pattern,
                       arguments=f"plane={plane} seconds={seconds} nodes={nodes or 'all'}")
    if tool == "nccl":
        results = [run_nccl(plan, chosen, NcclJob(test=nccl_test, iterations=max(5, seconds * 10)), launch)]
        add_measurements(db, run_id, results)
    else:
        results = run_rounds(setup, rounds, progress or (lambda d, n, what: None),
                             on_round=lambda ms: add_measurements(db, run_id, ms))
    return run_id, results


def _bench_setup(plan_source: Path | None, lab: str | None, plane: str, seconds: int,
                 tool: str) -> tuple[Plan, BenchSetup]:
    if lab is None:
        plan = load_plan(plan_source)
        return plan, BenchSetup(plan=plan, on_node=_ssh_on(management_addresses_of(plan)), plane=plane,
                                seconds=seconds, tool=tool)
    if tool != "iperf3":
        raise UsageError(f"a lab emulates cables, not RDMA devices or GPUs: {tool} cannot run there (iperf3 can)")
    state = _lab_state(lab)
    plan = read_plan(lab_dir(lab) / "plan.json")
    return plan, BenchSetup(plan=plan, on_node=lambda n, c: node_argv(lab, n, c), plane=plane, seconds=seconds,
                            scale=state.scale_mbit_per_gbit)


def _ssh_on(addresses: dict[str, str]) -> Callable[[str, Sequence[str]], list[str]]:
    def argv(node: str, command: Sequence[str]) -> list[str]:
        return ["ssh", "-o", "BatchMode=yes", "--", addresses.get(node, node), shlex.join(command)]
    return argv


def management_addresses_of(plan: Plan) -> dict[str, str]:
    return {n.name: n.management_ip for n in plan.nodes if n.management_ip}


def management_addresses(source: Path) -> dict[str, str]:
    """node -> management address (what fleet tools connect to)."""
    return management_addresses_of(load_plan(source))


def write_plan(plan: Plan, out_dir: Path, costing: Costing | None = None) -> list[str]:
    """Write plan.json and the CSV/Markdown views (priced, given a costing); returns the files that changed."""
    renders = dict(PLAN_FILES)
    if costing is not None:
        renders |= {"bom.csv": partial(render_bom_csv, costing=costing),
                    "summary.md": partial(render_summary_md, costing=costing)}
    return write_plan_set(out_dir, {name: render(plan) for name, render in renders.items()})


__all__ = ["DesignError", "SpecError", "load", "plan_spec", "validate_spec", "write_plan"]
