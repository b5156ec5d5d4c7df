"""Follow a server log live, on any host, through one long-lived `tail -F` channel.

The seed re-ran `ssh ... grep` every 75 s and saw the log a minute late. `tail -F` survives truncation,
rotation and a re-created file; each line is redacted here (the one gate for log lines), and lines read
after `stop_requested()` (the engine dying of our SIGTERM) reach subscribers as `shutdown` lines.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from toolkit.host.shell import quote_path
from toolkit.logs import LogClassifier, LogEvent, after_stop
from toolkit.logs.stream import iter_line_batches
from toolkit.redaction import redact_text
from toolkit.server.logfile import count_lines

if TYPE_CHECKING:
    from toolkit.host.place import Place
    from toolkit.host.streams import ByteStream

__all__ = ["LogFollower", "FollowStats", "EventSource"]

Subscriber = Callable[[list[LogEvent]], object]


@runtime_checkable
class EventSource(Protocol):
    """What a view subscribes to: a follower, or in a test a list of events played by hand."""

    def subscribe(self, callback: Subscriber, *, replay: bool = True) -> Callable[[], None]: ...

_READ_TIMEOUT_S = 0.05  # how long one read waits: bounds the latency of stop() and of idle flushes
# A traceback is grouped into one event, decided on its last line. When the log goes quiet
# this long with a group still open (a process killed mid-traceback), close it as it is.
_FLUSH_AFTER_QUIET_S = 0.3


@dataclass(frozen=True)
class FollowStats:
    """Counters a benchmark or a widget shows: what went through, and how fast."""

    lines: int
    bytes: int
    dropped_from_buffer: int
    started_at: float
    last_line_at: float | None


class LogFollower:
    """Stream `path` on `host` into classified events; subscribers run on the reader thread: never block.

    >>> follower = LogFollower(tk.Host.local(), "/tmp/server.log")   # doctest: +SKIP
    >>> with follower:                                               # doctest: +SKIP
    ...     follower.subscribe(lambda events: print(events[-1].text))
    """

    def __init__(self, host: Place, path: str, *, engine: str = "auto",
                 classifier: LogClassifier | None = None, capacity: int = 20_000,
                 backlog_lines: int | None = None, redact: Callable[[str], str] = redact_text) -> None:
        """``backlog_lines=N`` joins a running server's log with its last N lines (numbered as in the file);
        ``redact`` cleans each line before anything sees it (a Server passes its spec's Redactor)."""
        self.host = host
        self.path = path
        self.capacity = capacity
        self._classifier = classifier if classifier is not None else LogClassifier(engine=engine)
        if backlog_lines is not None and backlog_lines < 0:
            raise ValueError(f"backlog_lines must be >= 0 or None (the whole log), got {backlog_lines}")
        self._backlog = backlog_lines
        self._redact = redact
        self._events: deque[LogEvent] = deque(maxlen=capacity)
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: ByteStream | None = None
        self._lines = 0
        self._bytes = 0
        self._dropped = 0
        self._started_at = time.time()
        self._last_line_at: float | None = None
        self.error: BaseException | None = None  # why the reader stopped, if on an error (a lost SSH channel)
        self.stop_line: int | None = None  # the last line before the toolkit asked for a stop
        self.finished = threading.Event()  # set when the stream ended or the follower stopped

    def start(self) -> LogFollower:
        """Open the channel and start the reader thread (idempotent)."""
        if self._thread is not None:
            return self
        start = "+1"
        if self._backlog is not None:
            # Joined mid-run: number the lines as the file does (a reader compares them with grep -n).
            self._classifier.line_no = max(0, (count_lines(self.host, self.path) or 0) - self._backlog)
            start = str(self._backlog)
        self._stream = self.host.open_stream(f"exec tail -n {start} -F {quote_path(self.path)} 2>/dev/null")
        self._thread = threading.Thread(target=self._run, name=f"follow:{self.path}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the channel and join the reader thread (idempotent)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5)
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        self.finished.set()

    def stop_requested(self) -> int:
        """Lines written from now on are ``shutdown`` lines; returns the last one before (idempotent).

        The mark is the file's line count, not what was read: a death just before the stop stays fatal."""
        if self.stop_line is not None:
            return self.stop_line
        written = count_lines(self.host, self.path) if self._thread is not None else None
        with self._lock:
            if self.stop_line is None:
                self.stop_line = max(written or 0, self._classifier.line_no)
            return self.stop_line

    def __enter__(self) -> LogFollower:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def subscribe(self, callback: Subscriber, *, replay: bool = True) -> Callable[[], None]:
        """Call `callback(batch)` for each new batch (`replay`: the buffer first); returns unsubscribe."""
        with self._lock:
            self._subscribers.append(callback)
            backlog = list(self._events) if replay else []
        if backlog:
            callback(backlog)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def events(self) -> list[LogEvent]:
        """A snapshot of the ring buffer, oldest first."""
        with self._lock:
            return list(self._events)

    def tail(self, n: int = 20) -> list[LogEvent]:
        return self.events()[-n:]

    @property
    def stats(self) -> FollowStats:
        return FollowStats(self._lines, self._bytes, self._dropped, self._started_at, self._last_line_at)

    def wait_for_lines(self, lines: int, timeout_s: float = 3.0) -> bool:
        """Wait until ``lines`` lines were read; False after ``timeout_s`` or once the stream ended short."""
        deadline = time.monotonic() + timeout_s
        while self._lines < lines:
            if self.finished.is_set() or time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def flush(self, *, server_died: bool = False) -> None:
        """Close what the classifier holds open (a traceback cut short) and publish it; ``server_died``: a
        traceback the log ends with is the death (``traceback_ends_log``), not a warning left open."""
        with self._lock:
            pending = self._classifier.end_of_log() if server_died else self._classifier.finish()
        self._publish(pending)

    def _run(self) -> None:
        try:
            for lines in iter_line_batches(self._chunks(), live=True):  # linear, long lines cut to their ends
                self._ingest(lines)
            self.flush()
        except BaseException as exc:  # the owner reads .error; the thread must not die silently
            self.error = exc
        finally:
            self.finished.set()

    def _chunks(self) -> Iterator[bytes]:
        """The stream's bytes until it ends or the follower stops; a quiet spell flushes the classifier."""
        stream = self._stream
        flushed = True
        while not self._stop.is_set() and stream is not None:
            chunk = stream.read(_READ_TIMEOUT_S)
            if chunk is None:
                quiet_for = time.time() - (self._last_line_at or self._started_at)
                if not flushed and quiet_for >= _FLUSH_AFTER_QUIET_S:
                    self.flush()
                    flushed = True
                continue
            if chunk == b"":
                return
            self._bytes += len(chunk)
            flushed = False
            yield chunk

    def _ingest(self, lines: list[str]) -> None:
        feed, redact = self._classifier.feed, self._redact
        with self._lock:  # the classifier is stateful: flush() from another thread must not interleave
            batch = [event for line in lines for event in feed(redact(line))]
        if lines:
            self._lines += len(lines)
            self._last_line_at = time.time()
        self._publish(batch)

    def _publish(self, batch: list[LogEvent]) -> None:
        if not batch:
            return
        with self._lock:
            stop_line = self.stop_line
            if stop_line is not None:
                batch = [after_stop(e) if e.line_no > stop_line else e for e in batch]
            self._dropped += max(0, len(self._events) + len(batch) - self.capacity)
            self._events.extend(batch)
            subscribers = list(self._subscribers)
        for callback in subscribers:
            callback(batch)
