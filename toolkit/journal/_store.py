"""The SQLite file: schema, one redacting write gate, and who owns a running step.

Why these settings: two notebooks (or a notebook and a sweep script) often write one
journal at once. WAL lets readers and one writer proceed together; ``busy_timeout`` makes
a writer wait for the other instead of failing with "database is locked"; autocommit
(``isolation_level=None``) commits each write immediately, so a kernel killed mid-loop
keeps every step it finished; ``synchronous=FULL`` keeps them across power loss too.

Every value bound to SQL passes :meth:`Store.write`'s gate: text through
:func:`toolkit.redaction.redact_text`, JSON through :func:`toolkit.redaction.redact_obj`
before it is encoded. There is no other way to write.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.errors import JournalError
from toolkit.redaction import redact_obj, redact_text

SCHEMA_VERSION = 1

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS investigations (
        id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_at REAL NOT NULL,
        root_cause TEXT, root_cause_at REAL, root_cause_step_id INTEGER)""",
    """CREATE TABLE IF NOT EXISTS steps (
        id INTEGER PRIMARY KEY, investigation_id INTEGER NOT NULL REFERENCES investigations(id),
        kind TEXT NOT NULL, title TEXT NOT NULL, hypothesis TEXT,
        spec_json TEXT, spec_label TEXT, command TEXT, hosts_json TEXT, versions_json TEXT,
        status TEXT NOT NULL, verdict TEXT, verdict_note TEXT,
        started_at REAL NOT NULL, updated_at REAL NOT NULL, finished_at REAL,
        error TEXT, traceback TEXT, evidence_json TEXT, readiness_json TEXT,
        pid INTEGER, hostname TEXT, proc_token TEXT)""",
    """CREATE TABLE IF NOT EXISTS notes (
        id INTEGER PRIMARY KEY, step_id INTEGER NOT NULL REFERENCES steps(id),
        created_at REAL NOT NULL, text TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS runs (
        id INTEGER PRIMARY KEY, step_id INTEGER NOT NULL REFERENCES steps(id),
        label TEXT, repeat INTEGER, recorded_at REAL NOT NULL, summary_json TEXT NOT NULL, extra_json TEXT)""",
    """CREATE TABLE IF NOT EXISTS requests (
        run_id INTEGER NOT NULL REFERENCES runs(id), idx INTEGER NOT NULL, data_json TEXT NOT NULL,
        PRIMARY KEY (run_id, idx))""",
    """CREATE TABLE IF NOT EXISTS metric_lines (
        id INTEGER PRIMARY KEY, step_id INTEGER NOT NULL REFERENCES steps(id), run_id INTEGER,
        line_no INTEGER, kind TEXT, rank TEXT, timestamp REAL, values_json TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS log_lines (
        id INTEGER PRIMARY KEY, step_id INTEGER NOT NULL REFERENCES steps(id), run_id INTEGER,
        line_no INTEGER, rank TEXT, level TEXT, verdict TEXT, rule TEXT, timestamp REAL, text TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS steps_by_investigation ON steps(investigation_id, id)",
    "CREATE INDEX IF NOT EXISTS steps_by_status ON steps(status)",
    "CREATE INDEX IF NOT EXISTS runs_by_step ON runs(step_id)",
    "CREATE INDEX IF NOT EXISTS metric_lines_by_run ON metric_lines(step_id, run_id)",
    "CREATE INDEX IF NOT EXISTS log_lines_by_step ON log_lines(step_id)",
    "CREATE INDEX IF NOT EXISTS notes_by_step ON notes(step_id)",
)


class Json:
    """A value to store as JSON text; the gate redacts the tree, then encodes it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _gate(params: Sequence[Any]) -> tuple[Any, ...]:
    """The one place where stored values are redacted: every write passes here."""
    out: list[Any] = []
    for value in params:
        if isinstance(value, Json):
            out.append(None if value.value is None else json.dumps(redact_obj(value.value), ensure_ascii=False))
        elif isinstance(value, str):
            out.append(redact_text(value))
        elif value is None or isinstance(value, bool | int | float):
            out.append(value)
        else:
            raise TypeError(f"the journal stores text, numbers and Json(...), not {type(value).__name__}")
    return tuple(out)


def loads(text: str | None) -> Any:
    """Decode a JSON column (None stays None)."""
    return None if text is None else json.loads(text)


@dataclass(frozen=True)
class ProcessIdentity:
    """Who runs a step: pid, hostname and a start token (boot id + start time) against pid reuse."""

    pid: int
    hostname: str
    token: str | None

    @classmethod
    def current(cls) -> ProcessIdentity:
        return cls(os.getpid(), socket.gethostname(), _start_token(os.getpid()))

    def is_gone(self) -> bool | None:
        """True when the process no longer exists; None when it runs on another host (unknowable)."""
        if self.hostname != socket.gethostname() or self.pid <= 0:
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # exists, owned by someone else
        if _is_zombie(self.pid):
            return True
        current = _start_token(self.pid)
        return self.token is not None and current is not None and current != self.token


def _proc_stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()  # fields from "state" on; comm may hold spaces


def _is_zombie(pid: int) -> bool:
    fields = _proc_stat_fields(pid)
    return fields is not None and len(fields) > 0 and fields[0] in ("Z", "X")


def _start_token(pid: int) -> str | None:
    fields = _proc_stat_fields(pid)
    if not fields or len(fields) < 20:
        return None
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot_id = "?"
    return f"{boot_id}:{fields[19]}"  # field 22 of stat: start time in clock ticks since boot


class Store:
    """One connection, shared by the threads of one process under a lock."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(
                f"cannot open the journal {self.path}: {exc}", hint="check that the directory is writable"
            ) from exc
        self._lock = threading.RLock()
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._create_schema()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise JournalError(
                f"{self.path} is not a journal this toolkit can open: {exc}",
                hint="pass the path of a journal .sqlite file, or a new path to start one",
            ) from exc

    def _create_schema(self) -> None:
        with self.transaction() as tx:
            for statement in _SCHEMA:
                tx.execute(statement)
            row = tx.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                tx.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise JournalError(
                    f"{self.path} was written by a newer toolkit (schema {row[0]}, this one reads {SCHEMA_VERSION})",
                    hint="upgrade the toolkit to read this journal",
                )

    @contextmanager
    def transaction(self) -> Iterator[_Tx]:
        """BEGIN IMMEDIATE ... COMMIT: several writes that stand or fall together."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield _Tx(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def write(self, sql: str, params: Sequence[Any] = ()) -> int:
        """One statement, committed at once; returns the last row id."""
        with self._lock:
            cursor = self._conn.execute(sql, _gate(params))
            return int(cursor.lastrowid or 0)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            cursor = self._conn.cursor()
            cursor.row_factory = sqlite3.Row
            return list(cursor.execute(sql, tuple(params)).fetchall())

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class _Tx:
    """The writer handed out inside a transaction; it applies the same gate."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, _gate(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, [_gate(row) for row in rows])
