"""Where a bundle lands: one stage on real nodes (each has its own disk), and in a lab under each
server's own tree, since the servers share this machine's files (one shared stage had seven
servers unpack the same bundle into the same place at once, and one rename lost: the node ended
"unreachable: sending the bundle" in about one run of ten under load)."""

from __future__ import annotations

from gpunet.apply import Remote
from gpunet.apply.manifest import Where
from gpunet.apply.remote import REAL_STAGE
from gpunet.fleet import ClusterShellRunner


def test_real_nodes_share_the_one_stage_path() -> None:
    remote = Remote(runner=ClusterShellRunner())
    assert {remote.stage_of(n) for n in ("gpu001", "gpu002")} == {REAL_STAGE}


def test_each_lab_server_has_its_stage_in_its_own_tree() -> None:
    remote = Remote.for_lab(ClusterShellRunner(), Where(lab_root="/run/gpunet/labs/ab/root"))
    stages = {n: remote.stage_of(n) for n in ("gpu001", "gpu002")}
    assert stages == {n: f"/run/gpunet/labs/ab/root/{n}{REAL_STAGE}" for n in stages}
