"""Tables a notebook watches: live results, the environment matrix, the journal's steps."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import pandas as pd
from traitlets import Int

from toolkit.journal import Journal
from toolkit.views.widgets._table_markup import env_pivot_html, format_value, frame_html, frame_text
from toolkit.views.widgets._text_repr import TextRepr
from toolkit.views.widgets._throttle import Throttle

if TYPE_CHECKING:
    from toolkit.moves.envcheck import EnvReport

__all__ = ["ResultsTable", "EnvMatrix", "JournalSteps"]


class ResultsTable(TextRepr, widgets.VBox):
    """A table that grows as results arrive; `append` from any thread; keeps `history` rows, draws `max_rows`.

    >>> table = ResultsTable(columns=["spec", "output_tok_s", "ttft_p99_ms"])   # doctest: +SKIP
    >>> table.append({"spec": "EAGLE3", "output_tok_s": 61.2, "ttft_p99_ms": 240})  # doctest: +SKIP
    """

    _closed = True  # until __init__ finished: ipywidgets calls close() from __del__ too

    row_count = Int(0, help="rows appended so far (including any dropped from the history)")

    def __init__(self, rows: Iterable[Mapping[str, Any]] = (), *, columns: Sequence[str] | None = None,
                 max_rows: int = 50, history: int = 10_000, rate_hz: float = 10.0) -> None:
        self.columns = list(columns) if columns is not None else None
        self.max_rows = max_rows
        self._rows: deque[dict[str, Any]] = deque(maxlen=history)
        self._appended = 0
        self._lock = threading.Lock()
        self.table = widgets.HTML()
        self.table.add_class("tk-results-widget")
        super().__init__(children=(self.table,))
        self._throttle = Throttle(self._render, rate_hz=rate_hz, name="ResultsTable-redraw")
        self._closed = False
        self.extend(rows)
        self._throttle.flush()

    def append(self, row: Mapping[str, Any]) -> None:
        """Add one row (a result's summary dict); cheap, any thread."""
        self.extend((row,))

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        added = [dict(row) for row in rows]
        if not added:
            return
        with self._lock:
            self._rows.extend(added)
            self._appended += len(added)
        self._throttle.poke()

    def dataframe(self) -> pd.DataFrame:
        """The kept rows as a DataFrame, columns in the given order (then any others)."""
        with self._lock:
            rows = list(self._rows)
        frame = pd.DataFrame(rows)
        if self.columns is not None:
            extra = [c for c in frame.columns if c not in self.columns]
            frame = frame.reindex(columns=[*self.columns, *extra])
        return frame

    def _render(self) -> None:
        self.row_count = self._appended
        frame = frame_html(self.dataframe(), max_rows=self.max_rows, css_class="tk-results")
        if frame != self.table.value:
            self.table.value = frame

    def flush(self) -> None:
        self._throttle.flush()

    def summary(self) -> str:
        return f"ResultsTable: {self._appended:,} rows\n{frame_text(self.dataframe())}"

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._throttle.close()
            self.table.close()
        super().close()


class EnvMatrix(TextRepr, widgets.VBox):
    """Expected vs actual environment: one row per variable, one column per process.

    >>> display(EnvMatrix(tk.env_report(server, {"NCCL_ALGO": "Ring"})))       # doctest: +SKIP

    Takes an `EnvReport` or a long DataFrame, one row per (process, variable), columns named by the keywords.
    """

    _built = False  # until __init__ made its children: ipywidgets calls close() from __del__ too

    def __init__(self, report: EnvReport | pd.DataFrame, *, rows: str = "variable", columns: str = "process",
                 value: str = "actual", status: str = "status", expected: str | None = "expected") -> None:
        self._names = {"rows": rows, "columns": columns, "value": value, "status": status}
        self._expected = expected
        self.matrix = widgets.HTML()
        self.matrix.add_class("tk-env-widget")
        super().__init__(children=(self.matrix,))
        self._built = True
        self.frame = pd.DataFrame()
        self.report: EnvReport | None = None
        self.update(report)

    def update(self, report: EnvReport | pd.DataFrame) -> None:
        """Show a new report (say, after relaunching with a fixed environment)."""
        frame = report if isinstance(report, pd.DataFrame) else report.frame
        missing = [name for name in self._names.values() if name not in frame.columns]
        if missing:
            raise ValueError(f"EnvMatrix: the report has no column(s) {missing}; it has "
                             f"{list(frame.columns)}. Name the right ones with rows=, columns=, value=, "
                             "status=.")
        self.frame = frame
        self.report = None if isinstance(report, pd.DataFrame) else report
        expected = self._expected if self._expected in frame.columns else None
        self.matrix.value = env_pivot_html(frame, expected=expected, **self._names)

    def summary(self) -> str:
        if self.report is not None:
            return f"EnvMatrix: {self.report}"  # EnvReport's own text: counts, worst finding, problems
        n, frame = self._names, self.frame
        if frame.empty:
            return "EnvMatrix: empty report"
        counts = frame[n["status"]].astype(str).value_counts()
        shape = f"{frame[n['columns']].nunique()} processes × {frame[n['rows']].nunique()} variables"
        lines = [f"EnvMatrix: {shape}: " + ", ".join(f"{count} {state}" for state, count in counts.items())]
        bad = frame[frame[n["status"]].astype(str) != "ok"]
        for record in bad.head(20).to_dict("records"):
            expected = self._expected and self._expected in record
            want = f", expected {format_value(record[self._expected]) or 'any value'}" if expected else ""
            observed = format_value(record[n["value"]]) or "(unset)"
            lines.append(f"  {record[n['columns']]} {record[n['rows']]}: {record[n['status']]}, "
                         f"observed {observed}{want}")
        if len(bad) > 20:
            lines.append(f"  … {len(bad) - 20} more")
        return "\n".join(lines)

    def close(self) -> None:
        if self._built:
            self.matrix.close()
        super().close()


# The columns a person scans; the spec, evidence and traceback are in the journal and report.
STEP_COLUMNS = (
    "seq", "kind", "title", "status", "verdict", "verdict_note", "duration_s", "n_runs", "time_to_ready_s", "error",
)  # fmt: skip


class JournalSteps(TextRepr, widgets.VBox):
    """The journal's steps as a table, with a Refresh button that re-reads the journal.

    >>> display(JournalSteps(journal))                                 # doctest: +SKIP

    Refresh reads the SQLite file when clicked, never on a timer; `columns=None` shows every column.
    """

    _built = False  # until __init__ made its children: ipywidgets calls close() from __del__ too

    def __init__(self, journal: Journal, *, columns: Sequence[str] | None = STEP_COLUMNS,
                 max_rows: int = 100) -> None:
        self.journal = journal
        self.columns = None if columns is None else tuple(columns)
        self.max_rows = max_rows
        self.table = widgets.HTML()
        self.table.add_class("tk-steps-widget")
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh",
                                             tooltip="re-read the journal")
        self.refresh_button.on_click(lambda _button: self.refresh())
        super().__init__(children=(self.refresh_button, self.table))
        self._built = True
        self.frame = pd.DataFrame()
        self.refresh()

    def refresh(self) -> None:
        """Re-read `journal.steps()` and redraw."""
        frame = self.journal.steps()
        if self.columns is not None:
            frame = frame[[c for c in self.columns if c in frame.columns]]
        self.frame = frame
        self.table.value = frame_html(frame, max_rows=self.max_rows, css_class="tk-steps")

    def summary(self) -> str:
        return f"JournalSteps: {len(self.frame):,} steps\n{frame_text(self.frame, max_rows=20)}"

    def close(self) -> None:
        if self._built:
            self.table.close()
            self.refresh_button.close()
        super().close()
