"""Stop this driver's servers when the driver ends: normally, on SIGTERM/SIGHUP, or on an unhandled Ctrl-C.

Python's default SIGTERM/SIGHUP action skips ``atexit`` (issue 20: SIGTERM inside ``with tk.launch(...)``
left the server and its TP ranks running). The guard runs one stop per live server, then hands the signal
on; SIGINT stays Python's (interrupting a cell must not kill the notebook's server).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["hold", "arm", "release", "stop_all"]

_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_held: dict[int, Callable[[], object]] = {}
_lock = threading.Lock()
_state = {"atexit": False, "signals": False}


def hold(key: int, stop: Callable[[], object]) -> None:
    """Run ``stop`` when the driver ends, unless :func:`release` is called first."""
    with _lock:
        _held[key] = stop
        if not _state["atexit"]:
            atexit.register(stop_all)
            _state["atexit"] = True
    arm()


def arm() -> None:
    """Install the SIGTERM/SIGHUP handlers now, from the main thread (elsewhere: nothing), before
    launches from worker threads (a host pool's lanes), which cannot install them."""
    with _lock:
        if not _state["signals"] and threading.current_thread() is threading.main_thread():
            _install_signals()


def release(key: int) -> None:
    """Forget ``key`` (its server was stopped, or is meant to outlive the driver)."""
    with _lock:
        _held.pop(key, None)


def stop_all() -> None:
    """Stop every held server; one failing stop does not spare the others."""
    with _lock:
        stops = list(_held.values())
        _held.clear()
    for stop in stops:
        with contextlib.suppress(Exception):  # nobody to raise to at exit; the next session lists leftovers
            stop()


def _install_signals() -> None:
    for signum in _SIGNALS:
        previous = signal.getsignal(signum)
        if previous is signal.SIG_IGN:
            continue  # whoever started us asked that this signal not end us (nohup)
        signal.signal(signum, _chained(signum, previous))
    if signal.getsignal(signal.SIGINT) is signal.SIG_DFL:  # no KeyboardInterrupt: the process would just die
        signal.signal(signal.SIGINT, _chained(signal.SIGINT, signal.SIG_DFL))
    _state["signals"] = True


Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def _chained(signum: int, previous: Handler) -> Callable[[int, FrameType | None], None]:
    def on_signal(received: int, frame: FrameType | None) -> None:
        stop_all()
        if callable(previous):
            previous(received, frame)
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    return on_signal
