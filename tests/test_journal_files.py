"""A hostile file system (issue 20): read-only journals, foreign databases, odd schema versions, full disks.

Each failure is a JournalError that says what happened and what to do, and nothing already
recorded is lost or changed. Read-only and full disks are made real: as root, a read-only
bind mount and a small tmpfs; otherwise file permissions and RLIMIT_FSIZE.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from journal_data import bench_result

from toolkit.errors import JournalError
from toolkit.journal import Journal, SourceRepo
from toolkit.logs import classify_lines
from toolkit.report.document import to_markdown
from toolkit.report.postmortem import build
from toolkit.server.spec import ServerSpec

ROOT = Path(__file__).resolve().parents[1]


def _digest(path: Path) -> dict[str, str]:
    """The journal's content: the main file and a -wal file that holds frames, by content hash.

    (A reader of a WAL file in a writable folder makes an empty -wal and the -shm index it
    reads through: SQLite's reading machinery, not a change of content.)
    """
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.parent.iterdir())
            if p.name == path.name or (p.name == f"{path.name}-wal" and p.stat().st_size > 0)}


def _journal_with_one_run(path: Path) -> None:
    with Journal(path, investigation="before") as journal, journal.step("baseline", "kept") as step:
        step.record(bench_result(82.5))
        step.set_verdict("confirmed")


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """Make ``folder`` and its files unwritable for this process: a read-only bind mount as root, modes otherwise."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [folder, *folder.iterdir()]}
        for p in modes:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    if not (_mount("--bind", str(folder), str(folder)) and _mount("-o", "remount,bind,ro", str(folder))):
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
        pytest.skip("a read-only bind mount needs CAP_SYS_ADMIN, which this root process lacks")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_read_only_journal_opens_for_reading(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "journals"
    folder.mkdir()
    path = folder / "eagle3.sqlite"
    _journal_with_one_run(path)
    before = _digest(path)
    with read_only(folder):
        journal = Journal(path)
        assert journal.read_only and journal.investigation == "before"
        assert "open for reading only" in capsys.readouterr().out
        assert journal.steps()["title"].tolist() == ["kept"]
        assert journal.results(wide=True)["output_throughput"].tolist() == pytest.approx([82.5])
        with pytest.raises(JournalError, match="reading only") as refused:
            journal.step("note", "new")
        assert refused.value.hint is not None and "writable copy" in refused.value.hint
        with pytest.raises(JournalError, match="reading only"):
            journal.root_cause("x")
        journal.close()
    assert _digest(path) == before


def test_read_only_true_changes_nothing_not_even_an_orphaned_step(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    _journal_with_one_run(path)
    with sqlite3.connect(path) as conn:  # a step left running by a process that is gone
        conn.execute("UPDATE steps SET status = 'running', pid = 999999999")
    conn.close()
    before = _digest(path)
    journal = Journal(path, read_only=True)
    assert journal.interrupted_on_open == () and journal.steps()["status"].tolist() == ["running"]
    with pytest.raises(JournalError, match="read_only=True"):
        journal.note("n", "x")
    journal.close()
    assert _digest(path) == before


def test_a_foreign_sqlite_file_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER)")
        conn.execute("INSERT INTO users(name) VALUES ('ada')")
    conn.close()
    before = _digest(path)
    for read_only_flag in (False, True):
        with pytest.raises(JournalError, match=r"another application \(tables: orders, users\)") as refused:
            Journal(path, read_only=read_only_flag)
        assert "left unchanged" in str(refused.value) and refused.value.hint is not None
    assert _digest(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")] \
            == ["orders", "users"]
    finally:
        conn.close()


@pytest.mark.parametrize(("value", "message", "hint"), [
    ("abc", "schema version 'abc', which no toolkit writes", "new path"),
    ("0", "schema version '0'", "new path"),
    ("99", r"newer toolkit \(schema 99; this toolkit reads 3\)", "upgrade the toolkit"),
])
def test_a_schema_version_it_cannot_read_says_what_to_do(tmp_path: Path, value: str, message: str, hint: str) -> None:
    path = tmp_path / "j.sqlite"
    _journal_with_one_run(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    conn.close()
    before = _digest(path)
    for read_only_flag in (False, True):
        with pytest.raises(JournalError, match=message) as refused:
            Journal(path, read_only=read_only_flag)
        assert refused.value.hint is not None and hint in refused.value.hint
    assert _digest(path) == before


def test_an_unwritable_folder_is_a_journal_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(JournalError, match="cannot create the folder") as refused:
        Journal(blocker / "journals" / "j.sqlite")
    assert refused.value.hint is not None and "folder you can write" in refused.value.hint
    folder = tmp_path / "locked"
    folder.mkdir()
    with read_only(folder), pytest.raises(JournalError, match="is not writable") as refused:
        Journal(folder / "new.sqlite")
    assert not (folder / "new.sqlite").exists()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB tmpfs (root only)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)):
        pytest.skip("mounting a small tmpfs needs root with CAP_SYS_ADMIN; the RLIMIT_FSIZE test covers the rest")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def _fill(disk: Path) -> Path:
    """Write zeros until the disk says ENOSPC (unbuffered: a buffer would fail again at close)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_a_full_disk_says_so_and_loses_nothing(small_disk: Path) -> None:
    path = small_disk / "j.sqlite"
    journal = Journal(path, investigation="full disk")
    with journal.step("baseline", "kept") as step:
        step.record(bench_result(82.5))
    filler = _fill(small_disk)
    with pytest.raises(JournalError, match="is full") as full, journal.step("note", "too much") as step:
        step.note("a long observation " * 20_000)
    assert full.value.hint is not None and "free space" in full.value.hint and "kept" in full.value.hint
    assert journal.steps()["title"].tolist()[0] == "kept"
    assert journal.results(wide=True)["output_throughput"].tolist() == pytest.approx([82.5])
    filler.unlink()
    journal.note("after", "space again")  # the same Journal records again once there is room
    journal.close()
    reopened = Journal(path, resume=True)
    assert reopened.steps()["title"].tolist()[0] == "kept" and reopened.steps()["title"].tolist()[-1] == "after"
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    check.close()
    reopened.close()


def test_a_write_the_file_system_refuses_is_a_journal_error(tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes the file system refuse to grow the file (EFBIG), for any user."""
    path = tmp_path / "j.sqlite"
    _journal_with_one_run(path)
    code = textwrap.dedent(f"""
        import resource, signal
        from toolkit.errors import JournalError
        from toolkit.journal import Journal
        journal = Journal({str(path)!r}, resume=True)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY))
        try:
            with journal.step("note", "too much") as step:
                step.note("a long observation " * 40_000)
        except JournalError as exc:
            print("JournalError:", exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "JournalError: could not write" in out.stdout and "disk I/O error" in out.stdout
    assert "everything recorded before is kept" in out.stdout
    journal = Journal(path, resume=True)
    assert journal.steps()["title"].tolist()[0] == "kept"
    assert journal.results(wide=True)["output_throughput"].tolist() == pytest.approx([82.5])
    journal.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    check.close()


def _as_schema_2(path: Path) -> None:
    """The file as a toolkit of schema 2 wrote it: log lines without `caused`, start-ups without their ready line."""
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE log_lines DROP COLUMN caused")
        for step_id, readiness in conn.execute("SELECT id, readiness_json FROM steps WHERE readiness_json IS NOT NULL"):
            old = {k: v for k, v in json.loads(readiness).items() if k != "ready_line"}
            conn.execute("UPDATE steps SET readiness_json = ? WHERE id = ?", (json.dumps(old), step_id))
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()


def _as_schema_1(path: Path) -> None:
    """The file as a toolkit of schema 1 wrote it: no checkout columns, version 1."""
    _as_schema_2(path)
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE steps DROP COLUMN repo_dir")
        conn.execute("ALTER TABLE steps DROP COLUMN repo_origin")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()


def test_a_journal_of_schema_1_is_read_as_it_is_and_migrated_when_opened_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _journal_with_one_run(path)
    _as_schema_1(path)
    before = _digest(path)
    old = Journal(path, read_only=True)
    steps = old.steps()
    assert list(steps["title"]) == ["kept"] and steps["repo_dir"].isna().all() and steps["repo_origin"].isna().all()
    old.close()
    assert _digest(path) == before  # read-only: not migrated

    journal = Journal(path, resume=True)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "3"
        columns = [row[1] for row in conn.execute("PRAGMA table_info(steps)")]
    conn.close()
    assert columns[-2:] == ["repo_dir", "repo_origin"]
    with journal.step("commit", "after the migration", repo=SourceRepo("/src/sglang", "https://git.example/sglang.git")):
        pass
    steps = journal.steps()
    assert list(steps["title"]) == ["kept", "after the migration"] and steps["verdict"].iloc[0] == "confirmed"
    assert steps["repo_dir"].fillna("").tolist() == ["", "/src/sglang"]
    assert steps["repo_origin"].fillna("").tolist() == ["", "https://git.example/sglang.git"]
    assert journal.results()["runs"].tolist() == [1]
    journal.close()
    Journal(path, resume=True).close()  # opening it again changes nothing more


def test_a_journal_of_schema_2_has_its_lines_judged_once_when_opened_for_writing(tmp_path: Path) -> None:
    """Schema 3 stores whether the toolkit caused a line and a start-up's ready line: the report reads them and
    classifies nothing. An older journal's lines are judged once, by the migration (a pasted line too)."""
    path = tmp_path / "old.sqlite"
    probe = '[2026-02-26 20:26:08] INFO:     127.0.0.1:40330 - "GET /health_generate HTTP/1.1" 503 Service Unavailable'
    ready = "[2026-02-26 20:26:09] The server is fired up and ready to roll!"
    pasted = ("[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: cannot import "
              "name 'GlmAsrConfig' from 'transformers'")
    with Journal(path, investigation="before") as journal, journal.step("baseline", "kept") as step:
        step.set_spec(ServerSpec.sglang("m", tp=1, port=30000))
        step.record_log_lines([*classify_lines([probe], engine="sglang"), pasted])
    with sqlite3.connect(path) as conn:  # as schema 2 stored them: a verdict for the event, none for the paste
        conn.execute("UPDATE log_lines SET verdict = NULL, rule = NULL, rank = NULL WHERE text = ?", (pasted,))
        readiness = {"ready": True, "state": "ready", "last_lines": [probe, ready], "ready_line": None}
        conn.execute("UPDATE steps SET readiness_json = ?", (json.dumps(readiness),))
    conn.close()
    _as_schema_2(path)
    journal = Journal(path, resume=True)
    lines = journal.log_lines().set_index("text")
    assert lines.loc[probe, "caused"] == "request" and lines.loc[probe, "verdict"] == "warning"
    assert lines.loc[pasted, "verdict"] == "benign" and lines.loc[pasted, "rank"] == "TP5"
    assert journal.steps()["readiness"].iloc[0]["ready_line"]["raw"] == ready
    report = to_markdown(build(journal, dpi=40)[1])
    assert ready in report and "GET /health_generate" not in report and "1 access line of the toolkit" in report
    journal.close()
