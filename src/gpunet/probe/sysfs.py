"""Readers of /sys under a root path (a recorded tree in tests, / on a node)."""

from __future__ import annotations

import os
from pathlib import Path

from gpunet.model.state import IbPort, InterfaceState

IB_STATE_PREFIX = ":"  # sysfs writes "4: ACTIVE", "5: LinkUp": the name follows the colon


def _read(path: Path) -> str | None:
    """A sysfs attribute, or None where reading fails (EINVAL on a down link's speed, say). Raw
    os.read: an exporter reads ~6 attributes of every interface each scrape, and a text-mode
    file object costs more than the read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode(errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def _int(path: Path) -> int | None:
    text = _read(path)
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def read_interfaces(root: Path = Path("/"), full: bool = True) -> list[InterfaceState]:
    """Every interface. Not `full`: carrier, state, MTU, speed and virtual only, without counters,
    duplex, MAC or master (an exporter takes every interface's counters from one read of
    /proc/net/dev; 23 statistics files per interface cost it 4x the whole scrape)."""
    base = root / "sys/class/net"
    if not base.exists():
        return []
    return [read_interface(base / name.name, full) for name in sorted(base.iterdir())]


def read_interface(path: Path, full: bool = True) -> InterfaceState:
    speed = _int(path / "speed")
    carrier = _read(path / "carrier")
    state = InterfaceState(
        name=path.name, operstate=_read(path / "operstate") or "unknown",
        carrier=None if carrier is None else carrier == "1", mtu=_int(path / "mtu") or 0,
        speed_mbps=speed if speed is not None and speed > 0 else None, virtual=not (path / "device").exists(),
    )
    if not full:
        return state
    master = path / "master"
    return state.model_copy(update={
        "duplex": _read(path / "duplex") if speed is not None and speed > 0 else None,
        "address": _read(path / "address"), "master": master.resolve().name if master.exists() else None,
        "statistics": _counters(path / "statistics"),
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
    return IbPort(
        ca=ca, port=int(path.name), state=_after_colon(_read(path / "state")),
        physical_state=_after_colon(_read(path / "phys_state")),
        rate_gbps=float(rate) if rate.replace(".", "", 1).isdigit() else None,
        link_layer=_read(path / "link_layer"), counters=counters,
    )


def _after_colon(text: str | None) -> str:
    """'4: ACTIVE' -> 'ACTIVE'; what ibstat prints ('Active') differs only in case."""
    return (text or "").partition(IB_STATE_PREFIX)[2].strip() or (text or "unknown")
