"""A saved ibnetdiscover file read and parsed, bounded; `main` is the process
fabric/collect.ib_file_reader starts to parse a large file on the other core while the plan is read
(also `python -m gpunet.fabric.saved_ibnetdiscover FD PATH`).

The child writes one marshal'd tuple to stdout: ("rows", nodes, links), the parser's plain tuples,
or ("refused", message) for a file the reader or parser refuses. It ignores Ctrl-C (its parent
handles it and ends the child) and ends itself as soon as its parent is gone (a pipe whose other
end only the parent holds, and never writes, reaches end of file), rather than parsing on for
nobody."""

from __future__ import annotations

import marshal
import os
import signal
import sys
import threading
from pathlib import Path

from gpunet.errors import ParseError, UsageError
from gpunet.fabric.ibnetdiscover import NodeRow, Row, Rows, parse_rows
from gpunet.files.inputs import read_text

MAX_IBNETDISCOVER_BYTES = 1 << 30  # 12 500 servers (100k GPUs): about 41 MB; 125 000 (1M GPUs): 256 MB
ORPHANED = 3  # the child's exit status once its parent is gone


def saved_rows(path: Path) -> Rows:
    """The file's parse; UsageError naming the file and line of what is refused."""
    try:
        return parse_rows(read_text(path, MAX_IBNETDISCOVER_BYTES, "saved ibnetdiscover output"))
    except ParseError as exc:
        raise UsageError(f"{path}: line {exc.line}: {str(exc).split(': ', 2)[-1]}") from None


def _end_with_parent(parent_alive: int) -> None:
    """Block on the pipe until the parent closes its end or dies, then end this process at once."""
    while os.read(parent_alive, 1):
        pass
    os._exit(ORPHANED)


def main(argv: list[str]) -> int:
    """argv: the descriptor of a pipe whose other end the parent holds, and the file's path."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_end_with_parent, args=(int(argv[0]),), daemon=True).start()
    try:
        rows = saved_rows(Path(argv[1]))  # the path as given: no option is read from it
        answer: tuple[str, list[NodeRow], list[Row]] | tuple[str, str] = ("rows", rows.nodes, rows.links)
    except UsageError as exc:
        answer = ("refused", str(exc))
    sys.stdout.buffer.write(marshal.dumps(answer))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
