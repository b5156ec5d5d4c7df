"""`wait_ready`: watch three signals at once and feed them to the server's one state.

The seed's loop polled `/v1/models` every 15 s and grepped the log every 75 s; it was
blind for a minute at a time and took a benign TP5 import line for a failure. Here three
signals reach the server's :class:`~toolkit.server.state.ServerState` (the same one its
widgets draw):

- the log, through the server's one `tail -F` follower, which feeds the state itself:
  every classified line arrives within milliseconds, so a fatal line is known as soon as
  it is written;
- an HTTP prober that proves generation (`/health_generate` for SGLang, else a one-token
  completion); `/v1/models` alone is not proof. It probes once a second while the server
  loads and every 0.1 s once the log says the HTTP server is up or the ready line came;
- the process tree, checked a few times a second: a server killed without a word
  (the OOM killer, `kill -9`) is known to be dead even if its log says nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from toolkit.errors import ReadinessTimeout, ServerDied, ServerHung
from toolkit.server.follow import LogFollower
from toolkit.server.http import ProbeOutcome
from toolkit.server.readiness import ReadinessReport, ReadinessState
from toolkit.server.state import ServerState, ServerStatus

__all__ = ["StartupWatch", "wait_ready"]

_FAST_PHASES = frozenset({"http_up", "warmup", "ready"})
# After the exit, read the log to its end before deciding: wait while the follower still makes
# progress (a loaded machine delays it by seconds), give up after this long without progress...
_EXIT_QUIET_S = 2.0
# ...or after this long in all.
_EXIT_CATCH_UP_S = 20.0


@dataclass(frozen=True)
class StartupWatch:
    """What a wait needs of a server: its state and follower, and how to probe, check and count it."""

    state: ServerState
    follower: LogFollower
    probe: Callable[[float], ProbeOutcome]  # timeout_s -> one probe
    is_alive: Callable[[], bool]
    count_log_lines: Callable[[], int | None]
    where: str  # "sim EAGLE3 on localhost (pid 4242, log /tmp/...)", for the error
    host_name: str


class _Watchers:
    """The prober and liveness threads of one wait; both joined before wait_ready returns."""

    def __init__(self, watch: StartupWatch, *, probe_interval_s: float, fast_probe_interval_s: float,
                 probe_timeout_s: float, alive_interval_s: float) -> None:
        self.watch = watch
        self.done = threading.Event()
        self.fast = threading.Event()
        self.wake = threading.Event()
        self.exited_at: float | None = None
        self.intervals = (probe_interval_s, fast_probe_interval_s)
        self.probe_timeout_s = probe_timeout_s
        self.alive_interval_s = alive_interval_s
        self.threads = [
            threading.Thread(target=self._probe_loop, name="wait_ready:probe", daemon=True),
            threading.Thread(target=self._alive_loop, name="wait_ready:alive", daemon=True),
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.done.set()
        self.wake.set()
        for thread in self.threads:
            thread.join(timeout=self.probe_timeout_s + 1)

    def on_status(self, status: ServerStatus) -> None:
        """The log says HTTP is up (or ready): probe now and often."""
        if not self.fast.is_set() and (status.log_says_ready or (status.phase or "") in _FAST_PHASES):
            self.fast.set()
            self.wake.set()

    def _probe_loop(self) -> None:
        while not self.done.is_set():
            outcome = self.watch.probe(self.probe_timeout_s)
            if self.done.is_set():
                return
            self.watch.state.probe(ok=outcome.ok, detail=outcome.detail,
                                   proves_generation=outcome.proves_generation, at=time.time())
            self.wake.wait(self.intervals[1] if self.fast.is_set() else self.intervals[0])
            self.wake.clear()

    def _alive_loop(self) -> None:
        while not self.done.wait(self.alive_interval_s):
            try:
                alive = self.watch.is_alive()
            except Exception:  # noqa: BLE001 - a lost SSH channel is not a dead server; the next check says
                continue
            if not alive:
                self.exited_at = time.time()
                return


def _error_for(report: ReadinessReport, watch: StartupWatch) -> ServerDied | ReadinessTimeout:
    failure = report.failure
    if failure is None:  # FAILED and HUNG always carry one; say so rather than assert
        return ServerDied(f"the server failed without a recorded cause [{watch.where}]", host=watch.host_name,
                          report=report)
    message = f"{failure.message} [{watch.where}]"
    kinds: dict[str, type[ServerDied] | type[ReadinessTimeout]] = {
        "died": ServerDied, "fatal": ServerDied, "timeout": ReadinessTimeout, "hung": ServerHung}
    return kinds[failure.kind](message, host=watch.host_name, evidence=failure.evidence(), hint=failure.hint,
                               report=report)


def wait_ready(
    watch: StartupWatch,
    *,
    timeout_s: float = 900.0,
    hang_after_s: float = 300.0,
    probe_interval_s: float = 1.0,
    fast_probe_interval_s: float = 0.1,
    probe_timeout_s: float = 5.0,
    alive_interval_s: float = 0.25,
) -> ReadinessReport:
    """Block until the server is proven ready; raise the error that explains why it never will be.

    Called as ``server.wait_ready(...)``, which builds the watch:

    >>> server = tk.launch(tk.Host.local(), tk.ServerSpec.simulator(tp=8, port=30000))  # doctest: +SKIP
    >>> report = server.wait_ready(timeout_s=120)                                       # doctest: +SKIP
    >>> report.time_to_ready_s, [e.rule for e in report.benign]                         # doctest: +SKIP
    (3.2, ['sglang_ignore_import_error'])

    Raises :class:`~toolkit.errors.ServerDied` (a fatal line, quoted with its rank and
    traceback, or the process gone), :class:`~toolkit.errors.ReadinessTimeout` (not ready
    within `timeout_s` of the launch) or :class:`~toolkit.errors.ServerHung` (no log output
    for `hang_after_s`). The server keeps running either way: stop it, or use `with launch(...)`.
    """
    state = watch.state
    watchers = _Watchers(watch, probe_interval_s=probe_interval_s, fast_probe_interval_s=fast_probe_interval_s,
                         probe_timeout_s=probe_timeout_s, alive_interval_s=alive_interval_s)
    changed = threading.Event()

    def on_change(status: ServerStatus) -> None:
        watchers.on_status(status)
        changed.set()

    unsubscribe = state.subscribe(on_change)
    watchers.on_status(state.status())
    watchers.start()
    lines_at_exit: int | None = None
    exit_decided = False
    progress = (-1, 0.0)  # (lines the follower had read, when that count last changed)
    try:
        while True:
            changed.wait(0.05)
            changed.clear()
            now = time.time()
            # The process is gone. The traceback that explains the death is usually the last
            # thing it wrote, and may not have reached us yet: count the file's lines once, and
            # wait until the follower has read that many (or stops making progress), then decide.
            exited_at = watchers.exited_at
            if exited_at is not None and not exit_decided:
                if lines_at_exit is None:
                    counted = watch.count_log_lines()
                    lines_at_exit = (1 << 62) if counted is None else counted
                read = watch.follower.stats.lines
                if read != progress[0]:
                    progress = (read, now)
                if (read >= lines_at_exit or now - max(progress[1], exited_at) >= _EXIT_QUIET_S
                        or now - exited_at >= _EXIT_CATCH_UP_S):
                    watch.follower.flush()
                    state.process_exited(None, now)
                    exit_decided = True
            status = state.tick(now, timeout_s=timeout_s, hang_after_s=hang_after_s)
            report = status.readiness
            if report.state is ReadinessState.READY:
                return report
            if report.state is ReadinessState.HUNG or (report.state is ReadinessState.FAILED and state.settled):
                raise _error_for(report, watch)
            if status.stop_requested_at is not None:
                raise ServerDied(f"the server was stopped while waiting for it to be ready [{watch.where}]",
                                 host=watch.host_name, report=report,
                                 hint="something stopped it (a Stop button, another thread); launch it again")
    finally:
        watchers.stop()
        unsubscribe()

