"""The one way every command ends on SIGINT or SIGTERM: the first signal raises `Interrupted`
(a KeyboardInterrupt, so `finally` blocks and context managers clean up as the exception leaves
them, and code that already stops on Ctrl-C still does); every later one, while that clean-up
runs, is noted once on stderr and otherwise ignored, so a second Ctrl-C cannot break a clean-up
half-way into a traceback. `handles_errors` then exits 128 + the signal: 130 for SIGINT, 143 for
SIGTERM, as a shell reports a process the signal ended."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
CLEANING_UP = b"gpunet: interrupted; finishing the clean-up (further signals are ignored; kill -9 forces)\n"


class Interrupted(KeyboardInterrupt):
    """A command stopped by a signal (`signum`), on its way out through its clean-up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _State:
    active = False  # handlers installed (commands nest: only the outermost installs them)
    told = False  # the clean-up note was written


def exit_status(stop: KeyboardInterrupt) -> int:
    """128 + the signal; a KeyboardInterrupt of Python's own (no handler of ours) is SIGINT's."""
    return 128 + (stop.signum if isinstance(stop, Interrupted) else signal.SIGINT)


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM handled as above while the block runs. Handlers can be set only from
    the main thread: elsewhere the block runs with the process's own. Once the clean-up is done the
    signals are ignored outright (SIG_IGN): the process is on its way out, and Python's shutdown
    puts back the default action of any signal with a Python handler, so a last Ctrl-C would
    otherwise still kill it instead of letting it exit 130."""
    if _State.active or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    _State.active, _State.told = True, False
    interrupted = False
    try:
        for s in SIGNALS:
            signal.signal(s, _first)
        yield
    except KeyboardInterrupt:
        interrupted = True
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise
    finally:
        _State.active = False
        if not interrupted:
            for s, handler in previous.items():
                signal.signal(s, handler)


def _first(signum: int, frame: FrameType | None) -> None:
    del frame
    for s in SIGNALS:
        signal.signal(s, _again)
    raise Interrupted(signum)


def _again(signum: int, frame: FrameType | None) -> None:
    """A signal during the clean-up: said once, with a plain write (a handler may run in the middle
    of a Rich print, whose console it must not re-enter)."""
    del signum, frame
    if not _State.told:
        _State.told = True
        os.write(2, CLEANING_UP)
