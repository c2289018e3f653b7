"""A reverse copy through ClusterShell's gateways (tree mode), unpacked by gpunet.

In tree mode ClusterShell fetches a file as a tar the node itself makes (`tar -cf - ... | base64`
run on the node) and extracts it here with tarfile's `fully_trusted` filter, as for a trusted
gateway: a node could then write anywhere on the admin host. This worker receives the same tar
but unpacks it with gpunet's own extractor (untar.py: one regular file, nothing else). It relies on
ClusterShell 1.10's TreeWorker keeping each node's tar in `_rcopy_tars`/`_rcopy_bufs`; without
them it refuses to run rather than fall back to ClusterShell's extraction."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import IO, Any

from ClusterShell.Task import Task
from ClusterShell.Worker.Tree import TreeWorker

from gpunet.fleet.untar import TransferRefused, extract

_PRIVATE = ("_rcopy_tars", "_rcopy_bufs")


class CheckedTreeRcopy(TreeWorker):  # type: ignore[misc]
    """ClusterShell's TreeWorker for one reverse copy, its extraction replaced by untar.extract."""

    def __init__(self, nodes: str, handler: Any, timeout: float | None, **kwargs: Any) -> None:
        super().__init__(nodes, handler, timeout, **kwargs)
        if not all(isinstance(getattr(self, name, None), dict) for name in _PRIVATE):
            raise TransferRefused("this ClusterShell's tree-mode copy is not the one gpunet checked (1.10); "
                                  "not copying through gateways")

    def _on_remote_node_close(self, node: str, rc: int, gateway: Any) -> None:
        tar, rest = self._rcopy_tars.pop(node, None), self._rcopy_bufs.pop(node, b"")
        if tar is not None and self.source and self.reverse:
            refused = unpack_fetched(tar, rest, Path(self.dest))
            if refused:
                self._on_remote_node_msgline(node, f"gpunet: {refused}".encode(), "stderr", gateway)
        super()._on_remote_node_close(node, rc, gateway)  # finds no tar left to extract


def unpack_fetched(tar: IO[bytes], rest: bytes, dest: Path) -> str | None:
    """The node's tar (and the base64 still undecoded) unpacked into DEST: one regular file. Why
    not, or None."""
    try:
        tar.write(base64.b64decode(rest))
        tar.flush()
        tar.seek(0)
        extract(tar, dest, top=None)
    except (TransferRefused, ValueError, OSError) as exc:  # ValueError: base64 that is not
        return str(exc)
    finally:
        tar.close()
    return None


def tree_rcopy(task: Task, source: str, dest: str, target: str, **options: Any) -> CheckedTreeRcopy | None:
    """The worker when ClusterShell would copy through its tree (a topology.conf names gateways),
    scheduled; None when it would not (scp then writes the one file)."""
    if not task._default_tree_is_enabled():
        return None
    worker = CheckedTreeRcopy(target, options.pop("handler"), options.pop("timeout"), source=source, dest=dest,
                              reverse=True, stderr=True)
    task.schedule(worker)
    return worker
