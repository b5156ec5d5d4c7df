"""Pure: which log events a view shows, and the HTML and text it shows them as (the DOM contract of
`toolkit.views.widgets`, tested as exact strings)."""

from __future__ import annotations

import html
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice

from toolkit.logs import LogEvent, is_probe_completion
from toolkit.logs.caused import REQUEST
from toolkit.logs.inert import inert_text
from toolkit.logs.line import strip_ansi

__all__ = ["VERDICTS", "LogFilter", "LOG_CSS", "select", "verdict_of", "display_text", "line_html",
           "log_html", "count_text", "natural_key", "is_ours"]

# Display order of the verdict filters: what a person looks for first comes first.
VERDICTS: tuple[str, ...] = ("fatal", "warning", "benign", "ready", "metric", "progress", "info", "shutdown")

MAX_LINE_CHARS = 2_000  # one minified JSON config line must not make a frame megabytes long
MAX_CONTEXT_LINES = 40  # a traceback's last frames and its message; the full text is in the log


def verdict_of(event: LogEvent) -> str:
    """The verdict as its plain string ("benign")."""
    return event.verdict.value


def is_ours(event: LogEvent, *, probing: bool = False) -> bool:
    """Whether ``event`` is the access line of the toolkit's own request: a probe or scrape (``event.caused``)
    always; a completion while ``probing`` (before readiness only the toolkit's probe sends one)."""
    return event.caused == REQUEST or (probing and is_probe_completion(event.raw))


@dataclass(frozen=True)
class LogFilter:
    """What the view shows: verdicts, one rank or all, an optional regex, the toolkit's requests or not."""

    verdicts: frozenset[str] = frozenset(VERDICTS)
    rank: str | None = None
    pattern: re.Pattern[str] | None = None
    show_ours: bool = False

    def matches(self, event: LogEvent, ours: bool = False) -> bool:
        return ((self.show_ours or not ours) and verdict_of(event) in self.verdicts
                and (self.rank is None or event.rank == self.rank)
                and (self.pattern is None or self.pattern.search(event.raw) is not None))

    @property
    def is_default(self) -> bool:
        return (self.verdicts == frozenset(VERDICTS) and self.rank is None and self.pattern is None
                and not self.show_ours)

    def describe(self) -> str:
        parts = ["verdict in " + "/".join(v for v in VERDICTS if v in self.verdicts)
                 if self.verdicts != frozenset(VERDICTS) else "",
                 f"rank {self.rank}" if self.rank is not None else "",
                 f"/{self.pattern.pattern}/" if self.pattern is not None else "",
                 "toolkit requests shown" if self.show_ours else ""]
        return ", ".join(part for part in parts if part) or "none"


def select(events: Sequence[LogEvent], log_filter: LogFilter, limit: int, ours: Container[int] = ()) -> list[LogEvent]:
    """The last `limit` events that pass the filter, oldest first (``ours``: the toolkit's requests)."""
    if log_filter.is_default and not ours:
        return list(events[-limit:]) if limit else []
    chosen = (event for event in reversed(events) if log_filter.matches(event, event.line_no in ours))
    return list(islice(chosen, limit))[::-1]


def display_text(raw: str, max_chars: int = MAX_LINE_CHARS) -> str:
    """What a terminal would show: no colour codes, the last `\\r` redraw, control characters made inert."""
    text = strip_ansi(raw).rstrip("\r\n")
    if "\r" in text:  # a progress bar redrawn in place: the terminal shows the last frame
        frames = [frame for frame in text.split("\r") if frame.strip()]
        text = frames[-1] if frames else ""
    text = inert_text(text)
    if len(text) > max_chars:
        text = text[:max_chars] + f"… [{len(text) - max_chars:,} more characters]"
    return text


def _title(event: LogEvent, verdict: str) -> str:
    metric = event.metric
    values = "" if metric is None else ", ".join(f"{key}={value}" for key, value in metric.values.items())
    parts = [verdict, f"rule: {event.rule}" if event.rule else "",
             f"phase: {event.phase}" if event.phase else "",
             "" if metric is None else f"{metric.kind}: {values}", f"line {event.line_no}"]
    return " · ".join(part for part in parts if part)


def line_html(event: LogEvent, *, ours: bool = False) -> str:
    """One line element; every piece of log text is escaped, in content and in attributes."""
    verdict = verdict_of(event)
    attrs = [f'class="tk-line tk-{html.escape(verdict)}{" tk-toolkit" if ours else ""}"',
             f'data-verdict="{html.escape(verdict)}"', f'data-line="{int(event.line_no)}"',
             'data-toolkit="1"' if ours else "",
             f'data-rank="{html.escape(event.rank)}"' if event.rank else "",
             f'data-rule="{html.escape(event.rule)}"' if event.rule else "",
             f'title="{html.escape(_title(event, verdict))}"']
    body = html.escape(display_text(event.raw), quote=False)
    if event.context:  # a grouped traceback: its earlier lines, then the decisive line, as printed
        context = list(event.context)
        hidden = len(context) - MAX_CONTEXT_LINES
        if hidden > 0:
            context = [f"… {hidden:,} earlier lines"] + context[-MAX_CONTEXT_LINES:]
        quoted = "\n".join(html.escape(display_text(line), quote=False) for line in context)
        body = f'<div class="tk-context">{quoted}</div>{body}'
    return f"<div {' '.join(attr for attr in attrs if attr)}>{body}</div>"


# Theme variables first (JupyterLab's dark theme), literal colours as the exported fallback. Benign lines are
# dimmed, not hidden: "benign" is our judgement and the person may disagree.
LOG_CSS = """<style>
.tk-log{font-family:var(--jp-code-font-family,monospace);font-size:var(--jp-code-font-size,12px);
 max-height:28em;overflow-y:auto;display:flex;flex-direction:column-reverse;
 border:1px solid var(--jp-border-color2,#ddd);padding:2px 6px;line-height:1.35}
.tk-log .tk-line{white-space:pre-wrap;overflow-wrap:anywhere}
.tk-log .tk-fatal{color:var(--jp-error-color1,#d32f2f);font-weight:600}
.tk-log .tk-warning{color:var(--jp-warn-color1,#b26a00)}
.tk-log .tk-benign{opacity:0.5}
.tk-log .tk-shutdown{opacity:0.5;font-style:italic}
.tk-log .tk-toolkit{opacity:0.45}
.tk-log .tk-ready{color:var(--jp-success-color1,#2e7d32);font-weight:600}
.tk-log .tk-metric{border-left:3px solid var(--jp-brand-color1,#1976d2);padding-left:4px}
.tk-log .tk-context{padding-left:2em;font-weight:normal}
.tk-log .tk-empty{color:var(--jp-content-font-color2,#666);font-style:italic}
</style>"""


def log_html(events: Iterable[LogEvent], *, empty: str = "no log lines yet", ours: Container[int] = ()) -> str:
    """The style block and a scroller pinned to the newest line (`column-reverse`: the widget runs no JS)."""
    lines = [line_html(event, ours=event.line_no in ours) for event in events]
    body = "".join(lines) if lines else f'<div class="tk-empty">{html.escape(empty)}</div>'
    return f'{LOG_CSS}<div class="tk-log" data-lines="{len(lines)}"><div class="tk-lines">{body}</div></div>'


def count_text(total: int, counts: Mapping[str, int], ours: int = 0, *, ours_shown: bool = False) -> str:
    """ "12,345 lines, 3 benign, 0 fatal" and any warnings, shutdown lines and toolkit requests (``ours``)."""
    text = f"{total:,} lines, {counts.get('benign', 0):,} benign, {counts.get('fatal', 0):,} fatal"
    if counts.get("warning"):
        text += f", {counts['warning']:,} warning"
    if counts.get("shutdown"):
        text += f", {counts['shutdown']:,} after the stop"
    if ours:
        text += f", {ours:,} toolkit requests{'' if ours_shown else ' (hidden)'}"
    return text


def natural_key(rank: str) -> tuple[object, ...]:
    """Sort TP2 before TP10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", rank))
