"""Read the journal back as tidy pandas DataFrames: steps, results, requests, metric and log lines.

Times are UTC ``datetime64`` columns; durations are ``_s`` floats.
"""

from __future__ import annotations

from sqlite3 import Row
from typing import Any

import pandas as pd

from toolkit.errors import JournalError
from toolkit.journal._store import Store, loads
from toolkit.journal.adapters import FLAG_PREFIX, spec_columns
from toolkit.server.naming import ENV_PREFIX

__all__ = ["steps_frame", "results_frame", "requests_frame", "metric_lines_frame", "log_lines_frame",
           "investigations_frame", "RESULT_BASE_COLUMNS", "WORKLOAD_COLUMNS"]

STEP_COLUMNS = [
    "step_id", "seq", "kind", "title", "hypothesis", "status", "verdict", "verdict_note", "label", "engine",
    "model", "commit", "repo_dir", "repo_origin", "hosts", "started_at", "finished_at", "duration_s", "n_runs",
    "ready", "time_to_ready_s", "error", "notes", "command", "spec", "readiness", "evidence", "traceback", "versions",
    "pid", "hostname",
]
RESULT_BASE_COLUMNS = [
    "run_id", "step_id", "seq", "kind", "title", "label", "run_label", "repeat", "status", "verdict", "engine",
    "model", "commit", "host", "recorded_at",
]
#: The workload a run was measured under (``workload:NAME`` columns of ``journal.results(wide=True)``), from the
#: settings and workload ``bench`` recorded with it: two runs compare only when these are equal (issue 28).
WORKLOAD_COLUMNS = {
    "workload:max_concurrency": "$.settings.max_concurrency", "workload:request_rate": "$.settings.request_rate",
    "workload:num_prompts": "$.workload.num_prompts", "workload:input_len": "$.workload.input_len",
    "workload:output_len": "$.workload.output_len", "workload:range_ratio": "$.workload.range_ratio",
    "workload:dataset": "$.workload.dataset", "workload:endpoint": "$.settings.endpoint",
    "workload:url": "$.settings.url",
}


# Columns a journal of schema 1 lacks (opened read-only, it is not migrated): they read as None.
_SINCE_V2 = ("repo_dir", "repo_origin")


def _times(frame: pd.DataFrame, *columns: str) -> None:
    for column in columns:
        try:
            frame[column] = pd.to_datetime(frame[column].astype("float64"), unit="s", utc=True)
        except (ValueError, TypeError, OverflowError) as exc:  # text as a time: a journal damaged by hand
            raise JournalError(f"the journal is damaged: a {column} is not a time in seconds ({exc})",
                               hint="restore the journal from a copy, or repair that row with sqlite3") from None


def _seconds(value: Any, where: str) -> float | None:
    """A stored time (seconds since 1970), checked: text there is a journal damaged by hand."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    raise JournalError(f"the journal is damaged: {where} is {str(value)[:40]!r}, not a time in seconds",
                       hint="restore the journal from a copy, or repair that row with sqlite3")


def investigations_frame(store: Store) -> pd.DataFrame:
    rows = store.read(
        "SELECT i.id AS investigation_id, i.name, i.created_at, i.root_cause, count(s.id) AS n_steps"
        " FROM investigations i LEFT JOIN steps s ON s.investigation_id = i.id GROUP BY i.id ORDER BY i.id")
    frame = pd.DataFrame([dict(r) for r in rows],
                         columns=["investigation_id", "name", "created_at", "root_cause", "n_steps"])
    _times(frame, "created_at")
    return frame


def steps_frame(store: Store, investigation_id: int | None) -> pd.DataFrame:
    rows = store.read(
        "SELECT s.*, (SELECT count(*) FROM runs r WHERE r.step_id = s.id) AS n_runs,"
        " (SELECT group_concat(text, char(10)) FROM (SELECT text FROM notes n WHERE n.step_id = s.id"
        "  ORDER BY n.id)) AS notes"
        " FROM steps s WHERE s.investigation_id = ? ORDER BY s.id",
        (investigation_id,))
    records = []
    present = set(rows[0].keys()) if rows else set()  # (`in row` would search a Row's values)
    for seq, row in enumerate(rows, start=1):
        spec = loads(row["spec_json"], dict, where=f"the spec of step {row['id']}") or {}
        readiness = loads(row["readiness_json"], dict, where=f"the readiness of step {row['id']}") or {}
        end = _seconds(row["finished_at"], f"the finish time of step {row['id']}")
        start = _seconds(row["started_at"], f"the start time of step {row['id']}")
        records.append({
            "step_id": row["id"], "seq": seq, "kind": row["kind"], "title": row["title"],
            "hypothesis": row["hypothesis"], "status": row["status"], "verdict": row["verdict"],
            "verdict_note": row["verdict_note"], "label": row["spec_label"] or spec.get("label") or row["title"],
            "engine": spec.get("engine"), "model": spec.get("model"), "commit": spec.get("commit"),
            **{column: row[column] if column in present else None for column in _SINCE_V2},
            "hosts": ", ".join(map(str, loads(row["hosts_json"], list, where=f"the hosts of step {row['id']}") or [])), "started_at": row["started_at"],
            "finished_at": end, "duration_s": None if end is None or start is None else end - start,
            "n_runs": row["n_runs"], "ready": readiness.get("ready"),
            "time_to_ready_s": readiness.get("time_to_ready_s"), "error": row["error"], "notes": row["notes"],
            "command": row["command"], "spec": spec or None, "readiness": readiness or None,
            "evidence": loads(row["evidence_json"]), "traceback": row["traceback"],
            "versions": loads(row["versions_json"]), "pid": row["pid"], "hostname": row["hostname"],
        })
    frame = pd.DataFrame(records, columns=STEP_COLUMNS)
    frame["duration_s"] = frame["duration_s"].astype("float64")
    _times(frame, "started_at", "finished_at")
    return frame


def _label(row: Row) -> str:
    return str(row["run_label"] or row["spec_label"] or row["title"])


def _only(hosts: Any) -> str | None:
    """The step's host when it ran on one (a run recorded without its own host ran there)."""
    return str(hosts[0]) if isinstance(hosts, list) and len(hosts) == 1 else None


def results_frame(store: Store, investigation_id: int | None) -> pd.DataFrame:
    steps = store.read("SELECT id FROM steps WHERE investigation_id = ? ORDER BY id", (investigation_id,))
    seq_of = {row["id"]: seq for seq, row in enumerate(steps, start=1)}
    rows = store.read(
        "SELECT r.id AS run_id, r.step_id, r.label AS run_label, r.repeat, r.recorded_at, r.summary_json,"
        " json_extract(r.extra_json, '$.host') AS run_host, s.hosts_json,"
        + "".join(f" json_extract(r.extra_json, '{path}') AS \"{name}\"," for name, path in WORKLOAD_COLUMNS.items())
        + " s.kind, s.title, s.status, s.verdict, s.spec_label, s.spec_json"
        " FROM runs r JOIN steps s ON s.id = r.step_id WHERE s.investigation_id = ? ORDER BY r.id",
        (investigation_id,))
    records: list[dict[str, Any]] = []
    metric_names: dict[str, None] = {}  # ordered sets: first appearance wins
    spec_names: dict[str, None] = {}
    specs: dict[str | None, tuple[dict[str, Any], dict[str, Any]]] = {}  # a sweep repeats a few specs 10,000 times
    for row in rows:
        text = row["spec_json"]
        if text not in specs:
            spec_of = loads(text, dict, where=f"the spec of step {row['step_id']}") or {}
            specs[text] = (spec_of, spec_columns(spec_of))
        spec, flat = specs[text]
        summary = {k: v for k, v in (loads(row["summary_json"], dict, where=f"the summary of run {row['run_id']}") or {}).items()
                   if v is None or isinstance(v, bool | int | float | str)}
        record = {
            "run_id": row["run_id"], "step_id": row["step_id"], "seq": seq_of.get(row["step_id"]),
            "kind": row["kind"], "title": row["title"],
            "label": row["run_label"] or row["spec_label"] or spec.get("label") or row["title"],
            "run_label": row["run_label"], "repeat": row["repeat"], "status": row["status"],
            "verdict": row["verdict"], "engine": spec.get("engine"), "model": spec.get("model"),
            "commit": spec.get("commit"),
            "host": row["run_host"] or _only(loads(row["hosts_json"], list, where=f"the hosts of step {row['step_id']}")),
            "recorded_at": row["recorded_at"], **{name: row[name] for name in WORKLOAD_COLUMNS},
        }
        for key, value in summary.items():
            metric_names.setdefault(key, None)
            record.setdefault(key, value)
        for key, value in flat.items():
            if key.startswith((FLAG_PREFIX, ENV_PREFIX)):
                spec_names.setdefault(key, None)
                record[key] = value
        records.append(record)
    columns = RESULT_BASE_COLUMNS + list(WORKLOAD_COLUMNS) + [m for m in metric_names if m not in RESULT_BASE_COLUMNS]
    columns += sorted(spec_names, key=lambda name: (not name.startswith(FLAG_PREFIX), name))
    frame = pd.DataFrame(records, columns=columns)
    frame["repeat"] = frame["repeat"].astype("Int64")  # None for single runs, not NaN floats
    _times(frame, "recorded_at")
    return frame


def _read(store: Store, sql: str, investigation_id: int | None, only: dict[str, int | None],
          order: str) -> list[Row]:
    """``sql`` (ending ``WHERE s.investigation_id = ?``) narrowed to each column of ``only`` not None."""
    given = {column: value for column, value in only.items() if value is not None}
    narrowed = "".join(f" AND {column} = ?" for column in given)
    return store.read(f"{sql}{narrowed} ORDER BY {order}", [investigation_id, *given.values()])


def requests_frame(store: Store, investigation_id: int | None, run_id: int | None = None) -> pd.DataFrame:
    sql = ("SELECT q.run_id, q.idx, q.data_json, r.step_id, r.label AS run_label, s.spec_label, s.title"
           " FROM requests q JOIN runs r ON r.id = q.run_id JOIN steps s ON s.id = r.step_id"
           " WHERE s.investigation_id = ?")
    records = [{"run_id": row["run_id"], "step_id": row["step_id"], "label": _label(row), "idx": row["idx"],
                **(loads(row["data_json"], dict, where=f"request {row['idx']} of run {row['run_id']}") or {})}
               for row in _read(store, sql, investigation_id, {"q.run_id": run_id}, "q.run_id, q.idx")]
    return pd.DataFrame(records, columns=None if records else ["run_id", "step_id", "label", "idx"])


def metric_lines_frame(store: Store, investigation_id: int | None, run_id: int | None = None,
                       step_id: int | None = None) -> pd.DataFrame:
    sql = ("SELECT m.step_id, m.run_id, m.line_no, m.kind, m.rank, m.timestamp, m.values_json,"
           " r.label AS run_label, s.spec_label, s.title"
           " FROM metric_lines m JOIN steps s ON s.id = m.step_id LEFT JOIN runs r ON r.id = m.run_id"
           " WHERE s.investigation_id = ?")
    rows = _read(store, sql, investigation_id, {"m.run_id": run_id, "m.step_id": step_id}, "m.id")
    records = [{"step_id": row["step_id"], "run_id": row["run_id"], "label": _label(row),
                "line_no": row["line_no"], "kind": row["kind"], "rank": row["rank"],
                "timestamp": row["timestamp"],
                **(loads(row["values_json"], dict, where=f"a metric line of step {row['step_id']}") or {})}
               for row in rows]
    base = ["step_id", "run_id", "label", "line_no", "kind", "rank", "timestamp"]
    frame = pd.DataFrame(records, columns=None if records else base + ["t_s"])
    if records:
        ts = frame["timestamp"].astype("float64")
        group = frame["run_id"].fillna(-frame["step_id"]).astype("int64")
        frame["t_s"] = ts - ts.groupby(group).transform("min")
    _times(frame, "timestamp")
    return frame


def log_lines_frame(store: Store, investigation_id: int | None, step_id: int | None = None) -> pd.DataFrame:
    columns = ["step_id", "run_id", "line_no", "rank", "level", "verdict", "rule", "timestamp", "text", "caused"]
    sql = "SELECT l.* FROM log_lines l JOIN steps s ON s.id = l.step_id WHERE s.investigation_id = ?"
    # `caused` is None before schema 3
    rows = [dict(r) for r in _read(store, sql, investigation_id, {"l.step_id": step_id}, "l.id")]
    frame = pd.DataFrame([{c: r.get(c) for c in columns} for r in rows], columns=columns)
    _times(frame, "timestamp")
    return frame
