"""``Journal``: one SQLite file holding investigations -> steps -> runs, read back as DataFrames."""

from __future__ import annotations

import os
import platform
import threading
import time
from collections.abc import Mapping
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import TracebackType

import pandas as pd

from toolkit.journal import _frames
from toolkit.journal._compare import compare_frames, resolve_side
from toolkit.journal._investigation import Investigation, choose, free_name
from toolkit.journal._owner import ProcessIdentity
from toolkit.journal._recorder import StepRecorder
from toolkit.journal._results import configurations
from toolkit.journal._store import Json, Store, clean
from toolkit.journal.adapters import Hosts, SourceRepo, host_names, spec_row
from toolkit.redaction import redact_text
from toolkit.server.spec import ServerSpec

__all__ = ["Journal"]


@cache
def _toolkit_version() -> str | None:
    try:
        return version("toolkit")
    except PackageNotFoundError:
        return None


class Journal:
    """The record of an investigation: every step, its spec, runs, verdict and evidence, in one file.

    Opening a file that holds investigations starts a new one and says how to continue the last
    (``resume=True``). Safe to open from several kernels at once.

    >>> journal = Journal("journals/eagle3.sqlite", investigation="EAGLE-3 regression")  # doctest: +SKIP
    >>> with journal.step("baseline", "no speculation", spec=base, host=host) as step:  # doctest: +SKIP
    ...     step.record(tk.bench(server, num_prompts=64))
    >>> journal.results()  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike[str], investigation: str | None = None, *,
                 resume: bool = False, read_only: bool = False, busy_timeout_s: float = 30.0) -> None:
        if investigation is not None and not isinstance(investigation, str):  # issue 25: 5 failed deep inside
            raise TypeError(f"Journal(investigation={investigation!r}): the investigation's name is text, like "
                            "'eagle3 regression' (None: the journal's only investigation, or the file's name)")
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"Journal(path={path!r}): the path of a .sqlite file, as text or a Path")
        self.path = Path(path)
        self._store = Store(self.path, busy_timeout_s=busy_timeout_s, read_only=read_only)
        self._identity = ProcessIdentity.current()
        self._resume = resume
        self._starting = threading.Lock()
        self.interrupted_on_open: tuple[int, ...] = () if self.read_only else self._mark_orphans_interrupted()
        choice = choose(self._existing(), requested=None if investigation is None else redact_text(investigation),
                        resume=resume, read_only=self.read_only, default_name=self.path.stem, path=str(self.path))
        self.investigation: str = choice.name
        self.investigation_id: int | None = choice.id  # None until the first record creates it
        reason = self._store.read_only_reason
        self.notice: str | None = None if read_only else " ".join(part for part in (
            f"{self.path} is open for reading only ({reason}); recording raises JournalError." if reason else None,
            choice.notice) if part) or None
        if self.notice:  # asked for read_only=True: nothing to tell
            print(self.notice)  # a notebook user sees it under the cell; a warning would show only once

    def __repr__(self) -> str:
        mode = ", read_only=True" if self.read_only else ""
        return f"Journal({str(self.path)!r}, investigation={self.investigation!r}{mode})"

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def read_only(self) -> bool:
        """True when recording is refused (``read_only=True``, or a file or folder this process cannot write)."""
        return self._store.read_only

    def close(self) -> None:
        self._store.close()

    def _existing(self) -> list[Investigation]:
        rows = self._store.read(
            "SELECT i.id, i.name, count(s.id) AS steps, max(coalesce(max(s.updated_at), i.created_at),"
            " i.created_at) AS last_at FROM investigations i LEFT JOIN steps s ON s.investigation_id = i.id"
            " GROUP BY i.id ORDER BY i.id")
        return [Investigation(int(r["id"]), str(r["name"]), int(r["steps"]), float(r["last_at"])) for r in rows]

    def _investigation_id(self) -> int:
        """The investigation's row, created by the first record of a new one (once, whichever thread records)."""
        with self._starting:
            if self.investigation_id is not None:
                return self.investigation_id
            with self._store.transaction(f"starting the investigation {self.investigation!r}") as tx:
                taken = {str(row[0]): int(row[1]) for row in tx.execute("SELECT name, id FROM investigations")}
                if self.investigation in taken and self._resume:  # started by another process since we opened
                    self.investigation_id = taken[self.investigation]
                    return self.investigation_id
                name = free_name(self.investigation, taken)  # another process took the name since we opened
                cursor = tx.execute("INSERT INTO investigations(name, created_at) VALUES (?, ?)",
                                    (name, time.time()))
            self.investigation, self.investigation_id = name, int(cursor.lastrowid or 0)
            return self.investigation_id

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
                doing=f"marking step {row['id']} interrupted")
            marked.append(int(row["id"]))
        return tuple(marked)

    def step(self, kind: str, title: str | None = None, *, hypothesis: str | None = None,
             spec: ServerSpec | None = None, host: Hosts | None = None,
             versions: Mapping[str, str] | None = None, repo: SourceRepo | None = None) -> StepRecorder:
        """Start a step (stored at once as ``running``); use the result as a context manager.

        ``kind`` is one of ``STEP_KINDS`` or your own word. ``repo``: the checkout a commit step came
        from, so the post-mortem can say where to clone it.
        """
        if not isinstance(kind, str) or not kind.strip():
            raise ValueError("kind must be a non-empty string such as 'baseline', 'flag_change' or 'attention_mode'")
        if spec is not None:  # its secrets' values are hidden in every later write, notes included
            self._store.learn_secrets(spec.secrets())
        row = spec_row(spec) if spec is not None else None
        title = title or (row.label if row else None) or kind
        known = {"toolkit": _toolkit_version(), "python": platform.python_version()}
        all_versions = {k: v for k, v in known.items() if v} | dict(versions or {})
        values = [clean(v) for v in (kind, title, hypothesis, Json(row.data if row else None), row.label if row else None,
                                     row.command if row else None, Json(host_names(host)), Json(all_versions),
                                     repo.repo_dir if repo else None, repo.origin if repo else None)]
        investigation_id = self._investigation_id()
        now, me = time.time(), self._identity
        step_id = self._store.write(
            "INSERT INTO steps(investigation_id, kind, title, hypothesis, spec_json, spec_label, command,"
            " hosts_json, versions_json, repo_dir, repo_origin, status, started_at, updated_at, pid, hostname,"
            " proc_token) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)",
            (investigation_id, *values, now, now, me.pid, me.hostname, me.token), doing=f"the step {title!r}")
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
            (text, time.time(), step, self._investigation_id()), doing="the root cause")

    def root_cause_text(self) -> str | None:
        row = self._store.read("SELECT root_cause FROM investigations WHERE id = ?", (self.investigation_id,))
        return row[0]["root_cause"] if row else None

    def investigations(self) -> pd.DataFrame:
        """Every investigation in the file, with its step count and root cause."""
        return _frames.investigations_frame(self._store)

    def steps(self) -> pd.DataFrame:
        """One row per step of this investigation, in order (``seq``), with spec, verdict and error."""
        return _frames.steps_frame(self._store, self.investigation_id)

    def results(self, *, wide: bool = False) -> pd.DataFrame:
        """One row per configuration: runs, output tok/s ± 95 % CI, median TTFT and ITL, verdicts (rounded).

        ``wide=True``: one row per run, every metric and ``flag:``/``env:`` column (what plots draw from).
        """
        frame = _frames.results_frame(self._store, self.investigation_id)
        return frame if wide else configurations(frame)

    def compare(self, a: int | str, b: int | str) -> pd.DataFrame:
        """What differs from a to b (a step id, ``"run:ID"``, ``"step:ID"``, a label): spec, then metrics."""
        steps, results = self.steps(), self.results(wide=True)
        return compare_frames(resolve_side(a, steps, results), resolve_side(b, steps, results))

    def requests(self, run_id: int | None = None) -> pd.DataFrame:
        """Per-request rows of one run (or of every run), with ``label`` for plotting."""
        return _frames.requests_frame(self._store, self.investigation_id, run_id)

    def metric_lines(self, run_id: int | None = None, *, step_id: int | None = None) -> pd.DataFrame:
        """The server's metric lines (one column per value), ``t_s`` seconds since the run's first line."""
        return _frames.metric_lines_frame(self._store, self.investigation_id, run_id, step_id)

    def log_lines(self, step_id: int | None = None) -> pd.DataFrame:
        """The decisive log lines recorded with the steps (redacted as stored)."""
        return _frames.log_lines_frame(self._store, self.investigation_id, step_id)
