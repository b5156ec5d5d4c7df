"""`wait_ready`: the I/O driver of the readiness tracker, watching three signals at once.

The seed's loop polled `/v1/models` every 15 s and grepped the log every 75 s; it was
blind for a minute at a time and took a benign TP5 import line for a failure. Here three
watchers feed one pure :class:`toolkit.server.readiness.ReadinessTracker` through one queue:

- the log, through the server's one `tail -F` follower: every classified line arrives
  within milliseconds, so a fatal line is known as soon as it is written;
- an HTTP prober that proves generation (`/health_generate` for SGLang, else a one-token
  completion); `/v1/models` alone is not proof. It probes once a second while the server
  loads and every 0.1 s once the log says the HTTP server is up or the ready line came;
- the process tree, checked a few times a second: a server killed without a word
  (the OOM killer, `kill -9`) is known to be dead even if its log says nothing.
"""

from __future__ import annotations

import json
import queue
import shlex
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from toolkit.errors import ReadinessTimeout, ServerDied, ServerHung, ToolkitError
from toolkit.logs import LogEvent, Verdict
from toolkit.server.readiness import ReadinessReport, ReadinessState, ReadinessTracker

if TYPE_CHECKING:
    from toolkit.server.launch import Server

__all__ = ["wait_ready", "probe_generation", "ProbeOutcome"]

_FAST_PHASES = frozenset({"http_up", "warmup", "ready"})


@dataclass(frozen=True)
class ProbeOutcome:
    """One probe: did it pass, what it said, and did it prove that the server generates."""

    ok: bool
    detail: str
    proves_generation: bool


def _http(url: str, *, body: dict[str, object] | None = None, timeout_s: float) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 (http only)
            return response.status, response.read(65536)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(2048) if exc.fp is not None else b""


def probe_generation(url: str, engine: str, *, timeout_s: float = 5.0, model: str | None = None) -> ProbeOutcome:
    """Ask the server to prove it generates; never raises (a refused connection is a failed probe).

    SGLang: `GET /health_generate` runs one decode step through the scheduler. Others:
    `GET /v1/models` (proves only that HTTP is up), then a one-token completion.
    """
    base = url.rstrip("/")
    try:
        if engine == "sglang":
            status, _ = _http(f"{base}/health_generate", timeout_s=timeout_s)
            return ProbeOutcome(status == 200, f"GET /health_generate {status}", status == 200)
        if model is None:
            status, payload = _http(f"{base}/v1/models", timeout_s=timeout_s)
            if status != 200:
                return ProbeOutcome(False, f"GET /v1/models {status}", False)
            models = json.loads(payload).get("data") or []
            if not models:
                return ProbeOutcome(True, "GET /v1/models 200 (no model listed)", False)
            model = str(models[0]["id"])
        body: dict[str, object] = {"model": model, "prompt": "ping", "max_tokens": 1, "temperature": 0}
        status, _ = _http(f"{base}/v1/completions", body=body, timeout_s=timeout_s)
        if status == 404:  # a chat-only server
            chat = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
            status, _ = _http(f"{base}/v1/chat/completions", body=chat, timeout_s=timeout_s)
            return ProbeOutcome(status == 200, f"POST /v1/chat/completions (1 token) {status}", status == 200)
        return ProbeOutcome(status == 200, f"POST /v1/completions (1 token) {status}", status == 200)
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
        reason = getattr(exc, "reason", exc)
        return ProbeOutcome(False, f"{type(exc).__name__}: {reason}", False)


Item = tuple[Literal["events"], list[LogEvent]] | tuple[Literal["probe"], ProbeOutcome] | tuple[Literal["exit"], None]


class _Watchers:
    """The prober and liveness threads of one wait; both joined before wait_ready returns."""

    def __init__(self, server: Server, items: queue.SimpleQueue[Item], *, probe_interval_s: float,
                 fast_probe_interval_s: float, probe_timeout_s: float, alive_interval_s: float) -> None:
        self.server = server
        self.items = items
        self.done = threading.Event()
        self.fast = threading.Event()
        self.wake = threading.Event()
        self.intervals = (probe_interval_s, fast_probe_interval_s)
        self.probe_timeout_s = probe_timeout_s
        self.alive_interval_s = alive_interval_s
        engine = server.spec.engine
        self.engine = engine if engine in ("sglang", "vllm") else "generic"
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

    def hurry(self) -> None:
        """The log says HTTP is up (or ready): probe now and often."""
        self.fast.set()
        self.wake.set()

    def _probe_loop(self) -> None:
        model = self.server.spec.model if self.engine == "generic" and self.server.spec.engine == "transformers" else None
        while not self.done.is_set():
            self.items.put(("probe", probe_generation(self.server.url, self.engine, timeout_s=self.probe_timeout_s,
                                                      model=model)))
            self.wake.wait(self.intervals[1] if self.fast.is_set() else self.intervals[0])
            self.wake.clear()

    def _alive_loop(self) -> None:
        while not self.done.wait(self.alive_interval_s):
            try:
                alive = self.server.is_alive()
            except Exception:  # noqa: BLE001 - a lost SSH channel is not a dead server; the next check says
                continue
            if not alive:
                self.items.put(("exit", None))
                return


def _line_count(server: Server) -> int:
    """Lines in the log file now (0 when it cannot be read: then we wait out the cap)."""
    try:
        out = server.host.run(f"wc -l < {shlex.quote(server.log_path)}", check=False).stdout.strip()
        return int(out or 0)
    except (ToolkitError, ValueError):
        return 1 << 62


def _drain(items: queue.SimpleQueue[Item]) -> list[Item]:
    drained: list[Item] = []
    while True:
        try:
            drained.append(items.get_nowait())
        except queue.Empty:
            return drained


def _raise_for(report: ReadinessReport, server: Server) -> None:
    failure = report.failure
    assert failure is not None  # FAILED/HUNG always carry one
    where = f"{server.spec.describe()} on {server.host.name} (pid {server.pid}, log {server.log_path})"
    message = f"{failure.message} [{where}]"
    error_type = {"died": ServerDied, "fatal": ServerDied, "timeout": ReadinessTimeout, "hung": ServerHung}[failure.kind]
    error = error_type(message, host=server.host.name, evidence=failure.evidence(), hint=failure.hint)
    error.report = report  # type: ignore[attr-defined]
    raise error


def wait_ready(
    server: Server,
    *,
    timeout_s: float = 900.0,
    hang_after_s: float = 300.0,
    probe_interval_s: float = 1.0,
    fast_probe_interval_s: float = 0.1,
    probe_timeout_s: float = 5.0,
    alive_interval_s: float = 0.25,
    settle_s: float = 2.0,
) -> ReadinessReport:
    """Block until `server` is proven ready; raise the error that explains why it never will be.

    >>> server = tk.launch(tk.Host.local(), tk.ServerSpec.simulator(tp=8, port=30000))  # doctest: +SKIP
    >>> report = server.wait_ready(timeout_s=120)                                       # doctest: +SKIP
    >>> report.time_to_ready_s, [e.rule for e in report.benign]                         # doctest: +SKIP
    (3.2, ['sglang_ignore_import_error'])

    Raises :class:`~toolkit.errors.ServerDied` (a fatal line, quoted with its rank and
    traceback, or the process gone), :class:`~toolkit.errors.ReadinessTimeout` (not ready
    within `timeout_s`) or :class:`~toolkit.errors.ServerHung` (no log output for
    `hang_after_s`). The server keeps running either way: stop it, or use `with launch(...)`.
    """
    tracker = ReadinessTracker(started_at=server.started_at, hang_after_s=hang_after_s, timeout_s=timeout_s,
                               settle_s=settle_s)
    items: queue.SimpleQueue[Item] = queue.SimpleQueue()
    follower = server.follow()
    unsubscribe = follower.subscribe(lambda batch: items.put(("events", batch)), replay=True)
    watchers = _Watchers(server, items, probe_interval_s=probe_interval_s, fast_probe_interval_s=fast_probe_interval_s,
                         probe_timeout_s=probe_timeout_s, alive_interval_s=alive_interval_s)
    watchers.start()
    exited_at: float | None = None
    lines_at_exit: int | None = None
    exit_decided = False
    try:
        while True:
            try:
                item = items.get(timeout=0.05)
            except queue.Empty:
                item = None
            now = time.time()
            if item is not None:
                kind, payload = item
                if kind == "events":
                    for event in payload:  # type: ignore[union-attr]
                        tracker.observe(event, now)
                        if event.verdict is Verdict.READY or (event.phase is not None and event.phase in _FAST_PHASES):
                            watchers.hurry()
                elif kind == "probe":
                    outcome: ProbeOutcome = payload  # type: ignore[assignment]
                    tracker.probe(outcome.ok, outcome.detail, outcome.proves_generation, at=now)
                elif kind == "exit" and exited_at is None:
                    exited_at = now
            # The process is gone. The traceback that explains the death is usually the last
            # thing it wrote, and may not have reached us yet: count the file's lines once,
            # wait (at most 2 s) until the follower has read that many, then decide.
            if exited_at is not None and not exit_decided:
                if lines_at_exit is None:
                    lines_at_exit = _line_count(server)
                caught_up = follower.stats.lines >= lines_at_exit or now - exited_at >= 2.0
                if caught_up and tracker.state is not ReadinessState.FAILED:
                    follower.flush()
                    for extra in _drain(items):
                        if extra[0] == "events":
                            for event in extra[1]:
                                tracker.observe(event, now)
                if caught_up:
                    tracker.process_exited(None, now)
                    exit_decided = True
            state = tracker.tick(now)
            if state is ReadinessState.READY:
                server.readiness = tracker.report()
                return server.readiness
            if state is ReadinessState.HUNG or (state is ReadinessState.FAILED and tracker.settled):
                server.readiness = tracker.report()
                _raise_for(server.readiness, server)
    finally:
        watchers.stop()
        unsubscribe()
