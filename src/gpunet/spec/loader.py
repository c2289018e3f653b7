"""Read cluster.yaml into a Spec; every problem comes back located at file:line:col with a hint."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gpunet.errors import SpecError, SpecProblem
from gpunet.files.yamldoc import LimitError, load_limited, read_document
from gpunet.model.spec import Spec
from gpunet.model.types import DEVICE_PATTERN, HCA_PATTERN, MODEL_PATTERN
from gpunet.spec.checks import spec_problems

KeyPath = tuple[str | int, ...]
Mark = tuple[int, int]  # 1-based line, column

HINTS = {
    "missing": "add this key",
    "int_parsing": "write a whole number",
    "int_type": "write a whole number",
    "float_parsing": "write a number",
    "string_type": "write a text value (quote it if YAML reads it as a number)",
    "literal_error": "use one of the values listed",
    "ip_v4_network": "write an IPv4 network with prefix, e.g. 198.18.0.0/24 (host bits zero)",
    "ip_v6_network": "write an IPv6 network with prefix, e.g. fd00::/64",
    "ip_v4_address": "write an IPv4 address, e.g. 198.18.0.1",
    "ip_any_address": "write an IP address",
    "greater_than_equal": "raise the value",
    "less_than_equal": "lower the value",
    "too_short": "add at least one entry",
    "dict_type": "write a mapping (key: value lines)",
    "list_type": "write a list ([a, b] or '- ' lines)",
    "model_type": "write a mapping (key: value lines)",
    "string_pattern_mismatch": "use lowercase letters, digits and '-', starting with a letter",
    "int_from_float": "write a whole number",
    "tuple_type": "write a list ('- ' lines)",
    "invalid_key": "write keys as text (quote them if YAML reads them as numbers or yes/no)",
}
# What each constrained name is, for "is not a valid <what>", and how to write one.
PATTERN_NAMES = {
    DEVICE_PATTERN: ("interface name",
                     "a Linux interface name: 1-15 letters, digits, '_', '.' or '-' (no spaces or '/')"),
    HCA_PATTERN: ("RDMA device name", "as `ibv_devices` or `ibdev2netdev` shows it, e.g. mlx5_0"),
    MODEL_PATTERN: ("model name", "letters, digits, '.', '_', '+' and '-' without spaces, e.g. QM9700-64xNDR"),
}
# Model validators report at the model's path; these name the key at fault and how to fix it.
MODEL_ERRORS = {
    "is an InfiniBand speed": ("speed", "use an Ethernet speed such as 100G or 400G, or technology: infiniband"),
    "is not a private ASN": ("asn_base", "4200000000 (4-byte private, the default) or 64512 (2-byte private)"),
    "asn_last": ("asn_last", "a private ASN above asn_base in the same range, or leave it out (the range's top)"),
    "routing (BGP pools": ("routing", "remove routing from this plane"),
}


@dataclass
class SourceMap:
    """Where each key path of a YAML document starts, for error messages."""

    file: str
    marks: dict[KeyPath, Mark] = field(default_factory=dict)

    def locate(self, problem: SpecProblem) -> SpecProblem:
        path = problem.path
        while path and path not in self.marks:
            path = path[:-1]
        line, column = self.marks.get(path, (1, 1))
        return SpecProblem(problem.message, problem.path, problem.hint, self.file, line, column)


def load_spec(path: Path) -> tuple[Spec, SourceMap]:
    """Parse and validate a spec file; raises SpecError listing every located problem."""
    return parse_spec(read_document(path), str(path))


def parse_spec(text: str, file: str = "<spec>") -> tuple[Spec, SourceMap]:
    data, source = parse_yaml_document(text, file)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError([source.locate(_from_pydantic(e)) for e in real_errors(exc.errors())]) from None
    problems = spec_problems(spec)
    if problems:
        raise SpecError([source.locate(p) for p in problems])
    return spec, source


SPEC_NOT_A_MAPPING = ("the spec must be a YAML mapping with site, planes and groups",
                      "start from `gpunet init --example scalable-unit`")


def parse_yaml_document(text: str, file: str,
                        not_a_mapping: tuple[str, str] = SPEC_NOT_A_MAPPING) -> tuple[Any, SourceMap]:
    """A YAML mapping and where each of its key paths starts; a syntax error, a document that is
    not a mapping (`not_a_mapping`: message, hint) or a key given twice is a located SpecError."""
    source = SourceMap(file)
    try:
        root, data = load_limited(text)
    except yaml.YAMLError as exc:
        raise SpecError([_yaml_problem(exc, text, file)]) from None
    if root is None or not isinstance(data, dict):
        raise SpecError([SpecProblem(not_a_mapping[0], (), not_a_mapping[1], file, 1, 1)])
    duplicates: list[SpecProblem] = []
    _index(root, (), source, duplicates)
    if duplicates:
        raise SpecError(duplicates)
    return data, source


def _yaml_problem(exc: yaml.YAMLError, text: str, file: str) -> SpecProblem:
    mark = getattr(exc, "problem_mark", None)
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    if isinstance(exc, LimitError):
        return SpecProblem(exc.problem, (), exc.hint, file, line, col)
    message = getattr(exc, "problem", None) or str(exc)
    if isinstance(exc, yaml.reader.ReaderError):  # a control character: no mark, only a position
        before = text[:exc.position]
        line, col = before.count("\n") + 1, exc.position - before.rfind("\n")
        message = f"unacceptable character #x{exc.character:04x}: {exc.reason}"
    return SpecProblem(f"YAML syntax: {message}", (), "check indentation, colons and quotes on this "
                       "line or the one above", file, line, col)


def _index(node: yaml.Node, path: KeyPath, source: SourceMap, duplicates: list[SpecProblem]) -> None:
    source.marks.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            sub = (*path, key.value)
            mark = (key.start_mark.line + 1, key.start_mark.column + 1)
            if key.value in seen:
                duplicates.append(SpecProblem(f"key {key.value!r} appears twice", sub,
                                              "keep one; YAML would silently drop the first",
                                              source.file, *mark))
            seen.add(key.value)
            source.marks[sub] = mark
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:str":
                # a key such as 1 or yes reaches pydantic as int/bool: locate that path too
                source.marks.setdefault((*path, yaml.SafeLoader("").construct_object(key)), mark)
            _index(value, sub, source, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, (*path, i), source, duplicates)


def real_errors(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """Drop pydantic's "at least 1 item after validation, not 0" on a list whose items failed:
    the list has items, and their own errors say what is wrong."""
    above = {e["loc"][:i] for e in errors for i in range(len(e["loc"]))}
    return [e for e in errors if not (e["type"] == "too_short" and e["loc"] in above)]


def _from_pydantic(error: ErrorDetails) -> SpecProblem:
    path = tuple(p for p in error["loc"] if p != "[key]")
    kind = error["type"]
    message = error["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        return SpecProblem(f"unknown key {path[-1]!r}", path, _unknown_key_hint(path))
    if kind == "literal_error" and "[key]" in error["loc"]:
        return SpecProblem(f"unknown name {path[-1]!r}: {message}", path, HINTS[kind])
    if kind == "string_pattern_mismatch":  # the regex means little to a reader; the hint says it
        what, hint = PATTERN_NAMES.get(error.get("ctx", {}).get("pattern", ""), ("name", HINTS[kind]))
        return SpecProblem(f"{error['input']!r} is not a valid {what}", path, hint)
    for text, (key, hint) in MODEL_ERRORS.items():
        if kind == "value_error" and text in message:
            return SpecProblem(message, (*path, key), hint)
    return SpecProblem(message, path, HINTS.get(kind, _value_hint(message)))


def _value_hint(message: str) -> str:
    if "NodeSet" in message or "hostname" in message:
        return "write node names like gpu[001-032] or gpu[01-04],login01"
    if "speed" in message:
        return "e.g. 25G, 100G, 400G, or HDR/NDR/XDR on InfiniBand"
    if "ratio" in message:
        return "write down:up as '3:1' (from 1:1 to 64:1) or a number such as 3"
    if "DNS name" in message:
        return "labels of letters, digits and '-', joined by '.', e.g. su1.example or login01"
    if "unicast" in message:
        return "plan subnets in a private range, e.g. 10.20.0.0/16, or 198.18.0.0/15 for a lab"
    if "scope zone" in message:
        return "write the network alone, e.g. fd00:10::/64"
    if "kernel reserves" in message:
        return "use the NIC's own name as `ip link` shows it"
    return "see the README's spec reference"


def _unknown_key_hint(path: KeyPath) -> str:
    known = _fields_at(Spec, path[:-1])
    close = difflib.get_close_matches(str(path[-1]), known, n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"known keys here: {', '.join(known)}" if known else "remove it"


def _fields_at(model: Any, path: KeyPath) -> list[str]:
    """Field names of the model reached by following `path` through the Spec's annotations."""
    for step in path:
        model = _unwrap(model, step)
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def _unwrap(annotation: Any, step: str | int) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field_info = annotation.model_fields.get(str(step))
        return _strip_optional(field_info.annotation) if field_info else None
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (list, tuple):
        return _strip_optional(args[0])
    if origin is dict:
        return _strip_optional(args[1])
    return None


def _strip_optional(annotation: Any) -> Any:
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is not None and len(args) == 1 and get_origin(annotation) not in (list, tuple, dict):
        return args[0]
    return annotation
