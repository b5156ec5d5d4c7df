"""Pure: DataFrames as escaped HTML tables, and an environment matrix with status colours."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from toolkit.logs.inert import inert_text

__all__ = ["format_value", "frame_html", "frame_text", "env_pivot_html", "STATUS_STYLES", "TABLE_CSS"]

TABLE_CSS = """<style>
.tk-table{border-collapse:collapse;font-size:var(--jp-ui-font-size1,13px);font-variant-numeric:tabular-nums}
.tk-table th,.tk-table td{padding:2px 8px;border-bottom:1px solid var(--jp-border-color2,#ddd);text-align:right}
.tk-table th{font-weight:600}
.tk-table td.tk-cell-status{color:#111}
</style>"""

# Background colours by status (text forced dark, readable under JupyterLab's dark theme).
_GREEN, _AMBER, _RED, _GREY, _BLUE = "#e8f5e9", "#fff3e0", "#ffebee", "#eceff1", "#e3f2fd"
STATUS_STYLES: Mapping[str, str] = {
    "ok": _GREEN, "overridden": _AMBER, "missing": _RED, "unreadable": _GREY,  # envcheck
    "done": _GREEN, "running": _BLUE, "failed": _RED, "interrupted": _AMBER,  # journal steps
    "confirmed": _GREEN, "refuted": _AMBER, "inconclusive": _GREY,  # verdicts
}


def format_value(value: Any) -> str:
    """Numbers a person compares: thousands separators, about three significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:,.1f}"
        return f"{value:.3g}"
    return str(value)


def _cell(value: Any, *, status_column: bool = False) -> str:
    text = html.escape(inert_text(format_value(value)))
    if status_column and isinstance(value, str) and value.lower() in STATUS_STYLES:
        key = html.escape(value.lower())
        return (f'<td class="tk-cell-status tk-status-{key}" data-status="{key}" '
                f'style="background:{STATUS_STYLES[value.lower()]}">{text}</td>')
    return f"<td>{text}</td>"


def frame_html(frame: pd.DataFrame, *, max_rows: int, css_class: str,
               status_columns: tuple[str, ...] = ("verdict", "status", "outcome")) -> str:
    """The last `max_rows` rows as an escaped table; status-like columns are coloured."""
    shown = frame.tail(max_rows)
    columns = [str(c) for c in shown.columns]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    status = [c in status_columns for c in columns]
    body = "".join("<tr>" + "".join(_cell(v, status_column=s) for v, s in zip(row, status, strict=True))
                   + "</tr>" for row in shown.itertuples(index=False, name=None))
    note = (f'<div class="tk-table-note">showing the last {len(shown):,} of {len(frame):,} rows</div>'
            if len(frame) > len(shown) else "")
    return (f'{TABLE_CSS}<div class="{html.escape(css_class)}" data-rows="{len(frame)}">'
            f'<table class="tk-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
            f'{note}</div>')


def frame_text(frame: pd.DataFrame, *, max_rows: int = 10) -> str:
    """The last rows as aligned text (numbers formatted as in the HTML)."""
    if frame.empty:
        return "  (no rows)"
    text = frame.tail(max_rows).map(format_value).to_string(index=False)
    return "\n".join("  " + line for line in text.splitlines())


def env_pivot_html(frame: pd.DataFrame, *, rows: str, columns: str, value: str, status: str,
                   expected: str | None) -> str:
    """Variables down, processes across; each cell the observed value on its status colour, its tooltip what
    was expected (a red TP5 cell explains itself on hover)."""
    row_keys = list(dict.fromkeys(str(v) for v in frame[rows]))
    col_keys = list(dict.fromkeys(str(v) for v in frame[columns]))
    cells = {(str(record[rows]), str(record[columns])): record for record in frame.to_dict("records")}
    head = f"<th>{html.escape(rows)}</th>" + "".join(f"<th>{html.escape(c)}</th>" for c in col_keys)
    body = []
    for r in row_keys:
        tds = []
        for c in col_keys:
            record = cells.get((r, c))
            if record is None:
                tds.append('<td data-status="absent"></td>')
                continue
            state = str(record.get(status, "") or "").lower()
            shown = format_value(record.get(value))
            title = f"{c} {r}: {state or 'no status'}; observed {shown or '(unset)'}"
            if expected is not None and expected in record:
                title += f"; expected {format_value(record.get(expected)) or 'any value'}"
            reason = record.get("reason")
            if isinstance(reason, str) and reason:
                title += f" ({reason})"
            colour = STATUS_STYLES.get(state)
            style = f' style="background:{colour}"' if colour else ""
            tds.append(f'<td class="tk-cell-status tk-status-{html.escape(state)}"'
                       f' data-status="{html.escape(state)}" title="{html.escape(title)}"{style}>'
                       f'{html.escape(shown)}</td>')
        body.append(f"<tr><th>{html.escape(r)}</th>{''.join(tds)}</tr>")
    return (f'{TABLE_CSS}<div class="tk-env" data-rows="{len(row_keys)}" data-columns="{len(col_keys)}">'
            f'<table class="tk-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
            '</table></div>')
