"""One step of an investigation, recorded as it happens: ``with journal.step(...) as step``.

The row exists before any work starts and every ``record*`` commits on its own, so a kernel killed
in the middle keeps the runs it finished (the next open marks the step ``interrupted``).
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Literal, get_args

from toolkit.benchmark.result import BenchResult
from toolkit.journal import adapters
from toolkit.journal._store import Json, Store, clean, loads
from toolkit.logs.classify import LogEvent
from toolkit.logs.metric_lines import MetricRow
from toolkit.server.readiness import ReadinessReport
from toolkit.server.spec import ServerSpec

__all__ = ["StepRecorder", "StepVerdict", "StepStatus", "STEP_KINDS"]

StepVerdict = Literal["confirmed", "refuted", "inconclusive"]
StepStatus = Literal["running", "done", "failed", "interrupted"]
# The usual kinds; any other non-empty string is accepted as the user's own.
STEP_KINDS = ("baseline", "flag_change", "attention_mode", "nccl_env", "commit", "bisect_probe", "note")


def _check_choice(value: str, valid: tuple[str, ...], what: str) -> str:
    if value not in valid:
        raise ValueError(f"{what} must be one of {', '.join(valid)}; got {value!r}")
    return value


class StepRecorder:
    """Records one step; use it as a context manager (a raised error marks the step failed).

    >>> with journal.step("attention_mode", "decode-mode verify", spec=spec) as step:  # doctest: +SKIP
    ...     step.record(tk.bench(server, num_prompts=64), run_label="decode")
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

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
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
                 "".join(traceback.format_exception(exc_type, exc, tb)), Json(adapters.error_evidence(exc)),
                 self.id), doing=f"the failure of step {self.id}")
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
            (status, now, now, error, self.id), doing=f"the end of step {self.id}")
        self._finished = True

    def record(self, result: BenchResult | ReadinessReport, *, run_label: str | None = None,
               repeat: int | None = None) -> int | None:
        """Record a benchmark result (returns its run id) or a readiness report (returns None).

        ``run_label`` names the configuration for tables and plots (default: the spec's label).
        """
        if isinstance(result, BenchResult):
            return self.record_bench(result, run_label=run_label, repeat=repeat)
        if isinstance(result, ReadinessReport):
            self.record_readiness(result)
            return None
        raise TypeError(
            f"record() takes a BenchResult (tk.bench) or a ReadinessReport (server.wait_ready), "
            f"not {type(result).__name__}; record_metrics() takes MetricRows, record_log_lines() LogEvents or text"
        )

    def record_bench(self, result: BenchResult, *, run_label: str | None = None, repeat: int | None = None,
                     host: str | None = None) -> int:
        """Store a benchmark run in one transaction; returns the (first) run id.

        Repeats (``BenchResult.runs``) are stored one run each, so tables and plots show the spread.
        """
        runs = adapters.bench_runs(result)
        if host is not None:
            runs = [dataclasses.replace(run, extra={**run.extra, "host": str(host)}) for run in runs]
        several = len(result.runs) > 0
        label = clean(run_label)
        prepared = [(clean(Json(run.summary)), clean(Json(run.extra or None)), [clean(Json(row)) for row in run.requests])
                    for run in runs]
        run_ids: list[int] = []
        with self._store.transaction(f"the benchmark run of step {self.id}") as tx:
            for i, (summary, extra, requests) in enumerate(prepared):
                number = i if several else repeat
                cursor = tx.execute(
                    "INSERT INTO runs(step_id, label, repeat, recorded_at, summary_json, extra_json)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (self.id, label, number, time.time(), summary, extra))
                run_ids.append(int(cursor.lastrowid or 0))
                tx.executemany("INSERT INTO requests(run_id, idx, data_json) VALUES (?, ?, ?)",
                               [(run_ids[-1], idx, row) for idx, row in enumerate(requests)])
            tx.execute("UPDATE steps SET updated_at = ? WHERE id = ?", (time.time(), self.id))
        self._last_run_id = run_ids[-1]
        evidence = result.evidence  # tk.bench on a Server: its log's lines and its release (benchmark/log_evidence.py)
        if evidence is not None:
            self.record_metrics(evidence.metric_rows, run_id=run_ids[-1])
            self.record_log_lines(evidence.log_events, run_id=run_ids[-1])
            if evidence.provenance:
                self.set_versions(evidence.provenance)
            if evidence.release_problem:
                self.note(evidence.release_problem)
        return run_ids[0]

    def record_readiness(self, report: ReadinessReport) -> None:
        """Store how the server came up (ready, time to ready, phases, benign lines, failure)."""
        self._store.write("UPDATE steps SET readiness_json = ?, updated_at = ? WHERE id = ?",
                          (Json(report.to_dict()), time.time(), self.id),
                          doing=f"the start-up report of step {self.id}")
        decisive = report.failure.decisive if report.failure is not None else None
        chosen: list[LogEvent] = [*report.benign, *(e for e in (report.ready_line, decisive) if e is not None)]
        chosen.sort(key=lambda e: e.line_no)
        self.record_log_lines(chosen)

    def record_metrics(self, rows: Iterable[MetricRow], *, run_id: int | None = None) -> int:
        """Store the server's metric lines; they join the latest run by default."""
        run = run_id if run_id is not None else self._last_run_id
        stored = [adapters.metric_line_row(row) for row in rows]
        prepared = [(self.id, run, r.line_no, clean(r.kind), clean(r.rank), r.timestamp, clean(Json(r.values)))
                    for r in stored]
        # a line the step holds already (tk.bench's evidence, then the trial's own window) is stored once
        held = {tuple(row) for row in self._store.read(
            "SELECT line_no, kind, rank, timestamp, values_json FROM metric_lines WHERE step_id = ?", (self.id,))}
        self._insert("metric_lines", "step_id, run_id, line_no, kind, rank, timestamp, values_json",
                     [p for p in prepared if (p[2], p[3].value, p[4].value, p[5], p[6].value) not in held])
        return len(stored)

    def record_log_lines(self, events: Iterable[LogEvent | str], *, run_id: int | None = None) -> int:
        """Store the decisive log lines (``LogEvent``s, or pasted text judged now), each with its verdict."""
        run = run_id if run_id is not None else self._last_run_id
        stored = [adapters.log_line_row(event) for event in events]
        prepared = [(self.id, run, e.line_no, clean(e.rank), clean(e.level), clean(e.verdict), clean(e.rule),
                     e.timestamp, clean(e.text), e.caused) for e in stored]
        held = {(row[0], row[1]) for row in self._store.read(
            "SELECT line_no, text FROM log_lines WHERE step_id = ? AND line_no IS NOT NULL", (self.id,))}
        columns = "step_id, run_id, line_no, rank, level, verdict, rule, timestamp, text, caused"
        self._insert("log_lines", columns, [p for p in prepared if (p[2], p[8].value) not in held])
        return len(stored)

    def _insert(self, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        marks = ", ".join("?" for _ in columns.split(","))
        with self._store.transaction(f"the {table.replace('_', ' ')} of step {self.id}") as tx:
            tx.executemany(f"INSERT INTO {table}({columns}) VALUES ({marks})", rows)
            tx.execute("UPDATE steps SET updated_at = ? WHERE id = ?", (time.time(), self.id))

    def set_verdict(self, verdict: StepVerdict, note: str | None = None) -> None:
        """Was the hypothesis confirmed, refuted or inconclusive? ``note`` says why."""
        _check_choice(verdict, get_args(StepVerdict), "verdict")
        self._store.write(
            "UPDATE steps SET verdict = ?, verdict_note = coalesce(?, verdict_note), updated_at = ? WHERE id = ?",
            (verdict, note, time.time(), self.id), doing=f"the verdict of step {self.id}")

    verdict = set_verdict  # the name docs/contracts.md uses

    def note(self, text: str) -> None:
        """Add a free-text note to the step (redacted like everything else)."""
        cleaned = clean(text)
        with self._store.transaction(f"a note of step {self.id}") as tx:
            tx.execute("INSERT INTO notes(step_id, created_at, text) VALUES (?, ?, ?)", (self.id, time.time(), cleaned))
            tx.execute("UPDATE steps SET updated_at = ? WHERE id = ?", (time.time(), self.id))

    def set_spec(self, spec: ServerSpec) -> None:
        """Attach (or replace) the ServerSpec when it is only known inside the step."""
        self._store.learn_secrets(spec.secrets())
        row = adapters.spec_row(spec)
        self._store.write(
            "UPDATE steps SET spec_json = ?, spec_label = ?, command = ?, updated_at = ? WHERE id = ?",
            (Json(row.data), row.label, row.command, time.time(), self.id), doing=f"the spec of step {self.id}",
        )

    def set_host(self, host: adapters.Hosts) -> None:
        """Attach the host(s) the step ran on (``Host``, ``HostGroup``, names)."""
        self._store.write("UPDATE steps SET hosts_json = ? WHERE id = ?",
                          (Json(adapters.host_names(host)), self.id), doing=f"the hosts of step {self.id}")

    def set_versions(self, versions: Mapping[str, str]) -> None:
        """Add engine/library versions (e.g. ``{"sglang": "0.5.9"}``) to those already known."""
        row = self._store.read("SELECT versions_json FROM steps WHERE id = ?", (self.id,))
        merged = dict(loads(row[0]["versions_json"]) or {}) if row else {}
        merged.update({str(k): str(v) for k, v in versions.items()})
        self._store.write("UPDATE steps SET versions_json = ? WHERE id = ?", (Json(merged), self.id),
                          doing=f"the versions of step {self.id}")
