"""ServerPanel: one server's state badge, where it runs, a Stop button, and why it failed.

The panel is a view; it decides nothing itself. Its state comes from pushes:
- log events from the server's follower, fed to the pure `ReadinessTracker` (the same
  state machine `wait_ready` drives), so a fatal line turns the badge red with the very
  message, quoted lines and hint that `ServerDied` will carry;
- explicit calls: `set_ready(report)` with `wait_ready`'s `ReadinessReport` (readiness
  needs a probe as well as the ready line, so the log alone never turns the badge green),
  `set_failed(exc)` for any error, `set_stopped(report)`;
- the Stop button, whose `server.stop()` runs on a thread of the panel's own: the one
  piece of I/O, because a person asked for it;
- `server.stop_report`, read (an attribute, no I/O) on each clock tick, so a `with
  launch(...)` block that stopped the server shows "stopped".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
from traitlets import Unicode

from toolkit.server.readiness import ReadinessState, ReadinessTracker
from toolkit.views.widgets._log_markup import EventLike, verdict_of
from toolkit.views.widgets._status_markup import STATES, PanelState, StatusSnapshot, status_html, status_text
from toolkit.views.widgets._text_repr import TextRepr
from toolkit.views.widgets._throttle import Throttle

if TYPE_CHECKING:
    from toolkit.host.host import StopReport
    from toolkit.server.launch import Server
    from toolkit.server.readiness import Failure, ReadinessReport

__all__ = ["ServerPanel"]

# Failure.kind -> the error class wait_ready raises for it (toolkit.errors), for the badge.
_FAILURE_KINDS = {
    "fatal": "ServerDied",
    "died": "ServerDied",
    "timeout": "ReadinessTimeout",
    "hung": "ServerHung",
}


class ServerPanel(TextRepr, widgets.VBox):
    """A live status badge for a `Server`: starting, ready, failed, stopping, stopped.

    >>> panel = ServerPanel(server); display(panel)                     # doctest: +SKIP
    >>> try:                                                              # doctest: +SKIP
    ...     panel.set_ready(server.wait_ready(timeout_s=900))
    ... except ToolkitError as exc:
    ...     panel.set_failed(exc); raise

    With `follow=True` the panel subscribes to the server's shared log follower: the phase
    it reached, and the first fatal event, turn up on the badge while `wait_ready` still
    blocks the cell. After a stop, log lines no longer change the
    state (a killed server prints tracebacks). `state` and `phase` are traits;
    `panel.observe(callback, "state")` runs the callback on whichever thread changed it.
    """

    state = Unicode("starting", help="one of starting, ready, failed, stopping, stopped")
    phase = Unicode(None, allow_none=True, help="the last startup phase the log reported")

    def __init__(
        self,
        server: Server,
        *,
        follow: bool = True,
        rate_hz: float = 10.0,
        tick_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.server = server
        self._clock = clock
        # Re-entrant: `state` observers run inside a transition and may read snapshot().
        self._lock = threading.RLock()
        self._closed = True  # nothing to release yet
        self._started_at = float(getattr(server, "started_at", None) or clock())
        self._settled_at: float | None = None  # when the current state was entered
        self._ready_after_s: float | None = None
        self._error: _Error | None = None
        self._log_failure: Failure | None = None  # the tracker's failure the badge shows, if any
        self._note: str | None = None
        self._log_says_ready = False  # shown while starting: the line is not proof (readiness.py)
        self._stopper: threading.Thread | None = None
        self._tracker = ReadinessTracker(started_at=self._started_at)

        self.status = widgets.HTML()
        self.status.add_class("tk-status-widget")
        self.stop_button = widgets.Button(
            description="Stop",
            icon="stop",
            button_style="danger",
            tooltip="stop the server and its process tree",
        )
        self.stop_button.add_class("tk-stop")
        self.stop_button.on_click(self._on_stop_clicked)
        self._row = widgets.HBox(
            [self.status, self.stop_button], layout=widgets.Layout(align_items="flex-start")
        )
        super().__init__(children=(self._row,))
        self.add_class("tk-server-panel")
        self.status.value = status_html(self.snapshot())

        self._follower: Any = None
        self._unsubscribe: Callable[[], None] | None = None
        self._throttle = Throttle(self._render, rate_hz=rate_hz, tick_s=tick_s, name="ServerPanel-redraw")
        self._closed = False
        if follow and hasattr(server, "follow"):
            self._follower = server.follow()  # the server's one follower, started; it stops with the server
            self._unsubscribe = self._follower.subscribe(self._on_events, replay=True)
        self._throttle.poke()

    # -- state ------------------------------------------------------------------------------
    def snapshot(self) -> StatusSnapshot:
        """The panel's state as plain data (what both the badge and the text show)."""
        server = self.server
        with self._lock:
            state: PanelState = self.state  # type: ignore[assignment]
            if state == "ready" and self._ready_after_s is not None:
                elapsed = self._ready_after_s
            elif state != "starting" and self._settled_at is not None:
                elapsed = self._settled_at - self._started_at
            else:
                elapsed = self._clock() - self._started_at
            error = self._error
            note = self._note
            if state == "starting" and self._log_says_ready:
                note = "the log says ready; wait_ready() proves it with a probe"
        host = getattr(server, "host", None)
        describe = getattr(getattr(server, "spec", None), "describe", None)
        pid = getattr(server, "pid", None)
        return StatusSnapshot(
            state=state,
            elapsed_s=max(0.0, elapsed),
            phase=self.phase,
            label=describe() if callable(describe) else None,
            url=getattr(server, "url", None),
            host=getattr(host, "name", None),
            pid=pid if isinstance(pid, int) else None,
            error_kind=error.kind if error else None,
            error_message=error.message if error else None,
            evidence=error.evidence if error else (),
            hint=error.hint if error else None,
            note=note,
        )

    def _transition(
        self, state: PanelState, *, from_states: tuple[str, ...] = STATES, error: _Error | None = None
    ) -> bool:
        """Move to `state` if the current one is in `from_states`; check and move are atomic."""
        with self._lock:
            if self.state not in from_states:
                return False
            self._settled_at = self._clock()
            if error is not None:
                self._error = error
            self.state = state
        self._throttle.poke()
        return True

    def set_ready(self, report: ReadinessReport | None = None) -> None:
        """Show `wait_ready`'s verdict: ready (with its time to ready and last phase) or failed.

        Without a report the panel turns ready now (you proved it some other way).
        """
        if report is not None and not report.ready:
            if report.failure is not None:
                self._fail(_error_of(report.failure))
            else:
                self._fail(_Error("NotReady", f"the server is not ready (state {report.state})", (), None))
            return
        with self._lock:
            if report is not None:
                self._ready_after_s = report.time_to_ready_s
                if report.benign:
                    self._note = f"{len(report.benign)} benign error lines ignored"
        if report is not None and report.phases:
            self.phase = report.phases[-1].phase
        self._transition("ready")

    def set_failed(self, error: BaseException | str) -> None:
        """Show a failure: a `ToolkitError`'s message, its evidence quoted, and its hint."""
        if isinstance(error, BaseException):
            message = getattr(error, "message", None) or str(error) or type(error).__name__
            evidence = tuple(str(line) for line in getattr(error, "evidence", ()) or ())
            self._fail(_Error(type(error).__name__, str(message), evidence, getattr(error, "hint", None)))
        else:
            self._fail(_Error(None, str(error), (), None))

    def set_stopped(self, report: StopReport | None = None) -> None:
        """Show stopped (the Stop button does this itself)."""
        if report is not None and report.sigkill_sent:
            with self._lock:
                self._note = "SIGKILL was needed"
        self._transition("stopped")

    def _fail(self, error: _Error, *, from_states: tuple[str, ...] = STATES) -> bool:
        return self._transition("failed", from_states=from_states, error=error)

    # -- the follower's reader thread -------------------------------------------------------
    def _on_events(self, batch: list[EventLike]) -> None:
        now = self._clock()
        tracker = self._tracker
        if getattr(self.server, "stop_requested_at", None) is not None:
            # A stop kills the ranks, and the engine logs their deaths ("Child process
            # unexpectedly failed"): lines written after the stop began are not a failure.
            self._transition("stopping", from_states=("starting", "ready"))
            self._throttle.poke()
            return
        for event in batch:
            tracker.observe(event, at=now)  # type: ignore[arg-type]  # EventLike is LogEvent's shape
            if event.phase and self.state == "starting":
                self.phase = str(event.phase)  # a toolkit.logs.Phase (StrEnum): keep its plain value
            if verdict_of(event) == "ready":
                self._log_says_ready = True
        failure = tracker.failure
        if (
            tracker.state is ReadinessState.FAILED
            and failure is not None
            and failure is not self._log_failure
        ):
            # The first fatal event fails the panel; a later one only refines a notice
            # ("Received sigquit") into its cause, as wait_ready's error would.
            refining = self._log_failure is not None and self.state == "failed"
            if self._fail(_error_of(failure), from_states=("failed",) if refining else ("starting", "ready")):
                with self._lock:
                    self._log_failure = failure
        self._throttle.poke()

    # -- the redraw thread ------------------------------------------------------------------
    def _render(self) -> None:
        readiness = getattr(self.server, "readiness", None)
        if readiness is not None and readiness.ready and self.state == "starting":
            self.set_ready(readiness)  # wait_ready ran elsewhere (a sweep, a compare)
        report = getattr(self.server, "stop_report", None)
        if report is not None and self.state not in ("stopping", "stopped"):
            self.set_stopped(report)  # stopped elsewhere (a `with launch(...)` block ended)
        frame = status_html(self.snapshot())
        if frame != self.status.value:
            self.status.value = frame
        disabled = self.state in ("stopping", "stopped")
        if self.stop_button.disabled != disabled:
            self.stop_button.disabled = disabled

    # -- the Stop button: the one piece of I/O, on a thread we own ----------------------------
    def _on_stop_clicked(self, _button: widgets.Button | None = None) -> None:
        if self._stopper is not None and self._stopper.is_alive():
            return
        if not self._transition("stopping", from_states=("starting", "ready", "failed")):
            return
        self._stopper = threading.Thread(target=self._stop_server, name="ServerPanel-stop", daemon=True)
        self._stopper.start()

    def stop(self) -> None:
        """What the Stop button does: `server.stop()` on a background thread."""
        self._on_stop_clicked()

    def _stop_server(self) -> None:
        try:
            report = self.server.stop()
        except Exception as exc:  # shown on the badge: the person asked and must see why not
            self.set_failed(exc)
            return
        self.set_stopped(report if hasattr(report, "sigkill_sent") else None)

    def wait_stopped(self, timeout_s: float = 30.0) -> bool:
        """Join the stop thread; True when it finished within `timeout_s` (or never ran)."""
        stopper = self._stopper
        if stopper is not None:
            stopper.join(timeout_s)
            return not stopper.is_alive()
        return True

    # -- public -----------------------------------------------------------------------------
    def flush(self) -> None:
        """Redraw now on this thread (tests; a final frame)."""
        self._throttle.flush()

    def summary(self) -> str:
        return status_text(self.snapshot())

    def close(self) -> None:
        """Unsubscribe from the log, stop the redraw thread, join a running stop (idempotent)."""
        if not getattr(self, "_closed", True):
            self._closed = True
            if self._unsubscribe is not None:
                self._unsubscribe()
            self._throttle.close()
            self.wait_stopped(timeout_s=30.0)
            for child in (self.status, self.stop_button, self._row):
                child.close()
        super().close()


@dataclass(frozen=True)
class _Error:
    """What the badge quotes: the error's kind, message, evidence lines and hint."""

    kind: str | None
    message: str
    evidence: tuple[str, ...]
    hint: str | None


def _error_of(failure: Failure) -> _Error:
    return _Error(
        _FAILURE_KINDS.get(failure.kind, failure.kind), failure.message, failure.evidence(), failure.hint
    )
