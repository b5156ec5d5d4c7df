"""Opening the journal's SQLite file, and SQLite's errors told as ``JournalError``s that say what to do.

Only an empty file or one of ours is switched to WAL and given the schema: another application's
database is refused untouched (issue 20: it once gained 8 tables and WAL mode). Two notebooks often
write one journal at once: WAL lets readers and one writer proceed together, ``busy_timeout`` makes a
writer wait instead of failing, autocommit keeps every finished step of a killed kernel, and
``synchronous=FULL`` keeps them across power loss. An older journal is migrated when opened for writing.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toolkit.errors import JournalError
from toolkit.journal.adapters import judged_line, ready_line_of
from toolkit.logs import is_toolkit_request, log_engine

__all__ = ["SCHEMA_VERSION", "Opened", "open_journal", "journal_error"]

SCHEMA_VERSION = 3

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
        pid INTEGER, hostname TEXT, proc_token TEXT, repo_dir TEXT, repo_origin TEXT)""",
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
        line_no INTEGER, rank TEXT, level TEXT, verdict TEXT, rule TEXT, timestamp REAL, text TEXT NOT NULL,
        caused TEXT)""",
    "CREATE INDEX IF NOT EXISTS steps_by_investigation ON steps(investigation_id, id)",
    "CREATE INDEX IF NOT EXISTS steps_by_status ON steps(status)",
    "CREATE INDEX IF NOT EXISTS runs_by_step ON runs(step_id)",
    "CREATE INDEX IF NOT EXISTS metric_lines_by_run ON metric_lines(step_id, run_id)",
    "CREATE INDEX IF NOT EXISTS log_lines_by_step ON log_lines(step_id)",
    "CREATE INDEX IF NOT EXISTS notes_by_step ON notes(step_id)",
)


def _judge_stored_lines(conn: sqlite3.Connection) -> None:
    """Schema 3: every stored line carries its verdict and whether the toolkit caused it, and every ready
    start-up its ready line, judged here once, so that a report reads verdicts and never classifies again."""
    engines = {row[0]: str((json.loads(row[1] or "{}") or {}).get("engine") or "auto")
               for row in conn.execute("SELECT id, spec_json FROM steps")}
    for line_id, step_id, verdict, text in conn.execute("SELECT id, step_id, verdict, text FROM log_lines").fetchall():
        judged = judged_line(verdict, text, log_engine(engines.get(step_id, "auto")))
        conn.execute("UPDATE log_lines SET verdict = ?, rule = coalesce(rule, ?), rank = coalesce(rank, ?),"
                     " caused = ? WHERE id = ?", (*judged, line_id))
    for step_id, readiness_json in conn.execute(
            "SELECT id, readiness_json FROM steps WHERE readiness_json IS NOT NULL").fetchall():
        readiness = json.loads(readiness_json)
        if isinstance(readiness, dict) and "ready_line" not in readiness:
            engine = log_engine(engines.get(step_id, "auto"))
            readiness["ready_line"] = ready_line_of(readiness.get("last_lines") or [], engine) \
                if readiness.get("ready") else None
            failure = readiness.get("failure")
            if isinstance(failure, dict) and isinstance(failure.get("context"), list):  # no probe's access line
                failure["context"] = [line for line in failure["context"] if not is_toolkit_request(str(line))]
            conn.execute("UPDATE steps SET readiness_json = ? WHERE id = ?", (json.dumps(readiness), step_id))


# What each schema version adds to the one before (the CREATE statements above are the latest): SQL, or a
# function of the connection, run in the opening transaction.
_MIGRATIONS: dict[int, tuple[str | Callable[[sqlite3.Connection], None], ...]] = {
    # 2: the checkout a commit step came from (its folder, its origin without credentials), for the reproduce block
    2: ("ALTER TABLE steps ADD COLUMN repo_dir TEXT", "ALTER TABLE steps ADD COLUMN repo_origin TEXT"),
    # 3: whether the toolkit caused a stored line (its own request, the stop it asked for), judged once
    3: ("ALTER TABLE log_lines ADD COLUMN caused TEXT", _judge_stored_lines),
}
_NEW_FILE_HINT = "pass the path of a journal .sqlite file, or a new path to start one"
_FOLDER_HINT = "pass a path in a folder you can write (for example journals/ beside your notebook)"


@dataclass(frozen=True)
class Opened:
    """An open connection; ``read_only_reason`` says why recording is refused (None: writable)."""

    conn: sqlite3.Connection
    read_only_reason: str | None


def open_journal(path: Path, *, busy_timeout_s: float, read_only: bool) -> Opened:
    """Open (or start) the journal at ``path``; refuse anything that is not one, changing nothing."""
    _check_kind(path)
    if read_only:
        return _open_for_reading(path, busy_timeout_s, "it was opened with read_only=True")
    if not path.exists():
        _check_folder(path)
    elif (reason := _why_not_writable(path)) is not None:
        return _open_for_reading(path, busy_timeout_s, reason)
    conn = _connect(path, "rwc", busy_timeout_s)
    try:
        fresh = _check_contents(conn, path)
        _prepare(conn, busy_timeout_s, fresh)
    except sqlite3.Error as exc:
        conn.close()
        if exc.sqlite_errorname.startswith("SQLITE_READONLY"):  # a mount or lock we could not see from here
            return _open_for_reading(path, busy_timeout_s, f"SQLite refused to write it ({exc})")
        raise journal_error(exc, path, "opening the journal") from exc
    except JournalError:
        conn.close()
        raise
    return Opened(conn, None)


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _check_kind(path: Path) -> None:
    """A journal is a regular file or nothing yet (issue 25: SQLite called a FIFO a "disk I/O error")."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # not there (or not reachable): the usual checks below say which
    kind = next((name for test, name in _KINDS if test(mode)), None)
    if kind is not None:
        target = f" (a link to {os.path.realpath(path)})" if path.is_symlink() else ""
        raise JournalError(f"{path}{target} is {kind}, not a journal file", hint="pass the path of a .sqlite file, "
                           "or a new path to start a journal")


def _check_folder(path: Path) -> None:
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise JournalError(f"cannot create the folder {folder} for the journal {path.name}: {exc.strerror or exc}",
                           hint=_FOLDER_HINT) from exc
    if not os.access(folder, os.W_OK):
        raise JournalError(f"cannot start the journal {path}: the folder {folder} is not writable",
                           hint=_FOLDER_HINT)


def _why_not_writable(path: Path) -> str | None:
    if not os.access(path, os.W_OK):
        return "the file is not writable (its permissions, or a read-only mount)"
    if not os.access(path.parent, os.W_OK):
        return (f"its folder {path.parent} is not writable (SQLite writes {path.name}-wal and "
                f"{path.name}-shm beside the journal)")
    return None


def _connect(path: Path, mode: str, busy_timeout_s: float, *, immutable: bool = False) -> sqlite3.Connection:
    uri = f"{path.resolve().as_uri()}?mode={mode}" + ("&immutable=1" if immutable else "")
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise journal_error(exc, path, "opening the journal") from exc
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    return conn


def _open_for_reading(path: Path, busy_timeout_s: float, reason: str) -> Opened:
    if not path.is_file():
        raise JournalError(f"no journal at {path}", hint="check the path (Journal(path) without read_only=True "
                           "starts a new journal there)")
    conn = _connect(path, "ro", busy_timeout_s)
    try:
        _check_contents(conn, path, writable=False)
    except sqlite3.OperationalError as exc:
        conn.close()
        # A WAL journal in a folder nobody may write: SQLite cannot make the -shm file it reads
        # through. With no -wal file beside it, the main file holds everything: read it as immutable.
        if exc.sqlite_errorname != "SQLITE_CANTOPEN" or Path(f"{path}-wal").exists():
            raise journal_error(exc, path, "reading the journal") from exc
        conn = _connect(path, "ro", busy_timeout_s, immutable=True)
        try:
            _check_contents(conn, path, writable=False)
        except (sqlite3.Error, JournalError):
            conn.close()
            raise
    except JournalError:
        conn.close()
        raise
    return Opened(conn, reason)


def _check_contents(conn: sqlite3.Connection, path: Path, *, writable: bool = True) -> bool:
    """Read only: True for an empty file (ours to start), nothing for a journal, JournalError for the rest."""
    try:
        tables = sorted(row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorname in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
            raise JournalError(f"{path} is not a journal: {exc} (it is not an SQLite file, or a damaged one)",
                               hint=_NEW_FILE_HINT) from exc
        raise
    if not tables:
        if not writable:
            raise JournalError(f"{path} holds no journal (an empty file), and it cannot be written",
                               hint=_NEW_FILE_HINT)
        return True
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
        if "meta" in tables else None
    if version is None:
        shown = ", ".join(tables[:8]) + (f" and {len(tables) - 8} more" if len(tables) > 8 else "")
        raise JournalError(f"{path} is the database of another application (tables: {shown}), not a journal; "
                           "it was left unchanged", hint="pass a new path for the journal, e.g. journals/NAME.sqlite")
    _check_version(path, version[0])
    return False


def _check_version(path: Path, value: object) -> None:
    try:
        number = int(str(value))
    except ValueError:
        number = 0
    if number < 1:
        raise JournalError(
            f"{path} has the schema version {value!r}, which no toolkit writes: the file was edited by hand "
            "or written by another program", evidence=[f"meta.schema_version = {value!r}"],
            hint="open a journal the toolkit wrote, or pass a new path to start one (keep this file as it is)")
    if number > SCHEMA_VERSION:
        raise JournalError(
            f"{path} was written by a newer toolkit (schema {number}; this toolkit reads {SCHEMA_VERSION})",
            hint="upgrade the toolkit to read this journal (pip install -U in the toolkit's venv)")


def _prepare(conn: sqlite3.Connection, busy_timeout_s: float, fresh: bool) -> None:
    _to_wal(conn, busy_timeout_s)
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("BEGIN IMMEDIATE")
    try:
        for create in _SCHEMA:
            conn.execute(create)
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if version is None:  # fresh, or started by another process a moment ago
            conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(version[0]) < SCHEMA_VERSION:  # checked by _check_version; another process may have migrated it
            for number in range(int(version[0]) + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[number]:
                    if callable(statement):
                        statement(conn)
                    else:
                        conn.execute(statement)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _to_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> None:
    """Switch to WAL, retrying: two notebooks opening one new journal are told "locked" without a wait."""
    deadline = time.monotonic() + busy_timeout_s
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorname not in ("SQLITE_BUSY", "SQLITE_LOCKED") or time.monotonic() >= deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)


def journal_error(exc: sqlite3.Error, path: Path, doing: str) -> JournalError:
    """SQLite's error as a JournalError naming the file, what failed and what to do."""
    name = exc.sqlite_errorname
    folder = path.parent
    kept = "everything recorded before is kept"
    if name == "SQLITE_FULL":
        try:
            free = f"{shutil.disk_usage(folder).free:,} bytes free on the disk holding {folder}"
        except OSError:
            free = f"the free space of {folder} is unknown"
        return JournalError(f"the disk holding {path} is full: {doing} was not recorded ({exc})", evidence=[free],
                            hint=f"free space on that disk (df -h {folder}), then record the step again; {kept}")
    if name.startswith("SQLITE_READONLY"):
        return JournalError(f"{path} is read-only: {doing} was not recorded ({exc})",
                            hint="record into a writable copy (copy the file, then Journal(copy, resume=True)) or "
                                 "make the file and its folder writable")
    if name.startswith("SQLITE_IOERR"):
        return JournalError(f"could not write {path}: {doing} failed with a disk I/O error ({name})",
                            hint=f"check the disk holding {folder} (full? over quota? removed?); {kept}")
    if name in ("SQLITE_BUSY", "SQLITE_LOCKED"):
        return JournalError(f"another process held {path} longer than the busy timeout: {doing} gave up ({exc})",
                            hint="wait for the other notebook or script to finish its write, or pass a larger "
                                 "busy_timeout_s")
    if name == "SQLITE_CANTOPEN":
        return JournalError(f"cannot open {path}: {exc}",
                            hint=f"check that {folder} exists and that you may read (and write) it")
    if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
        return JournalError(f"{path} is damaged: {doing} failed ({exc})",
                            hint="restore it from a copy; `sqlite3 FILE 'PRAGMA integrity_check'` says what is damaged")
    return JournalError(f"the journal {path} refused {doing}: {exc} ({name})",
                        hint="read the SQLite message above; a new path starts a fresh journal")
