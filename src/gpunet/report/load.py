"""Result files read for a report: bounded, parsed into their models, and held against the Plan.

A file from another plan (another site, or nodes, switches and cables this plan does not have) is
refused, naming the file and the first names it does not know: drawn on this plan's fabric it
would put faults on the wrong cables. (A shared bounded reader is being written; until it lands
each file is read here up to MAX_RESULT_BYTES.)"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from gpunet.errors import UsageError
from gpunet.fabric.cabling import CablingReport
from gpunet.fleet.doctor import FleetDoctorReport
from gpunet.localize.report import LocalizeReport
from gpunet.model.nodeset import NodeSetError, parse_nodeset
from gpunet.model.plan import Plan
from gpunet.report.inputs import CompareView, DoctorNode, DoctorResults, SimResults, SwitchResults
from gpunet.report.model import PlanIndex

MAX_RESULT_BYTES = 256 * 2**20  # a 12 500-node cabling check lists 370 000 cables: ~60 MB of JSON
Model = TypeVar("Model", bound=BaseModel)


def read_bounded(path: Path, limit: int = MAX_RESULT_BYTES) -> str:
    """A regular file's UTF-8 text, at most `limit` bytes (not a FIFO, a device or a directory)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{path}: not a regular file")
        raw = handle.read(limit + 1)
    if len(raw) > limit:
        raise UsageError(f"{path}: over {limit // 2**20} MiB, more than any result gpunet writes")
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text at byte {exc.start}") from None


def parsed(path: Path, model: type[Model], what: str) -> Model:
    try:
        return model.model_validate_json(read_bounded(path))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "top level"
        raise UsageError(f"{path}: not {what}: {where}: {first['msg']}") from None


def refuse_unknown(path: Path, plan: Plan, kind: str, unknown: Iterable[str]) -> None:
    """Refuse a file that names things the plan does not have, with the first three of them."""
    names = list(dict.fromkeys(unknown))
    if names:
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise UsageError(f"{path}: names {kind} that plan {plan.site.name!r} does not have ({shown}): a result of "
                         "another plan or site? Give the results of this plan's own run")


def _nodes(path: Path, text: str) -> list[str]:
    try:
        return list(parse_nodeset(text))
    except NodeSetError as exc:
        raise UsageError(f"{path}: {exc}") from None


def load_doctor(paths: Iterable[Path], plan: Plan) -> DoctorResults:
    """`doctor --json` files, each one node's or a fleet's (`doctor --fleet ... --json`)."""
    nodes, fleets = [], []
    for path in paths:
        data = _json_object(path)
        if "findings" in data and "node" in data:
            node = parsed(path, DoctorNode, "a `gpunet doctor --json` output")
            refuse_unknown(path, plan, "a node", [node.node] if plan.node(node.node) is None else [])
            nodes.append(node)
        else:
            fleet = parsed(path, FleetDoctorReport, "a `gpunet doctor --json` or `doctor --fleet --json` output")
            named = [n for f in fleet.findings for n in _nodes(path, f.nodes)]
            named += [n for folded in fleet.unreachable for n in _nodes(path, folded)]
            refuse_unknown(path, plan, "nodes", (n for n in named if plan.node(n) is None))
            fleets.append(fleet)
    return DoctorResults(nodes=tuple(nodes), fleets=tuple(fleets))


def _json_object(path: Path) -> dict[str, object]:
    try:
        data = json.loads(read_bounded(path))
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{path}: not JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a gpunet result (a JSON object)")
    return data


def load_cabling(path: Path, plan: Plan, index: PlanIndex) -> CablingReport:
    report = parsed(path, CablingReport, "a `gpunet cabling check --json` output")
    _known_planes(path, plan, report.planes)
    refuse_unknown(path, plan, "cables", (f"{c.a} {c.b}" for c, i in zip(report.cables, index.cables_of(report.cables),
                                                                         strict=True) if i is None))
    return report


def load_localize(path: Path, plan: Plan, index: PlanIndex) -> LocalizeReport:
    report = parsed(path, LocalizeReport, "a `gpunet localize --json` output")
    _known_planes(path, plan, [p.plane for p in report.planes] + [s.plane for s in report.suspects])
    refuse_unknown(path, plan, "cables", (s.cable for s in report.suspects if index.cable(s.cable) is None))
    return report


def load_switch(path: Path, plan: Plan, index: PlanIndex) -> SwitchResults:
    """Switch checks: {"findings": [...]} or a list of such documents, each finding naming its switch
    (a document's top-level "switch" names it for all its findings)."""
    data = _json_value(path)
    documents = data if isinstance(data, list) else [data]
    findings = [f | {"switch": f.get("switch", d.get("switch"))} for d in documents if isinstance(d, dict)
                for f in d.get("findings", []) if isinstance(f, dict)]
    if not findings and documents:
        _refuse_shape(path, documents)
    result = _validated(path, SwitchResults, {"findings": findings}, "switch check findings")
    refuse_unknown(path, plan, "switches", (f.switch for f in result.findings if f.switch not in index.switches))
    return result


def _json_value(path: Path) -> object:
    try:
        return json.loads(read_bounded(path))
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{path}: not JSON: {str(exc)[:200]}") from None


def _refuse_shape(path: Path, documents: list[object]) -> None:
    if not all(isinstance(d, dict) and isinstance(d.get("findings"), list) for d in documents):
        raise UsageError(f"{path}: not switch check findings: expected {{\"findings\": [...]}} (each finding "
                         "with a \"switch\")")


def _validated(path: Path, model: type[Model], data: object, what: str) -> Model:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"{path}: not {what}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None


def load_sim(path: Path, plan: Plan) -> SimResults:
    sim = parsed(path, SimResults, "simulated job times ({\"site\", \"jobs\": [...]})")
    if sim.site != plan.site.name:
        raise UsageError(f"{path}: simulates site {sim.site!r}, this plan is {plan.site.name!r}: a result of "
                         "another plan or site?")
    refuse_unknown(path, plan, "nodes", (n for job in sim.jobs for n in _nodes(path, job.nodes)
                                         if plan.node(n) is None))
    return sim


def load_compare(path: Path, plan: Plan) -> CompareView:
    view = parsed(path, CompareView, "a `gpunet compare --json` output")
    if plan.site.name not in {d.site for d in view.designs}:
        sites = ", ".join(sorted({d.site for d in view.designs}))
        raise UsageError(f"{path}: compares designs of site {sites}, none of them {plan.site.name!r}: a "
                         "comparison made for another plan or site?")
    return view


def _known_planes(path: Path, plan: Plan, planes: Iterable[str]) -> None:
    known = {p.name for p in plan.planes}
    refuse_unknown(path, plan, "planes", (p for p in planes if p not in known))

