"""``Journal``: one SQLite file holding investigations -> steps -> runs, read back as DataFrames."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from toolkit.journal._coerce import host_names, spec_parts
from toolkit.journal._recorder import StepRecorder
from toolkit.journal._store import Json, ProcessIdentity, Store

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Journal"]


@cache
def _toolkit_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolkit")
    except PackageNotFoundError:
        return None


class Journal:
    """The record of an investigation: every step, its spec, runs, verdict and evidence, in one file.

    Safe to open from several kernels at once (WAL, busy timeout, each write committed).
    Opening it marks steps whose process died ``interrupted`` (see ``interrupted_on_open``).

    >>> journal = Journal("journals/eagle3.sqlite", investigation="EAGLE-3 regression")  # doctest: +SKIP
    >>> with journal.step("baseline", "no speculation", spec=base, host=host) as step:  # doctest: +SKIP
    ...     step.record(tk.bench(server, num_prompts=64))
    >>> journal.results()  # doctest: +SKIP
    """

    def __init__(
        self, path: str | os.PathLike[str], investigation: str | None = None, *, busy_timeout_s: float = 30.0
    ) -> None:
        self.path = Path(path)
        self._store = Store(self.path, busy_timeout_s=busy_timeout_s)
        self._identity = ProcessIdentity.current()
        self.interrupted_on_open: tuple[int, ...] = self._mark_orphans_interrupted()
        self.investigation_id, self.investigation = self._select_investigation(investigation)

    def __repr__(self) -> str:
        return f"Journal({str(self.path)!r}, investigation={self.investigation!r})"

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._store.close()

    def _select_investigation(self, name: str | None) -> tuple[int, str]:
        if name is None:
            latest = self._store.read("SELECT id, name FROM investigations ORDER BY id DESC LIMIT 1")
            if latest:
                return int(latest[0]["id"]), str(latest[0]["name"])
            name = self.path.stem
        self._store.write("INSERT OR IGNORE INTO investigations(name, created_at) VALUES (?, ?)", (name, time.time()))
        row = self._store.read("SELECT id, name FROM investigations WHERE name = ?", (name,))
        if not row:  # the name held a secret and was stored redacted
            from toolkit.redaction import redact_text

            row = self._store.read("SELECT id, name FROM investigations WHERE name = ?", (redact_text(name),))
        return int(row[0]["id"]), str(row[0]["name"])

    def _mark_orphans_interrupted(self) -> tuple[int, ...]:
        """Steps left ``running`` by a process that is gone (same host) become ``interrupted``."""
        marked = []
        rows = self._store.read("SELECT id, pid, hostname, proc_token FROM steps WHERE status = 'running'")
        for row in rows:
            owner = ProcessIdentity(int(row["pid"] or 0), str(row["hostname"] or ""), row["proc_token"])
            if owner == self._identity or owner.is_gone() is not True:
                continue  # ours, still alive, or on another host: cannot tell, leave it
            self._store.write(
                "UPDATE steps SET status = 'interrupted', finished_at = updated_at,"
                " error = coalesce(error, ?) WHERE id = ? AND status = 'running'",
                (f"the process that ran this step (pid {owner.pid} on {owner.hostname}) ended before the step "
                 "finished (kernel restarted or killed?)", row["id"]),
            )
            marked.append(int(row["id"]))
        return tuple(marked)

    def step(
        self, kind: str, title: str | None = None, *, hypothesis: str | None = None, spec: Any = None,
        host: Any = None, versions: Mapping[str, str] | None = None,
    ) -> StepRecorder:
        """Start a step (stored at once as ``running``); use the result as a context manager.

        ``kind`` is one of ``STEP_KINDS`` or your own word; ``title`` defaults to the spec's label.
        """
        if not isinstance(kind, str) or not kind.strip():
            raise ValueError("kind must be a non-empty string such as 'baseline', 'flag_change' or 'attention_mode'")
        parts = spec_parts(spec) if spec is not None else None
        title = title or (parts.label if parts else None) or kind
        known = {"toolkit": _toolkit_version(), "python": platform.python_version()}
        all_versions = {k: v for k, v in known.items() if v} | dict(versions or {})
        now, me = time.time(), self._identity
        step_id = self._store.write(
            "INSERT INTO steps(investigation_id, kind, title, hypothesis, spec_json, spec_label, command,"
            " hosts_json, versions_json, status, started_at, updated_at, pid, hostname, proc_token)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)",
            (self.investigation_id, kind, title, hypothesis, Json(parts.data if parts else None),
             parts.label if parts else None, parts.command if parts else None, Json(host_names(host)),
             Json(all_versions), now, now, me.pid, me.hostname, me.token),
        )
        return StepRecorder(self._store, step_id)

    def note(self, title: str, text: str) -> int:
        """Record an observation as a finished ``note`` step; returns its step id."""
        with self.step("note", title) as recorder:
            recorder.note(text)
        return recorder.id

    def root_cause(self, text: str, *, step: int | None = None) -> None:
        """Record the root cause, in your words, for the post-mortem (optionally the step that proved it)."""
        self._store.write(
            "UPDATE investigations SET root_cause = ?, root_cause_at = ?, root_cause_step_id = ? WHERE id = ?",
            (text, time.time(), step, self.investigation_id),
        )

    def root_cause_text(self) -> str | None:
        """The recorded root cause, or None."""
        row = self._store.read("SELECT root_cause FROM investigations WHERE id = ?", (self.investigation_id,))
        return row[0]["root_cause"] if row else None

    def investigations(self) -> pd.DataFrame:
        """Every investigation in the file, with its step count and root cause."""
        from toolkit.journal._frames import investigations_frame

        return investigations_frame(self._store)

    def steps(self) -> pd.DataFrame:
        """One row per step of this investigation, in order (``seq``), with spec, verdict and error."""
        from toolkit.journal._frames import steps_frame

        return steps_frame(self._store, self.investigation_id)

    def results(self) -> pd.DataFrame:
        """One row per benchmark run: step columns, summary metrics, ``flag:``/``env:`` spec columns."""
        from toolkit.journal._frames import results_frame

        return results_frame(self._store, self.investigation_id)

    def compare(self, a: int | str, b: int | str) -> pd.DataFrame:
        """What differs from a to b: spec rows, then metric rows with diff, ratio b/a and a noise verdict.

        ``a``/``b``: a step id, ``"run:ID"``, ``"step:ID"``, or a label/title.
        """
        from toolkit.journal._compare import compare_frames, resolve_side

        steps, results = self.steps(), self.results()
        return compare_frames(resolve_side(a, steps, results), resolve_side(b, steps, results))

    def requests(self, run_id: int | None = None) -> pd.DataFrame:
        """Per-request rows of one run (or of every run), with ``label`` for plotting."""
        from toolkit.journal._frames import requests_frame

        return requests_frame(self._store, self.investigation_id, run_id)

    def metric_lines(self, run_id: int | None = None, *, step_id: int | None = None) -> pd.DataFrame:
        """The server's metric lines (one column per value), ``t_s`` seconds since the run's first line."""
        from toolkit.journal._frames import metric_lines_frame

        return metric_lines_frame(self._store, self.investigation_id, run_id, step_id)

    def log_lines(self, step_id: int | None = None) -> pd.DataFrame:
        """The decisive log lines recorded with the steps (redacted as stored)."""
        from toolkit.journal._frames import log_lines_frame

        return log_lines_frame(self._store, self.investigation_id, step_id)
