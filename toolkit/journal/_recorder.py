"""One step of an investigation, recorded as it happens: ``with journal.step(...) as step``.

The row exists (status ``running``, with our pid, hostname and start token) before any
work starts, and every ``record*`` call commits on its own. So a kernel killed in the
middle keeps the runs it finished, and the next open marks the step ``interrupted``.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Literal, get_args

from toolkit.journal._coerce import (
    bench_parts,
    host_names,
    is_bench,
    is_readiness,
    log_line_dict,
    metric_row_dict,
    readiness_dict,
    spec_parts,
)
from toolkit.journal._store import Json, Store, loads

__all__ = ["StepRecorder", "StepVerdict", "StepStatus", "STEP_KINDS"]

StepVerdict = Literal["confirmed", "refuted", "inconclusive"]
StepStatus = Literal["running", "done", "failed", "interrupted"]
# The usual kinds; any other non-empty string is accepted as the user's own.
STEP_KINDS = ("baseline", "flag_change", "attention_mode", "nccl_env", "commit", "bisect_probe", "note")


def _check_choice(value: str, valid: tuple[str, ...], what: str) -> str:
    if value not in valid:
        raise ValueError(f"{what} must be one of {', '.join(valid)}; got {value!r}")
    return value


def _error_evidence(exc: BaseException) -> dict[str, Any]:
    """What a ToolkitError carries (evidence lines, hint, host, command, port) kept with the step."""
    evidence: dict[str, Any] = {"type": type(exc).__name__}
    for name in ("evidence", "hint", "host", "command", "port", "pid", "exit_code", "holder"):
        value = getattr(exc, name, None)
        if value is not None and value != ():
            evidence[name] = list(value) if isinstance(value, tuple) else value
    return evidence


class StepRecorder:
    """Records one step; use it as a context manager (a raised error marks the step failed).

    >>> with journal.step("attention_mode", "decode-mode verify", spec=spec) as step:  # doctest: +SKIP
    ...     step.record(bench_result, run_label="decode")
    ...     step.set_verdict("confirmed", note="back to 81 tok/s")
    """

    def __init__(self, store: Store, step_id: int) -> None:
        self._store = store
        self.id = step_id
        self._last_run_id: int | None = None
        self._finished = False

    def __repr__(self) -> str:
        return f"<StepRecorder step {self.id}>"

    def __enter__(self) -> StepRecorder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if exc is None:
            self.finish("done")
            return False
        # Ctrl-C in a notebook (or a SystemExit) stops the step: interrupted, not failed.
        status: StepStatus = "failed" if isinstance(exc, Exception) else "interrupted"
        try:
            self._store.write(
                "UPDATE steps SET status = ?, finished_at = ?, updated_at = ?, error = ?, traceback = ?,"
                " evidence_json = ? WHERE id = ?",
                (status, time.time(), time.time(), f"{type(exc).__name__}: {exc}",
                 "".join(traceback.format_exception(exc_type, exc, tb)), Json(_error_evidence(exc)), self.id),
            )
            self._finished = True
        except Exception as journal_exc:  # never hide the user's error behind ours
            exc.add_note(f"the journal could not record this failure of step {self.id}: {journal_exc}")
        return False

    def finish(self, status: StepStatus = "done", *, error: str | None = None) -> None:
        """End the step (the ``with`` block does this); a later call changes nothing."""
        if self._finished:
            return
        _check_choice(status, get_args(StepStatus), "status")
        now = time.time()
        self._store.write(
            "UPDATE steps SET status = ?, finished_at = ?, updated_at = ?, error = coalesce(?, error)"
            " WHERE id = ? AND status = 'running'",
            (status, now, now, error, self.id),
        )
        self._finished = True

    def _touch(self) -> None:
        self._store.write("UPDATE steps SET updated_at = ? WHERE id = ?", (time.time(), self.id))

    def record(self, result: Any, *, run_label: str | None = None, repeat: int | None = None) -> int | None:
        """Record a benchmark result (returns its run id) or a readiness report (returns None).

        ``run_label`` names the configuration for tables and plots (repeats share a label);
        without it the step's spec label is used.
        """
        if is_bench(result):
            return self.record_bench(result, run_label=run_label, repeat=repeat)
        if is_readiness(result):
            self.record_readiness(result)
            return None
        raise TypeError(
            f"record() takes a BenchResult (with .summary) or a ReadinessReport (with .ready), "
            f"not {type(result).__name__}; use record_metrics() or record_log_lines() for log rows"
        )

    def record_bench(self, result: Any, *, run_label: str | None = None, repeat: int | None = None,
                     host: str | None = None) -> int:
        """Store a benchmark run: its summary, per-request rows and settings, in one transaction.

        A result that holds repeats (``BenchResult.runs``) is stored as one run per repeat
        (``repeat`` 0..n-1), so tables and plots show the spread; the first run's id is returned.
        ``host`` names the host the run's server ran on, when a step's runs span several hosts.
        """
        repeats = result.get("runs") if isinstance(result, Mapping) else getattr(result, "runs", None)
        parts = [bench_parts(r) for r in repeats] if repeats else [bench_parts(result)]
        if host is not None:
            parts = [dataclasses.replace(part, extra={**part.extra, "host": str(host)}) for part in parts]
        run_ids: list[int] = []
        label = None if run_label is None else str(run_label)
        with self._store.transaction() as tx:
            for i, part in enumerate(parts):
                number = i if repeats else None if repeat is None else int(repeat)
                cursor = tx.execute(
                    "INSERT INTO runs(step_id, label, repeat, recorded_at, summary_json, extra_json)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (self.id, label, number, time.time(), Json(part.summary), Json(part.extra or None)),
                )
                run_ids.append(int(cursor.lastrowid or 0))
                tx.executemany(
                    "INSERT INTO requests(run_id, idx, data_json) VALUES (?, ?, ?)",
                    [(run_ids[-1], idx, Json(row)) for idx, row in enumerate(part.requests)],
                )
            tx.execute("UPDATE steps SET updated_at = ? WHERE id = ?", (time.time(), self.id))
        self._last_run_id = run_ids[-1]
        return run_ids[0]

    def record_readiness(self, report: Any) -> None:
        """Store how the server came up (ready, time to ready, phases, benign lines)."""
        self._store.write(
            "UPDATE steps SET readiness_json = ?, updated_at = ? WHERE id = ?",
            (Json(readiness_dict(report)), time.time(), self.id),
        )

    def record_metrics(self, rows: Iterable[Any], *, run_id: int | None = None) -> int:
        """Store the server's metric lines (``logs.MetricRow``); they join the latest run by default."""
        run = run_id if run_id is not None else self._last_run_id
        stored = [metric_row_dict(row) for row in rows]
        with self._store.transaction() as tx:
            tx.executemany(
                "INSERT INTO metric_lines(step_id, run_id, line_no, kind, rank, timestamp, values_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(self.id, run, r["line_no"], r["kind"], r["rank"], r["timestamp"], Json(r["values"]))
                 for r in stored],
            )
        self._touch()
        return len(stored)

    def record_log_lines(self, events: Iterable[Any], *, run_id: int | None = None) -> int:
        """Store the decisive log lines (``logs.LogEvent`` or plain strings), redacted."""
        run = run_id if run_id is not None else self._last_run_id
        stored = [log_line_dict(event) for event in events]
        with self._store.transaction() as tx:
            tx.executemany(
                "INSERT INTO log_lines(step_id, run_id, line_no, rank, level, verdict, rule, timestamp, text)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(self.id, run, e["line_no"], e["rank"], e["level"], e["verdict"], e["rule"], e["timestamp"],
                  e["text"]) for e in stored],
            )
        self._touch()
        return len(stored)

    def set_verdict(self, verdict: StepVerdict, note: str | None = None) -> None:
        """Was the hypothesis confirmed, refuted or inconclusive? ``note`` says why."""
        _check_choice(verdict, get_args(StepVerdict), "verdict")
        self._store.write(
            "UPDATE steps SET verdict = ?, verdict_note = coalesce(?, verdict_note), updated_at = ? WHERE id = ?",
            (verdict, note, time.time(), self.id),
        )

    verdict = set_verdict  # the name docs/contracts.md uses

    def note(self, text: str) -> None:
        """Add a free-text note to the step (redacted like everything else)."""
        with self._store.transaction() as tx:
            tx.execute("INSERT INTO notes(step_id, created_at, text) VALUES (?, ?, ?)", (self.id, time.time(), text))
            tx.execute("UPDATE steps SET updated_at = ? WHERE id = ?", (time.time(), self.id))

    def set_spec(self, spec: Any) -> None:
        """Attach (or replace) the ServerSpec when it is only known inside the step."""
        parts = spec_parts(spec)
        self._store.write(
            "UPDATE steps SET spec_json = ?, spec_label = ?, command = ?, updated_at = ? WHERE id = ?",
            (Json(parts.data), parts.label, parts.command, time.time(), self.id),
        )

    def set_host(self, host: Any) -> None:
        """Attach the host(s) the step ran on (``Host`` objects or names)."""
        self._store.write("UPDATE steps SET hosts_json = ? WHERE id = ?", (Json(host_names(host)), self.id))

    def set_versions(self, versions: Mapping[str, str]) -> None:
        """Add engine/library versions (e.g. ``{"sglang": "0.5.9"}``) to those already known."""
        row = self._store.read("SELECT versions_json FROM steps WHERE id = ?", (self.id,))
        merged = dict(loads(row[0]["versions_json"]) or {}) if row else {}
        merged.update({str(k): str(v) for k, v in versions.items()})
        self._store.write("UPDATE steps SET versions_json = ? WHERE id = ?", (Json(merged), self.id))
