"""The one write gate: every value redacted before it reaches SQLite, and the lock held only for the write.

Redaction runs *before* the lock is taken: a megabyte log line must not stall another thread or
notebook writing the same journal (issue 20: one 60 kB line once held it 33.6 s).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.errors import JournalError
from toolkit.journal._sqlite import journal_error, open_journal
from toolkit.redaction import Redactor, redact_obj, redact_text

__all__ = ["Json", "Clean", "clean", "loads", "Store"]


@dataclass(frozen=True, slots=True)
class Json:
    """A value to store as JSON text; the gate redacts the tree, then encodes it."""

    value: Any


@dataclass(frozen=True, slots=True)
class Clean:
    """A value that already passed the gate (made by :func:`clean` only): written as it is."""

    value: str | int | float | None


def clean(value: Any) -> Clean:
    """Redact (and encode) one value now, so that a transaction later only writes it."""
    if isinstance(value, Clean):
        return value
    if isinstance(value, Json):
        return Clean(None if value.value is None else json.dumps(redact_obj(value.value), ensure_ascii=False))
    if isinstance(value, str):
        return Clean(redact_text(value))
    if value is None or isinstance(value, bool | int | float):
        return Clean(value)
    raise TypeError(f"the journal stores text, numbers and Json(...), not {type(value).__name__}")


def _gate(params: Sequence[Any], known: Redactor) -> tuple[Any, ...]:
    values = (clean(value).value for value in params)
    return tuple(known.literals(v) if isinstance(v, str) else v for v in values)


def loads(text: str | None, expect: type | None = None, *, where: str = "a JSON column") -> Any:
    """Decode a JSON column (None stays None) that must decode to ``expect``.

    Issue 25: a damaged journal (a list as a spec) crashed ``report`` with a traceback; now a JournalError.
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        raise _damaged(where, text, "is not JSON") from None
    if expect is not None and value is not None and not isinstance(value, expect):
        raise _damaged(where, text, f"is a JSON {type(value).__name__}, not a {expect.__name__}")
    return value


def _damaged(where: str, text: Any, what: str) -> JournalError:
    shown = repr(text[:60] if isinstance(text, str | bytes) else text)
    return JournalError(f"the journal is damaged: {where} holds {shown}, which {what}",
                        hint="restore the journal from a copy, or repair or delete that row with sqlite3")


class Store:
    """One connection, shared by the threads of one process under a lock held only while SQLite works."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0, read_only: bool = False) -> None:
        self.path = Path(path)
        opened = open_journal(self.path, busy_timeout_s=busy_timeout_s, read_only=read_only)
        self._conn = opened.conn
        self.read_only_reason = opened.read_only_reason
        self._lock = threading.RLock()
        self._known = Redactor()  # the literal secret values of every spec recorded through this store

    def learn_secrets(self, values: Iterable[str]) -> None:
        """Hide these values (a spec's ``secrets()``) in everything written from now on, whatever their shape."""
        new = frozenset(v for v in values if v) - self._known.values
        if new:
            with self._lock:
                self._known = Redactor.of(self._known.values | new)

    @property
    def read_only(self) -> bool:
        return self.read_only_reason is not None

    def _refuse_if_read_only(self, doing: str) -> None:
        if self.read_only_reason is not None:
            raise JournalError(
                f"{self.path} is open for reading only ({self.read_only_reason}): {doing} was not recorded",
                hint="record into a writable copy (copy the file, then Journal(copy, resume=True)), or make the "
                     "file and its folder writable and open it again")

    @contextmanager
    def transaction(self, doing: str) -> Iterator[_Tx]:
        """Several writes that stand or fall together; :func:`clean` bulky values before: the lock is held."""
        self._refuse_if_read_only(doing)
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise journal_error(exc, self.path, doing) from exc
            try:
                yield _Tx(self._conn, self._known)
                self._conn.execute("COMMIT")
            except BaseException as exc:
                if self._conn.in_transaction:  # a failed COMMIT (a full disk) leaves it open
                    with contextlib.suppress(sqlite3.Error):  # never hide the first error behind this one
                        self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise journal_error(exc, self.path, doing) from exc
                raise

    def write(self, sql: str, params: Sequence[Any] = (), *, doing: str = "a write") -> int:
        """One statement, committed at once; returns the last row id."""
        self._refuse_if_read_only(doing)
        values = _gate(params, self._known)  # before the lock
        with self._lock:
            try:
                cursor = self._conn.execute(sql, values)
            except sqlite3.Error as exc:
                raise journal_error(exc, self.path, doing) from exc
            return int(cursor.lastrowid or 0)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            cursor = self._conn.cursor()
            cursor.row_factory = sqlite3.Row
            try:
                return list(cursor.execute(sql, tuple(params)).fetchall())
            except sqlite3.Error as exc:
                raise journal_error(exc, self.path, "reading the journal") from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class _Tx:
    """The writer handed out inside a transaction; it applies the same gate (cheap for Clean values)."""

    def __init__(self, conn: sqlite3.Connection, known: Redactor) -> None:
        self._conn = conn
        self._known = known

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, _gate(params, self._known))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, [_gate(row, self._known) for row in rows])
