"""Readers of /sys under a root path (a recorded tree in tests, / on a node)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from gpunet.model.state import BondSlave, BondState, IbPort, InterfaceState

IB_STATE_PREFIX = ":"  # sysfs writes "4: ACTIVE", "5: LinkUp": the number, a colon, the name
LINK_FACTS = ("operstate", "carrier", "mtu", "speed")  # the files of /sys/class/net/<dev> the exporter reads

NUMBER = re.compile(r"-?[0-9]{1,20}")
RATE = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6})?")


def _read(path: Path | str, directory: int | None = None) -> str | None:
    """A sysfs attribute, or None where reading fails (EINVAL on a down link's speed, say). Raw
    os.read, relative to an open `directory` where given: an exporter reads 4 attributes of each of
    hundreds of interfaces every scrape, and a file object or a full path walk costs more than the
    read itself."""
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=directory)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode(errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def _int(path: Path | str, directory: int | None = None) -> int | None:
    return _number(_read(path, directory))


def _number(text: str | None) -> int | None:
    """A file's integer: ASCII digits, at most 20 ("²".isdigit() is true, and int() of 4 300
    digits raises ValueError); anything else is unreadable."""
    return int(text) if text is not None and NUMBER.fullmatch(text.strip()) else None


def interface_names(root: Path = Path("/")) -> list[str]:
    return [name for name, _ in interface_entries(root)]


def interface_entries(root: Path = Path("/")) -> list[tuple[str, int]]:
    """The interfaces in /sys/class/net, each with its entry's inode: its directories and the
    links to them, not the plain files beside them (the bonding driver's `bonding_masters`). The
    entry's type and inode come with the directory listing, without a stat per interface (sysfs
    has no dangling links)."""
    try:
        with os.scandir(root / "sys/class/net") as entries:
            found = [(e.name, e.inode()) for e in entries if e.is_symlink() or e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return sorted(found)


def read_interfaces(root: Path = Path("/"), full: bool = True,
                    statistics: Mapping[str, dict[str, int]] | None = None) -> list[InterfaceState]:
    """Every interface. Not `full`: carrier, state, MTU, speed and virtual only, with the counters
    given in `statistics` (an exporter reads every interface's from one /proc/net/dev: 23
    statistics files per interface cost it 4x the whole scrape), without duplex, MAC or master.
    An interface that disappears while it is read is left out."""
    base = f"{root}/sys/class/net/"  # a str: a Path per interface costs more than its reads
    states = (read_interface(base + name, full, statistics) for name in interface_names(root))
    return [state for state in states if state is not None]


def read_interface(path: Path | str, full: bool = True,
                   statistics: Mapping[str, dict[str, int]] | None = None) -> InterfaceState | None:
    try:
        directory = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        state = _link_facts(os.path.basename(path), directory, statistics)
        return _full(state, Path(path), directory) if full else state
    finally:
        os.close(directory)


def _link_facts(name: str, directory: int, statistics: Mapping[str, dict[str, int]] | None) -> InterfaceState:
    facts = [_read(fact, directory) for fact in LINK_FACTS]
    return link_state(name, facts, not has_entry("device", directory), statistics)


def link_state(name: str, facts: Sequence[str | None], virtual: bool,
               statistics: Mapping[str, dict[str, int]] | None) -> InterfaceState:
    """The link facts from the text of their sysfs files, in LINK_FACTS order (None: unreadable)."""
    operstate, carrier, mtu, speed = facts
    return InterfaceState(
        name=name, operstate=operstate or "unknown", carrier=None if carrier is None else carrier == "1",
        mtu=_number(mtu) or 0, speed_mbps=_positive(speed), virtual=virtual,
        statistics=statistics.get(name, {}) if statistics else {},
    )


def _positive(text: str | None) -> int | None:
    """A speed in Mb/s; None for -1 (the driver cannot tell), 0 or nothing readable."""
    number = _number(text)
    return number if number is not None and number > 0 else None


def has_entry(name: str, directory: int) -> bool:
    """Whether the entry is there (a link is enough: real sysfs has no dangling ones)."""
    try:
        os.stat(name, dir_fd=directory, follow_symlinks=False)
    except OSError:
        return False
    return True


def _full(state: InterfaceState, path: Path, directory: int) -> InterfaceState:
    try:
        master: str | None = os.path.basename(os.readlink("master", dir_fd=directory).rstrip("/"))
    except OSError:
        master = None
    return state.model_copy(update={
        "duplex": _read("duplex", directory) if state.speed_mbps is not None else None,
        "address": _read("address", directory), "master": master, "statistics": _counters(path / "statistics"),
    })


def _counters(directory: Path) -> dict[str, int]:
    if not directory.is_dir():
        return {}
    values = {entry.name: _int(entry) for entry in sorted(directory.iterdir()) if entry.is_file()}
    return {name: value for name, value in values.items() if value is not None}


def read_ib_ports(root: Path = Path("/")) -> list[IbPort]:
    base = root / "sys/class/infiniband"
    if not base.exists():
        return []
    return [_ib_port(ca.name, port) for ca in sorted(base.iterdir()) for port in sorted((ca / "ports").iterdir())]


def _ib_port(ca: str, path: Path) -> IbPort:
    rate = (_read(path / "rate") or "").split(" ")[0]
    counters = _counters(path / "counters") | {f"hw_{k}": v for k, v in _counters(path / "hw_counters").items()}
    state_id, state = ib_state(_read(path / "state"))
    physical_id, physical = ib_state(_read(path / "phys_state"))
    return IbPort(
        ca=ca, port=int(path.name), state=state, physical_state=physical, state_id=state_id,
        physical_state_id=physical_id, rate_gbps=float(rate) if RATE.fullmatch(rate) else None,
        link_layer=_read(path / "link_layer"), counters=counters,
    )


def ib_state(text: str | None) -> tuple[int | None, str]:
    """'4: ACTIVE' -> (4, 'ACTIVE'): the number is what the port states (node_exporter exports
    it; the name beside it has been seen wrong, phys_state '4: ACTIVE'). What ibstat prints
    ('Active') differs only in case; text without a number gives (None, text)."""
    number, colon, name = (text or "").partition(IB_STATE_PREFIX)
    if not colon:
        return None, text or "unknown"
    return _number(number), name.strip() or (text or "unknown")


def read_sysfs_bonds(root: Path, problems: list[str], skip: frozenset[str] = frozenset()) -> list[BondState]:
    """Bonds as sysfs shows them, for those /proc/net/bonding does not (`skip`): the names in
    /sys/class/net/bonding_masters, each one's bonding/slaves and mode, each slave's
    bonding_slave/mii_status (node_exporter's bonding collector reads the same files). A bond
    that cannot be read is noted in `problems` and left out."""
    base = root / "sys/class/net"
    masters = _read(base / "bonding_masters")
    bonds = []
    for name in (masters or "").split():
        if name in skip:
            continue
        slaves = _read(base / name / "bonding/slaves")
        if slaves is None:
            problems.append(f"{base / name / 'bonding/slaves'}: unreadable")
            continue
        mode = (_read(base / name / "bonding/mode") or "unknown").split(" ")[0]
        members = tuple(_bond_slave(base, name, slave, problems) for slave in slaves.split())
        bonds.append(BondState(name=name, mode=mode, mii_up=_read(base / name / "bonding/mii_status") == "up",
                               slaves=members))
    return bonds


def _bond_slave(base: Path, bond: str, slave: str, problems: list[str]) -> BondSlave:
    """A member whose MII status cannot be read counts as down (noted): not confirmed up."""
    status = _mii_status(base, bond, slave)
    if status is None:
        problems.append(f"{base / slave / 'bonding_slave/mii_status'}: unreadable (member of {bond})")
    return BondSlave(name=slave, mii_up=status == "up")


def _mii_status(base: Path, bond: str, slave: str) -> str | None:
    """The slave's own bonding_slave/, else the bond's lower_<slave> link (slave_<slave> on
    older kernels), as node_exporter looks."""
    for where in (base / slave, base / bond / f"lower_{slave}", base / bond / f"slave_{slave}"):
        status = _read(where / "bonding_slave/mii_status")
        if status is not None:
            return status
    return None
