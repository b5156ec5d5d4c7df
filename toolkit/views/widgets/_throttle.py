"""A redraw throttle: many pokes from any thread, at most `rate_hz` renders on one owned thread.

A widget update per log line floods the kernel's IOPub channel and freezes the browser, so readers only
`poke`; `tick_s` also renders when nothing changed (a badge's clock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Throttle"]


class Throttle:
    """Call `render()` on an owned daemon thread, at most `rate_hz` times a second.

    An exception in `render` is kept in `error`: a view that cannot draw one frame must not stop drawing.

    >>> Throttle(lambda: None, rate_hz=10, name="demo").close()
    """

    def __init__(self, render: Callable[[], None], *, rate_hz: float = 10.0, tick_s: float | None = None,
                 name: str = "widget-redraw") -> None:
        if rate_hz <= 0:
            raise ValueError(f"rate_hz must be positive, got {rate_hz!r}; 10 keeps a notebook responsive.")
        self._render = render
        self.interval_s = 1.0 / rate_hz
        self.tick_s = tick_s
        self.renders = 0
        self.error: BaseException | None = None
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._render_lock = threading.Lock()
        self._thread: threading.Thread | None = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Ask for a redraw; cheap and safe from any thread (the reader calls it per batch)."""
        self._dirty.set()

    def flush(self) -> None:
        """Render now, on the calling thread (tests, and a final frame before closing)."""
        self._dirty.clear()
        self._render_once()

    def close(self) -> None:
        """Stop and join the thread (idempotent)."""
        self._stop.set()
        self._dirty.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    def _render_once(self) -> None:
        with self._render_lock:
            try:
                self._render()
            except Exception as exc:  # kept for the owner's repr; the next frame may succeed
                self.error = exc
            self.renders += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self._dirty.wait(self.tick_s)
            if self._stop.is_set():
                return
            self._dirty.clear()
            started = time.monotonic()
            self._render_once()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
