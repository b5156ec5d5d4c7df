"""LogView: a live, filterable, coloured view of a server log that never freezes the notebook.

Reader-thread batches go to a bounded deque (`history`); a throttle rebuilds one HTML widget from the
last `max_lines` matching events at most `rate_hz` times a second. `Output.append_stdout` would re-send
every earlier line on each append (quadratic).
"""

from __future__ import annotations

import html
import re
import threading
from collections import Counter, deque
from typing import Any

import ipywidgets as widgets
from traitlets import Bool, Dict, Int

from toolkit.logs import LogEvent
from toolkit.logs.caused import is_probe_completion
from toolkit.server.follow import EventSource, LogFollower
from toolkit.server.server import MultiNodeServer, Server
from toolkit.server.state import ServerStatus
from toolkit.views.widgets._log_markup import (
    VERDICTS,
    LogFilter,
    count_text,
    display_text,
    is_ours,
    log_html,
    natural_key,
    select,
    verdict_of,
)
from toolkit.views.widgets._text_repr import TextRepr
from toolkit.views.widgets._throttle import Throttle

__all__ = ["LogView"]

_ALL_RANKS = ""


class LogView(TextRepr, widgets.VBox):
    """Live log lines coloured by verdict, with verdict, rank and regex filters and a pause.

    >>> view = LogView(server)            # or LogView(follower)       # doctest: +SKIP
    >>> display(view)                                                   # doctest: +SKIP

    Filters act when the kernel is idle (a blocking cell holds the browser's messages). A Server's one
    shared follower is subscribed to, never stopped. The toolkit's own requests (``LogEvent.caused``) are
    hidden and counted. The last frame is drawn on the thread that stopped the server.
    """

    total_lines = Int(0, help="lines read from the log so far (the follower's count when it has one)")
    counts = Dict(help="events received per verdict, e.g. {'benign': 3, 'fatal': 0}")
    paused = Bool(False, help="while True the line frame is frozen; counts keep updating")

    def __init__(self, source: Server | MultiNodeServer | LogFollower | EventSource, *, max_lines: int = 500,
                 history: int = 5_000, rate_hz: float = 10.0) -> None:
        if max_lines <= 0 or history < max_lines:
            raise ValueError(f"LogView needs 0 < max_lines <= history, got max_lines={max_lines}, "
                             f"history={history}.")
        self.max_lines = max_lines
        self._buffer: deque[LogEvent] = deque(maxlen=history)
        self._lock = threading.Lock()
        self._counter: Counter[str] = Counter()
        self._received = 0
        self._ranks: set[str] = set()
        self._ours: set[int] = set()  # line numbers of the toolkit's own requests (access lines)
        self._probe_lines = 0  # completion access lines taken for wait_ready's probes
        self._ours_count = 0
        self._filter = LogFilter()
        self._pattern_error: str | None = None
        self._closed = True  # nothing to release until the throttle and follower exist

        self.verdict_toggles = {v: widgets.ToggleButton(value=True, description=v, tooltip=f"show {v} lines",
                                                        layout=widgets.Layout(width="auto"))
                                for v in VERDICTS}
        for verdict, toggle in self.verdict_toggles.items():
            toggle.add_class(f"tk-filter-{verdict}")
        self.rank = widgets.Dropdown(options=[("all ranks", _ALL_RANKS)], value=_ALL_RANKS,
                                     layout=widgets.Layout(width="9em"))
        self.pattern = widgets.Text(placeholder="regex (smart case)", layout=widgets.Layout(width="14em"))
        self.toolkit_toggle = widgets.ToggleButton(
            value=False, description="toolkit requests", layout=widgets.Layout(width="auto"),
            tooltip="show the access lines of the toolkit's own probes and metric scrapes (hidden by default)",
        )
        self.toolkit_toggle.add_class("tk-filter-toolkit")
        self.pause = widgets.ToggleButton(value=False, description="pause", icon="pause",
                                          tooltip="freeze the view; lines are still counted")
        self.count_label = widgets.HTML(value=self._count_html(0, {}))
        self.lines = widgets.HTML(value=log_html([]))
        self.lines.add_class("tk-logview-lines")
        controls = widgets.HBox([*self.verdict_toggles.values(), self.toolkit_toggle, self.rank, self.pattern,
                                 self.pause], layout=widgets.Layout(flex_flow="row wrap"))
        super().__init__(children=(controls, self.count_label, self.lines))
        self.add_class("tk-logview")

        for control in (*self.verdict_toggles.values(), self.rank, self.toolkit_toggle, self.pattern):
            control.observe(self._on_filter_change, "value")
        self.pause.observe(self._on_pause, "value")

        self._server = source if isinstance(source, Server | MultiNodeServer) else None
        self._follower = _follower_of(source)
        self._throttle = Throttle(self._render, rate_hz=rate_hz, name="LogView-redraw")
        self._closed = False
        self._ended = False
        self._unsubscribe_state = (self._server.state.subscribe(self._on_status)
                                   if self._server is not None else (lambda: None))
        self._unsubscribe = self._follower.subscribe(self._on_events, replay=True)
        self._throttle.poke()

    # -- the reader thread's side: cheap, no widget traffic -----------------------------------
    def _on_events(self, batch: list[LogEvent]) -> None:
        status = self._server.state.status() if self._server is not None else None
        with self._lock:
            self._buffer.extend(batch)
            self._received += len(batch)
            for event in batch:
                # A completion is the toolkit's probe while readiness is unproven, or while fewer were taken
                # for probes than wait_ready sent (an access line may come after the answer made it ready).
                probing = status is not None and (status.lifecycle == "starting"
                                                  or self._probe_lines < status.completion_probes)
                if is_ours(event, probing=probing):
                    self._ours.add(event.line_no)
                    self._ours_count += 1
                    self._probe_lines += is_probe_completion(event.raw)
                else:
                    self._counter[verdict_of(event)] += 1
                if event.rank:
                    self._ranks.add(event.rank)
            if len(self._ours) > 2 * (self._buffer.maxlen or 0) and self._buffer:
                oldest = self._buffer[0].line_no  # forget the marks of lines the buffer dropped
                self._ours = {n for n in self._ours if n >= oldest}
        self._throttle.poke()

    def _on_status(self, status: ServerStatus) -> None:
        """Once the server is stopped (every line is here), draw the last frame on the stopping thread."""
        if status.stopped_at is not None and not self._ended and not self._closed:
            self._ended = True
            self._throttle.flush()
            self.refresh_display()

    # -- the redraw thread's side ----------------------------------------------------------
    def _render(self) -> None:
        with self._lock:
            events, counts, ours = list(self._buffer), dict(self._counter), set(self._ours)
            ours_count = self._ours_count
            ranks = sorted(self._ranks, key=natural_key)
        total = self._total()
        self.total_lines = total
        self.counts = counts
        options = [("all ranks", _ALL_RANKS), *((rank, rank) for rank in ranks)]
        if len(options) != len(self.rank.options):
            self.rank.options = options
        shown = select(events, self._filter, self.max_lines, ours)
        if not self.paused:
            frame = log_html(shown, ours=ours)
            if frame != self.lines.value:
                self.lines.value = frame
        label = self._count_html(total, counts, shown=len(shown), buffered=len(events), ours=ours_count)
        if label != self.count_label.value:
            self.count_label.value = label

    def _count_html(self, total: int, counts: dict[str, int], *, shown: int = 0, buffered: int = 0,
                    ours: int = 0) -> str:
        filtered, error = not self._filter.is_default, self._pattern_error
        notes = [f"showing {shown:,} of the last {buffered:,}"
                 if buffered > shown + (0 if self._filter.show_ours else ours) or filtered else "",
                 f"filter: {self._filter.describe()}" if filtered else "", "paused" if self.paused else "",
                 f'<span class="tk-filter-error">{html.escape(error)}</span>' if error else ""]
        extra = "".join(f" · {note}" for note in notes if note)
        return (f'<span class="tk-count" data-total="{total}" data-benign="{counts.get("benign", 0)}"'
                f' data-fatal="{counts.get("fatal", 0)}" data-toolkit="{ours}">'
                f'{html.escape(count_text(total, counts, ours, ours_shown=self._filter.show_ours))}</span>'
                f'{extra}')

    # -- the kernel's side: browser events --------------------------------------------------
    def _on_filter_change(self, _change: dict[str, Any] | None = None) -> None:
        verdicts = frozenset(v for v, toggle in self.verdict_toggles.items() if toggle.value)
        text = self.pattern.value
        pattern = self._filter.pattern if text else None
        self._pattern_error = None
        if text:
            # Smart case, as ripgrep: lower-case patterns ignore case, "TP5" means TP5.
            flags = 0 if any(ch.isupper() for ch in text) else re.IGNORECASE
            try:
                pattern = re.compile(text, flags)
            except re.error as exc:
                self._pattern_error = f"invalid regex {text!r}: {exc}; still showing the previous filter"
        self._filter = LogFilter(verdicts=verdicts, rank=self.rank.value or None, pattern=pattern,
                                 show_ours=bool(self.toolkit_toggle.value))
        self._throttle.poke()

    def _on_pause(self, change: dict[str, Any]) -> None:
        self.paused = bool(change["new"])
        self.pause.description = "resume" if self.paused else "pause"
        self.pause.icon = "play" if self.paused else "pause"
        self._throttle.poke()

    @property
    def follower(self) -> EventSource:
        return self._follower

    @property
    def redraws(self) -> int:
        """Frames rendered so far (each is at most one update of each HTML widget)."""
        return self._throttle.renders

    def visible_events(self) -> list[LogEvent]:
        """The events the current filters select, oldest first (what the frame shows)."""
        with self._lock:
            events, ours = list(self._buffer), set(self._ours)
        return select(events, self._filter, self.max_lines, ours)

    def is_ours(self, event: LogEvent) -> bool:
        """Whether the view took ``event`` for the toolkit's own request (hidden unless the toggle is on)."""
        with self._lock:
            return event.line_no in self._ours

    def flush(self) -> None:
        """Redraw now on this thread; for tests and for a final frame before a report."""
        self._throttle.flush()

    def summary(self, last: int = 10) -> str:
        """The counts and the last lines, as text: what an executed notebook records."""
        with self._lock:
            counts, ours = dict(self._counter), self._ours_count
        total = self._total()
        where = self._follower.path if isinstance(self._follower, LogFollower) else None
        head = f"LogView{f' of {where}' if where else ''}: {count_text(total, counts, ours, ours_shown=self._filter.show_ours)}"
        if not self._filter.is_default:
            head += f" (filter: {self._filter.describe()})"
        if self._closed:
            head += " (closed)"
        shown = self.visible_events()[-last:] if last else []
        width = max((len(verdict_of(e)) for e in shown), default=0)
        body = [f"  {verdict_of(e):<{width}} | {display_text(e.raw, 300)}" for e in shown]
        return "\n".join([head, *body])

    def _total(self) -> int:
        """Lines read so far: the follower's count when it has one."""
        with self._lock:
            received = self._received
        follower = self._follower
        return max(received, follower.stats.lines) if isinstance(follower, LogFollower) else received

    def close(self) -> None:
        """Unsubscribe, stop and join the redraw thread, close the widgets (idempotent)."""
        if not self._closed:  # False only once __init__ got this far
            self._closed = True
            self._unsubscribe()
            self._unsubscribe_state()
            self._throttle.close()
            for child in (*self.verdict_toggles.values(), self.toolkit_toggle, self.rank, self.pattern, self.pause):
                child.close()
            for child in self.children:
                child.close()
        super().close()

    def __enter__(self) -> LogView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _follower_of(source: Server | MultiNodeServer | LogFollower | EventSource) -> EventSource:
    """The follower to subscribe to: the source itself, or a Server's shared one."""
    if isinstance(source, Server | MultiNodeServer):
        return source.follow()  # the server's one follower, started; it stops with the server
    if isinstance(source, LogFollower | EventSource):
        return source
    raise TypeError(f"LogView needs a Server or a LogFollower, got {type(source).__name__}; pass server or "
                    "server.follow().")
