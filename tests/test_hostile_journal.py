"""Issue 25: a damaged or hostile journal is refused in one line (exit 2), and its notes are not followed
outside its own profiles folder."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from journal_data import bench_result

from toolkit.cli.report import main as report_main
from toolkit.errors import JournalError
from toolkit.journal import Journal
from toolkit.moves.profile import profiles_dir
from toolkit.observe.torch_profile import PHASES_CSV, load_profile
from toolkit.report import postmortem as report


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    journal = Journal(tmp_path_factory.mktemp("intact") / "intact.sqlite", investigation="intact")
    with journal.step("the one step", "only") as step:
        step.record(bench_result(82.0))
    journal.close()
    return journal.path


DAMAGE = {
    "spec not JSON": "UPDATE steps SET spec_json = '{not json'",
    "spec a list": "UPDATE steps SET spec_json = '[1, 2]'",
    "summary not JSON": "UPDATE runs SET summary_json = '{\"output_throughput\": '",
    "hosts not JSON": "UPDATE steps SET hosts_json = 'gpu-a'",
    "request not JSON": "UPDATE requests SET data_json = '{' WHERE idx = 1",
    "readiness a number": "UPDATE steps SET readiness_json = '5'",
    "start time text": "UPDATE steps SET started_at = 'yesterday'",
    "record time text": "UPDATE runs SET recorded_at = 'now'",
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_journal_is_refused_in_one_line(intact: Path, tmp_path: Path, damage: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "damaged.sqlite"
    shutil.copy(intact, path)
    with sqlite3.connect(path) as db:
        db.execute(DAMAGE[damage])
    db.close()
    assert report_main([str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the journal is damaged: ") and err.count("\n") == 1, err


def _profiled_journal(tmp_path: Path, folder: str) -> Journal:
    journal = Journal(tmp_path / "received.sqlite", investigation="received")
    with journal.step("profiled", "a step with a profile") as step:
        step.note(f"profile: {folder}\nsummary")
    return journal


def test_a_profile_note_pointing_outside_the_journals_profiles_folder_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "profile.json").write_text('{"label": "private", "files": [], "capture_s": 1, "method": "m", '
                                         '"engine": "sglang"}')
    (tmp_path / "j").mkdir()
    for folder in (str(secret), "../elsewhere", "received.profiles/../../elsewhere"):
        journal = _profiled_journal(tmp_path / "j", folder)
        text = report.write(journal, tmp_path / "out").markdown.read_text(encoding="utf-8")
        assert "private" not in text and "outside this journal's profiles folder" in text
        journal.close()
        journal.path.unlink()


def test_an_odd_phases_table_is_named_not_a_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "profile.json").write_text('{"label": "x", "files": [], "capture_s": 1, "method": "m", "engine": "sglang"}')
    (folder / PHASES_CSV).write_text("phase,gpu_ms\nverify,lots\n")
    with pytest.raises(ValueError, match="phases.csv lacks the column"):
        load_profile(folder)
    assert profiles_dir(Journal(tmp_path / "j.sqlite")).name == "j.profiles"


def test_a_fifo_or_a_link_to_dev_null_as_journal_is_named_for_what_it_is(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fifo, null = tmp_path / "fifo.sqlite", tmp_path / "null.sqlite"
    os.mkfifo(fifo)
    null.symlink_to(os.devnull)
    with pytest.raises(JournalError, match=r"fifo.sqlite is a FIFO \(named pipe\), not a journal file"):
        Journal(fifo)
    with pytest.raises(JournalError, match=r"null.sqlite \(a link to /dev/null\) is a character device, not a journal"):
        Journal(null)
    assert report_main([str(null), "--out", str(tmp_path / "out")]) == 2
    assert "is a character device, not a journal file" in capsys.readouterr().err
