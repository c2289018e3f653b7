"""YAML read with limits enforced while it is composed, before the cost is paid.

PyYAML composes aliases as shared nodes, so a nine-level "billion laughs" document is a few
hundred bytes and a few hundred nodes; the cost comes later, when anything walks the values
(the key index, pydantic) and every alias is expanded again. Here each node's expanded size is
counted as the composer finishes it (an alias adds the size of what it names), so the document
is refused at the limit, in time linear in its text. Nesting is bounded before PyYAML's
recursive composer can exhaust the stack, the text is bounded before it is read, and merge
keys (`<<`) are refused with their location: what a merged key overrides is hard to see in a
review, and one located error per key is what a spec promises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpunet.errors import ParseError, SpecError, SpecProblem, UsageError
from gpunet.files.inputs import read_bytes, text_of

MAX_DOCUMENT_BYTES = 256 * 1024  # a 100k-GPU spec is a few kB; PyYAML composes ~0.2 MB/s of keys
MAX_EXPANDED_NODES = 20_000  # values after every alias is expanded; a spec has hundreds
MAX_DEPTH = 64
MAX_NUMBER_CHARS = 64  # an int, float or timestamp longer than this is refused before it is converted
NUMERIC_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("int", "float", "timestamp")}
MERGE_TAG = "tag:yaml.org,2002:merge"


TOO_MANY = (f"the document expands to more than {MAX_EXPANDED_NODES} values (aliases counted each time they "
            "are used)", "write the values out; a spec needs far fewer (NodeSets name thousands of nodes in one value)")


class LimitError(yaml.YAMLError):
    """A limit was reached, or a value could not be built; carries the mark of the node."""

    def __init__(self, problem: str, hint: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem)
        self.problem, self.hint, self.problem_mark = problem, hint, mark


class LimitedLoader(yaml.SafeLoader):
    """SafeLoader that counts expanded nodes and depth while composing, and refuses merge keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}
        self._depth = self._total = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise LimitError(f"nesting deeper than {MAX_DEPTH} levels", "flatten the document",
                             self.peek_event().start_mark)  # type: ignore[no-untyped-call]
        alias = self.check_event(yaml.AliasEvent)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        self._sizes.setdefault(id(node), 1)
        # Every value read, or named again by an alias, as it comes: stops early in one long list.
        self._total += self._sizes[id(node)] if alias else 1
        if self._total > MAX_EXPANDED_NODES:
            raise LimitError(*TOO_MANY, node.start_mark if node else None)
        return node

    def compose_sequence_node(self, anchor: Any) -> yaml.SequenceNode:
        node = super().compose_sequence_node(anchor)
        self._count(node, node.value)
        return node

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        node = super().compose_mapping_node(anchor)
        for key, _ in node.value:
            if key.tag == MERGE_TAG:
                raise LimitError("merge keys (<<) are not supported", "write the keys out in full; an alias "
                                 "(*name) of a whole value still works", key.start_mark)
        self._count(node, [item for pair in node.value for item in pair])
        return node

    def compose_scalar_node(self, anchor: Any) -> yaml.ScalarNode:
        """PyYAML converts sexagesimal ints (1:00:00...) and long digit runs in quadratic time."""
        node = super().compose_scalar_node(anchor)
        if node.tag in NUMERIC_TAGS and len(node.value) > MAX_NUMBER_CHARS:
            raise LimitError(f"a number of {len(node.value)} characters", f"write numbers of at most "
                             f"{MAX_NUMBER_CHARS} characters; quote the value if it is text", node.start_mark)
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """A value the constructor cannot build (2001-13-45 as a date, !!int "abc") is a located
        problem, not a traceback."""
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, KeyError, TypeError, OverflowError) as exc:
            raise LimitError(f"cannot read this value as {node.tag.rpartition(':')[2]}: {exc}",
                             "quote the value if it is text", node.start_mark) from None

    def _count(self, node: yaml.Node, children: list[yaml.Node]) -> None:
        size = 1 + sum(self._sizes.get(id(child), 1) for child in children)
        if size > MAX_EXPANDED_NODES:
            raise LimitError(*TOO_MANY, node.start_mark)
        self._sizes[id(node)] = size


def load_limited(text: str) -> tuple[yaml.Node | None, Any]:
    """The composed node graph (for locations) and the constructed values of one document."""
    if len(text.encode(errors="replace")) > MAX_DOCUMENT_BYTES:
        raise LimitError(f"the document is over gpunet's limit of {MAX_DOCUMENT_BYTES} bytes", "a spec is a "
                         "few kB: name nodes with NodeSets (gpu[0001-2048])", None)
    loader = LimitedLoader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    finally:
        loader.dispose()
    return root, data


def read_document(path: Path, what: str = "spec") -> str:
    """A file's text through the one bounded reader (a regular file, refused from its size before
    it is read); SpecError located at the file otherwise."""
    try:
        raw = read_bytes(path, MAX_DOCUMENT_BYTES, what)
    except UsageError as exc:
        raise SpecError([SpecProblem(str(exc).removeprefix(f"{path}: "), (), "a spec is a few kB: name nodes "
                                     "with NodeSets" if "limit" in str(exc) else "check the path", str(path), 1,
                                     1)]) from None
    try:
        return text_of(raw, what, strict=True)
    except ParseError as exc:
        raise SpecError([SpecProblem(str(exc).split(": ", 2)[-1], file=str(path), line=exc.line, column=1,
                                     hint=f"save the {what} as UTF-8 text")]) from None
