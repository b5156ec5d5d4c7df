"""Several processes and sudden death: kill -9 mid-loop, two writers at once, orphaned running steps."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit.journal import Journal

ROOT = Path(__file__).resolve().parents[1]

LOOP = """
import sys, time
sys.path.insert(0, "tests")
from journal_data import bench_result
from toolkit.journal import Journal
journal = Journal(sys.argv[1], investigation="loop")
stop_at = int(sys.argv[2])
for i in range(10_000):
    with journal.step("flag_change", f"step {i}", hypothesis="loop") as step:
        step.record(bench_result(80.0 + i))
        if i == stop_at:
            print("inside", step.id, flush=True)
            time.sleep(120)
    print("done", i, flush=True)
"""

WRITER = """
import sys, time, pathlib
from toolkit.journal import Journal
path, who, go = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
while not go.exists():
    time.sleep(0.001)
journal = Journal(path, investigation="shared")
with journal.step("note", f"writer {who}") as step:
    for i in range(200):
        step.note(f"{who}-{i}")
"""


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def test_kill_9_inside_a_step_keeps_finished_steps_and_marks_the_running_one(tmp_path: Path) -> None:
    path = tmp_path / "loop.sqlite"
    child = _spawn(LOOP, str(path), "3")
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("inside"):
            break
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=10)
    journal = Journal(path, investigation="loop", resume=True)
    steps = journal.steps()
    assert journal.interrupted_on_open == (4,)
    assert steps["status"].tolist() == ["done", "done", "done", "interrupted"]
    assert f"pid {child.pid}" in steps["error"].iloc[3]
    assert steps["finished_at"].notna().all()
    assert journal.results(wide=True)["output_throughput"].tolist() == pytest.approx([80.0, 81.0, 82.0, 83.0])
    assert _integrity(path) == "ok"
    assert Journal(path, resume=True).interrupted_on_open == ()  # marked once


def test_kill_9_at_an_arbitrary_moment_leaves_a_consistent_journal(tmp_path: Path) -> None:
    path = tmp_path / "loop.sqlite"
    child = _spawn(LOOP, str(path), "-1")
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("done 5"):
            break
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=10)
    steps = Journal(path, investigation="loop", resume=True).steps()
    *finished, last = steps["status"].tolist()
    assert len(steps) >= 6 and set(finished) == {"done"} and last in {"done", "interrupted"}
    assert "running" not in steps["status"].tolist()
    assert _integrity(path) == "ok"


def test_two_processes_writing_one_journal_lose_nothing(tmp_path: Path) -> None:
    path, go = tmp_path / "shared.sqlite", tmp_path / "go"
    writers = [_spawn(WRITER, str(path), who, str(go)) for who in ("a", "b")]
    time.sleep(0.3)  # both are waiting on the same fresh file; start them together
    go.touch()
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    assert _integrity(path) == "ok"
    conn = sqlite3.connect(path)
    try:
        texts = {row[0] for row in conn.execute("SELECT text FROM notes")}
        statuses = [row[0] for row in conn.execute("SELECT status FROM steps")]
    finally:
        conn.close()
    assert texts == {f"{who}-{i}" for who in ("a", "b") for i in range(200)}
    assert statuses == ["done", "done"]


def test_running_steps_of_live_or_remote_processes_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    mine = journal.step("baseline", "still running here")
    remote = journal.step("baseline", "running on another host")
    reused = journal.step("baseline", "a dead process whose pid was reused")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE steps SET hostname = 'gpu-b.example' WHERE id = ?", (remote.id,))
        conn.execute("UPDATE steps SET proc_token = 'other-boot:1' WHERE id = ?", (reused.id,))
    conn.close()
    reopened = Journal(path, resume=True)
    assert reopened.interrupted_on_open == (reused.id,)
    assert reopened.steps()["status"].tolist() == ["running", "running", "interrupted"]
    mine.finish()
    assert Journal(path, resume=True).steps()["status"].tolist()[0] == "done"
