"""A lab's state file: written before anything is created, so `lab down` can always undo it."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints, ValidationError

from gpunet.errors import LabError, LabUsageError
from gpunet.lab.addressing import MAX_LABS
from gpunet.lab.ready import Readiness
from gpunet.model.base import Frozen
from gpunet.model.types import AddressText, Hostname, InterfaceText, PortName

# What the state file's names may be: they go into `ip`, `tc` and `nsenter` command lines.
Namespace = Annotated[str, StringConstraints(pattern=r"^gn[a-z0-9]{1,4}-[A-Za-z0-9-]{1,63}$")]
HostSide = Annotated[str, StringConstraints(pattern=r"^(gn[a-z0-9]{1,4}-[A-Za-z0-9-]{1,63})?$")]  # "" is the host
CableEnd = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9-]{1,63}:[A-Za-z0-9_.-]{1,15}$|^host$")]
Cable = Annotated[str, StringConstraints(pattern=r"^\S{1,80} \S{1,80}$")]
# Routes are replayed into `ip -batch` by heal: only `route add` lines of plain words, so a line
# such as `netns exec ... touch F` in a tampered state file is refused where the file is read.
RouteLine = Annotated[str, StringConstraints(pattern=r"^route add [A-Za-z0-9_.:/ -]{1,8000}$")]
AddressLine = Annotated[str, StringConstraints(pattern=r"^addr add [0-9.]{7,15}/\d{1,2} dev [A-Za-z0-9_.-]{1,15}$")]
Word = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:/-]{0,40}$")]
Note = Annotated[str, StringConstraints(pattern=r"^[ -~]{1,400}$")]  # printable ASCII, one line

STATE_FILE = "state.json"


class VethState(Frozen):
    """One cable: a veth pair between two namespaces (a_ns "" is the host's own)."""

    a_ns: HostSide
    a_if: PortName
    b_ns: Namespace
    b_if: PortName
    mtu: int = Field(ge=68, le=65535)
    mbit: float = Field(ge=0, allow_inf_nan=False)
    plane: str
    a_end: CableEnd  # "gpu001:ib0", as in cabling.csv: how users name either end in `lab fault`
    b_end: CableEnd  # "comp-leaf001:1"

    @property
    def cable(self) -> str:
        return f"{self.a_end} {self.b_end}"


class AddressPair(Frozen):
    """Where a plan address lives in the lab."""

    plan: InterfaceText | Literal[""]
    lab: InterfaceText


FaultKind = Literal["loss", "down", "mtu", "rate", "delay", "miswire"]


class Fault(Frozen):
    """A fault applied to one cable (both ends), as `lab fault` recorded it."""

    cable: Cable  # "gpu001:ib0 comp-leaf001:1"
    kind: FaultKind
    value: Word = ""
    # miswire: the two ends named (the cables' far ends changed places) and the second cable
    near: tuple[CableEnd, CableEnd] | None = None
    other: Cable | None = None


LAB_PLAN = "plan.json"  # in the lab's directory: the plan in lab addresses (`doctor --plan` inside a lab server)
Routing = Literal["frr", "static"]  # eBGP planes: FRR from each switch's frr.conf, or static ECMP routes


class LabState(Frozen):
    lab_id: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]{1,4}$")]
    slot: int = Field(ge=0, le=MAX_LABS - 1)
    status: Literal["building", "up"]
    plan_digest: Word
    block: Word
    host_if: PortName
    host_address: InterfaceText
    mgmt_subnet: Word
    namespaces: dict[Namespace, str]  # namespace -> kind
    servers: dict[Hostname, Namespace]  # node -> namespace
    mgmt_addresses: dict[Hostname, AddressText]
    address_map: dict[str, AddressPair]  # "node/interface" ->
    veths: tuple[VethState, ...]
    notes: tuple[Note, ...]
    faults: tuple[Fault, ...] = Field(default=())
    # Static routes per namespace: the kernel drops those over a link taken down; heal re-adds them.
    routes: dict[Namespace, tuple[RouteLine, ...]] = Field(default_factory=dict)
    # Addresses per namespace: a cable end moved to another namespace (a miswire) loses its own.
    addresses: dict[Namespace, tuple[AddressLine, ...]] = Field(default_factory=dict)
    scale_mbit_per_gbit: float = Field(1.0, gt=0, allow_inf_nan=False)
    # How long `lab up` took to build it and then to see it ready (None: built by an older gpunet).
    readiness: Readiness | None = None
    # How its eBGP planes route (a state from before FRR labs: static).
    routing: Routing = "static"
    # Switch -> its lab management address, where its sshd listens (lab/management.py), and the
    # host's own ports on the switches' management plane (gone with `down`).
    switch_mgmt: dict[Hostname, AddressText] = Field(default_factory=dict)
    host_links: tuple[PortName, ...] = ()
    # lldpd runs in every namespace (`lab up --lldp`, or started by the first LLDP reader: lab/lldp_lab.py)
    lldp: bool = False


ETC_NETNS = Path("/etc/netns")  # `ip netns exec` mounts /etc/netns/<ns>/* over /etc/*


def labs_root() -> Path:
    """Where lab state lives: $GPUNET_LAB_ROOT, else /run/gpunet/labs (tmpfs: gone at reboot, as
    the namespaces are)."""
    return Path(os.environ.get("GPUNET_LAB_ROOT", "/run/gpunet/labs"))


def check_id(lab_id: str) -> None:
    if not (lab_id.isascii() and lab_id.isalnum() and lab_id.islower() and 1 <= len(lab_id) <= 4):
        raise LabUsageError(f"lab id {lab_id!r}: use 1-4 lowercase letters or digits (it goes in every name)")


def lab_dir(lab_id: str) -> Path:
    check_id(lab_id)  # the id becomes a path, namespace names and an interface name
    return labs_root() / lab_id


def read_state(lab_id: str) -> LabState | None:
    path = lab_dir(lab_id) / STATE_FILE
    if not path.exists():
        return None
    try:
        state = LabState.model_validate_json(path.read_text())
    except (OSError, ValueError) as exc:  # ValidationError and UnicodeDecodeError are ValueErrors
        raise LabError(f"{path} is unreadable ({_why(exc)}); remove the lab's objects by hand "
                       f"(ip netns list | grep gn{lab_id}-) and then this directory") from None
    foreign = _not_this_labs(state, lab_id)
    if foreign:
        raise LabError(f"{path} names {foreign!r}, which is not lab {lab_id}'s (gn{lab_id}-...); gpunet will not "
                       "touch it. Remove the lab's objects by hand and then this directory")
    return state


def _why(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _not_this_labs(state: LabState, lab_id: str) -> str | None:
    """The first name the state gives that this lab could not have made: every command `down`,
    `fault` and `heal` run must stay inside gn<id>-* (a state claiming the host's eth0 is refused)."""
    if state.lab_id != lab_id:
        return state.lab_id
    if state.host_if != f"gn{lab_id}h":
        return state.host_if
    names = [*state.namespaces, *state.servers.values(), *state.routes, *state.addresses,
             *(ns for v in state.veths for ns in (v.a_ns, v.b_ns) if ns)]
    return next((name for name in names if not name.startswith(f"gn{lab_id}-")), None)


def write_state(state: LabState) -> None:
    write_state_file(lab_dir(state.lab_id), state)


def write_state_file(directory: Path, state: BaseModel) -> None:
    """state.json replaced whole (a reader never sees half a file), in a directory only root reads."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = directory / f".{STATE_FILE}.tmp"
    tmp.write_text(state.model_dump_json(indent=1))
    tmp.replace(directory / STATE_FILE)


def all_states() -> list[LabState]:
    root = labs_root()
    dirs = [p.name for p in sorted(root.iterdir()) if p.is_dir()] if root.exists() else []
    states = [read_state(name) for name in dirs if _valid_id(name)]
    return [s for s in states if s is not None]


def _valid_id(name: str) -> bool:
    try:
        check_id(name)
    except LabUsageError:
        return False
    return True


class _Slot(BaseModel):
    """The one thing a new lab needs of the others: the address block each holds. Read leniently,
    so that a lab another gpunet version built (a field this one does not know) still keeps its block."""

    slot: int = Field(ge=0, le=MAX_LABS - 1)


def slots_held(but: str) -> dict[str, int]:
    root = labs_root()
    held: dict[str, int] = {}
    for name in sorted(p.name for p in root.iterdir() if p.is_dir()) if root.exists() else []:
        path = root / name / STATE_FILE
        if name == but or not _valid_id(name) or not path.exists():
            continue
        try:
            held[name] = _Slot.model_validate_json(path.read_text()).slot
        except (OSError, ValueError) as exc:
            raise LabError(f"{path} is unreadable ({_why(exc)}): cannot tell which addresses lab {name} holds; remove "
                           f"its objects by hand (ip netns list | grep gn{name}-) and then this directory") from None
    return held


def free_slot(lab_id: str) -> int:
    held = slots_held(but=lab_id)
    for slot in range(MAX_LABS):
        if slot not in held.values():
            return slot
    raise LabError(f"{MAX_LABS} labs are up ({', '.join(sorted(held))}); take one down first")


@contextmanager
def labs_lock() -> Iterator[None]:
    """What the labs of a machine share changes one at a time: the slots (a lab's state written
    before anything of it exists), the host's route for the lab range, its neighbour-table limits and
    congestion-control list. Held for those steps only, so labs build side by side."""
    root = labs_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o711)  # passable, not listable: each lab's directory is 0700
    with _flocked(root / ".lock"):
        yield


LOCKS = ".locks"  # one lock file per lab id, kept: a lab's own directory goes with `down`


@contextmanager
def lab_lock(lab_id: str) -> Iterator[None]:
    """One change at a time to one lab (its state, namespaces, faults): up, down, fault, heal.
    Taken before labs_lock where both are held, never after it."""
    check_id(lab_id)
    root = labs_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o711)
    folder = root / LOCKS
    folder.mkdir(exist_ok=True, mode=0o700)
    with _flocked(folder / lab_id):
        yield


@contextmanager
def _flocked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
