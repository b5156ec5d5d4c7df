"""Pure: a server's state as a badge, a line of text, and an error block with quoted lines."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["PanelState", "StatusSnapshot", "status_html", "status_text", "format_duration"]

PanelState = Literal["starting", "ready", "failed", "stopping", "stopped"]

_BADGE_COLOURS: dict[str, str] = {
    "starting": "var(--jp-warn-color1,#b26a00)", "ready": "var(--jp-success-color1,#2e7d32)",
    "failed": "var(--jp-error-color1,#d32f2f)", "stopping": "var(--jp-content-font-color2,#666)",
    "stopped": "var(--jp-content-font-color2,#666)",
}
_MAX_EVIDENCE_LINES = 40


@dataclass(frozen=True)
class StatusSnapshot:
    """Everything the badge shows, captured at one instant (pure data, rendered twice)."""

    state: PanelState
    elapsed_s: float | None
    phase: str | None = None
    label: str | None = None
    url: str | None = None
    host: str | None = None
    pid: int | None = None
    error_kind: str | None = None
    error_message: str | None = None
    evidence: tuple[str, ...] = field(default=())
    hint: str | None = None
    note: str | None = None


def format_duration(seconds: float | None) -> str:
    """12.3 s, 4 min 05 s, 1 h 02 min: the unit a person reads at a glance."""
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _verb(snapshot: StatusSnapshot) -> str:
    since = "for" if snapshot.state == "starting" else "after"
    return f"{snapshot.state} {since} {format_duration(snapshot.elapsed_s)}"


def status_text(snapshot: StatusSnapshot) -> str:
    """One line (plus the error block when failed): what an executed notebook records."""
    parts = [_verb(snapshot), snapshot.phase and f"phase {snapshot.phase!r}", snapshot.label, snapshot.url,
             snapshot.host and f"host {snapshot.host}",
             None if snapshot.pid is None else f"pid {snapshot.pid}", snapshot.note]
    lines = ["ServerPanel: " + " · ".join(part for part in parts if part)]
    if snapshot.error_message:
        kind = f"{snapshot.error_kind}: " if snapshot.error_kind else ""
        lines.append(f"  {kind}{snapshot.error_message}")
        lines.extend(f"  | {line}" for line in _quoted(snapshot.evidence, snapshot.error_message))
        if snapshot.hint:
            lines.append(f"  what to do: {snapshot.hint}")
    return "\n".join(lines)


def _quoted(evidence: Sequence[str], message: str) -> list[str]:
    """The evidence lines, less the one the message quotes (an OOM read four times in one cell, issue 28)."""
    lines = [line for line in evidence if line.split(": ", 1)[-1] not in message]
    if len(lines) > _MAX_EVIDENCE_LINES:
        lines = [f"… {len(lines) - _MAX_EVIDENCE_LINES} earlier lines"] + lines[-_MAX_EVIDENCE_LINES:]
    return lines


def status_html(snapshot: StatusSnapshot) -> str:
    """The badge: `.tk-status[data-state=...]` with the elapsed time, phase, URL, host and pid."""
    esc = html.escape
    colour = _BADGE_COLOURS[snapshot.state]
    meta = [snapshot.label and f'<span class="tk-label">{esc(snapshot.label)}</span>',
            snapshot.url and f'<a class="tk-url" href="{esc(snapshot.url)}" target="_blank" rel="noopener">'
                             f'{esc(snapshot.url)}</a>',
            snapshot.host and f'host <code class="tk-host">{esc(snapshot.host)}</code>',
            None if snapshot.pid is None else f'pid <code class="tk-pid">{int(snapshot.pid)}</code>',
            snapshot.note and f'<span class="tk-note">{esc(snapshot.note)}</span>']
    phase = f' · phase <span class="tk-phase">{esc(snapshot.phase)}</span>' if snapshot.phase else ""
    error = ""
    if snapshot.error_message:
        kind = f'<b class="tk-error-kind">{esc(snapshot.error_kind)}</b>: ' if snapshot.error_kind else ""
        quoted = "\n".join(esc(line, quote=False) for line in _quoted(snapshot.evidence, snapshot.error_message))
        evidence = f'<pre class="tk-evidence">{quoted}</pre>' if quoted else ""
        hint = f'<div class="tk-hint">what to do: {esc(snapshot.hint)}</div>' if snapshot.hint else ""
        error = ('<div class="tk-error" style="border-left:3px solid var(--jp-error-color1,#d32f2f);'
                 f'padding:2px 8px;margin-top:4px">{kind}<span class="tk-error-message">'
                 f'{esc(snapshot.error_message)}</span>{evidence}{hint}</div>')
    elapsed = "" if snapshot.elapsed_s is None else f"{snapshot.elapsed_s:.1f}"
    return (f'<div class="tk-status" data-state="{snapshot.state}" data-elapsed-s="{elapsed}"'
            f' data-phase="{esc(snapshot.phase or "")}">'
            f'<span class="tk-badge" style="background:{colour};color:white;border-radius:3px;'
            f'padding:1px 8px;font-weight:600">{snapshot.state}</span> '
            f'<span class="tk-elapsed">{esc(_verb(snapshot))}</span>{phase}'
            f'<div class="tk-meta">{" · ".join(part for part in meta if part)}</div>{error}</div>')
