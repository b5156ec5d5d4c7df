"""ServerPanel: one server's state badge, where it runs, a Stop button, and why it failed.

A view of the server's one :class:`~toolkit.server.state.ServerState` (fed by its log follower,
`wait_ready` and `Server.stop`, whoever called them); it decides nothing. The Stop button's
`server.stop()` runs on a thread of the panel's own: the one piece of I/O, because a person asked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import ipywidgets as widgets
from traitlets import Unicode

from toolkit.errors import ToolkitError
from toolkit.redaction import Redactor
from toolkit.server.server import MultiNodeServer, Server
from toolkit.server.state import ErrorSummary, ServerStatus
from toolkit.views.widgets._status_markup import StatusSnapshot, status_html, status_text
from toolkit.views.widgets._text_repr import TextRepr
from toolkit.views.widgets._throttle import Throttle

__all__ = ["ServerPanel"]


class ServerPanel(TextRepr, widgets.VBox):
    """A live status badge for a `Server`: starting, ready, failed, stopping, stopped.

    >>> panel = ServerPanel(server); display(panel)                     # doctest: +SKIP
    >>> server.wait_ready(timeout_s=900)   # the badge turns ready (or red, quoting the cause)  # doctest: +SKIP

    `follow=True` starts the server's shared log follower, so the phase and the first fatal line show
    while `wait_ready` still blocks the cell. `state` and `phase` are traits (observed on the redraw thread).
    """

    state = Unicode("starting", help="one of starting, ready, failed, stopping, stopped")
    phase = Unicode(None, allow_none=True, help="the last startup phase the log reported")

    def __init__(self, server: Server | MultiNodeServer, *, follow: bool = True, rate_hz: float = 10.0,
                 tick_s: float = 1.0, clock: Callable[[], float] = time.time) -> None:
        self.server = server
        self._redact = Redactor.of(server.spec.secrets()).text  # whatever fed the state, no secret shows
        self._clock = clock
        self._closed = True  # nothing to release yet
        self._stopper: threading.Thread | None = None
        self._stop_error: ErrorSummary | None = None

        self.status = widgets.HTML()
        self.status.add_class("tk-status-widget")
        # a minimum width: squeezed, the button read "■ …" (issue 28)
        self.stop_button = widgets.Button(description="Stop", icon="stop", button_style="danger",
                                          tooltip="stop the server and its process tree",
                                          layout=widgets.Layout(min_width="6em", flex="0 0 auto"))
        self.stop_button.add_class("tk-stop")
        self.stop_button.on_click(self._on_stop_clicked)
        self._row = widgets.HBox([self.status, self.stop_button],
                                 layout=widgets.Layout(align_items="flex-start"))
        super().__init__(children=(self._row,))
        self.add_class("tk-server-panel")

        self._throttle = Throttle(self._render, rate_hz=rate_hz, tick_s=tick_s, name="ServerPanel-redraw")
        self._closed = False
        self._ended_as: tuple[str, bool] | None = None  # the end drawn last: (lifecycle, stopped)
        self._unsubscribe = server.state.subscribe(self._on_status)
        if follow:
            server.follow()  # the server's one follower, started; it feeds the state and stops with the server
        self._render()

    def snapshot(self) -> StatusSnapshot:
        """The panel's state as plain data (what both the badge and the text show)."""
        server, redact = self.server, self._redact
        status: ServerStatus = server.state.status()
        lifecycle, error = status.lifecycle, status.error
        if self._stop_error is not None:
            lifecycle, error = "failed", self._stop_error
        elapsed = max(0.0, self._clock() - status.started_at) if lifecycle == "starting" else status.elapsed_s
        return StatusSnapshot(
            state=lifecycle, elapsed_s=elapsed, phase=status.phase, label=redact(server.spec.describe()),
            url=server.url, host=server.host.name, pid=server.pid, error_kind=error.kind if error else None,
            error_message=redact(error.message) if error else None,
            evidence=tuple(map(redact, error.evidence)) if error else (),
            hint=redact(error.hint) if error and error.hint else None,
            note=redact(status.note) if status.note else None)

    def set_failed(self, error: BaseException | str) -> None:
        """Record a failure found elsewhere (a benchmark that found the server dead) on the server's state."""
        if isinstance(error, ToolkitError):
            summary = ErrorSummary(type(error).__name__, error.message, error.evidence, error.hint)
        elif isinstance(error, BaseException):
            summary = ErrorSummary(type(error).__name__, str(error) or type(error).__name__, (), None)
        else:
            summary = ErrorSummary(None, str(error), (), None)
        self.server.state.record_error(summary, self._clock())

    def _on_status(self, status: ServerStatus) -> None:
        """A change of state, on the thread that made it. The end is drawn here and now: the redraw
        thread's frame would come after the stopping cell finished, and a notebook would keep "stopping"."""
        end = (status.lifecycle, status.stopped_at is not None)
        if status.lifecycle in ("stopped", "failed") and end != self._ended_as and not self._closed:
            self._ended_as = end
            self._throttle.flush()
            self.refresh_display()
        else:
            self._throttle.poke()

    # -- the redraw thread ------------------------------------------------------------------
    def _render(self) -> None:
        snapshot = self.snapshot()
        if self.state != snapshot.state:
            self.state = snapshot.state
        if snapshot.phase is not None and self.phase != snapshot.phase:
            self.phase = snapshot.phase
        frame = status_html(snapshot)
        if frame != self.status.value:
            self.status.value = frame
        # A failed server the toolkit has stopped has nothing left to stop: the button would do nothing.
        disabled = snapshot.state in ("stopping", "stopped") or (
            snapshot.state == "failed" and self.server.state.status().stopped_at is not None)
        if self.stop_button.disabled != disabled:
            self.stop_button.disabled = disabled

    # -- the Stop button: the one piece of I/O, on a thread we own ----------------------------
    def _on_stop_clicked(self, _button: widgets.Button | None = None) -> None:
        stopping = self._stopper is not None and self._stopper.is_alive()
        if stopping or self.server.state.status().stopped_at is not None:
            return
        self._stopper = threading.Thread(target=self._stop_server, name="ServerPanel-stop", daemon=True)
        self._stopper.start()

    def stop(self) -> None:
        """What the Stop button does: `server.stop()` on a background thread."""
        self._on_stop_clicked()

    def _stop_server(self) -> None:
        try:
            self.server.stop()
        except Exception as exc:  # shown on the badge: the person asked and must see why not
            message = exc.message if isinstance(exc, ToolkitError) else str(exc)
            self._stop_error = ErrorSummary(type(exc).__name__, f"the stop failed: {message}", (), None)
        self._throttle.flush()

    def wait_stopped(self, timeout_s: float = 30.0) -> bool:
        """Join the stop thread; True when it finished within `timeout_s` (or never ran)."""
        stopper = self._stopper
        if stopper is not None:
            stopper.join(timeout_s)
        return stopper is None or not stopper.is_alive()

    def flush(self) -> None:
        """Redraw now on this thread (tests; a final frame)."""
        self._throttle.flush()

    def summary(self) -> str:
        return status_text(self.snapshot())

    def close(self) -> None:
        """Unsubscribe from the state, stop the redraw thread, join a running stop (idempotent)."""
        if not self._closed:
            self._closed = True
            self._unsubscribe()
            self._throttle.close()
            self.wait_stopped(timeout_s=30.0)
            for child in (self.status, self.stop_button, self._row):
                child.close()
        super().close()
