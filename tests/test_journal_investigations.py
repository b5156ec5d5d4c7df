"""A journal opened for a new run starts a new investigation and says so; continuing one is explicit (issue 14)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from journal_data import bench_result

from toolkit.errors import JournalError
from toolkit.journal import Journal
from toolkit.journal._investigation import Investigation, choose
from toolkit.report import postmortem


def _notebook_run(path: Path, tok_s: float) -> Journal:
    """What a notebook does, top to bottom: open the journal, measure two configurations."""
    journal = Journal(path, investigation="EAGLE-3 slower than plain decoding")
    for title in ("baseline", "EAGLE-3"):
        with journal.step("flag_change", title) as step:
            step.record(bench_result(tok_s))
    return journal


def test_running_a_notebook_twice_gives_two_investigations_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "eagle3.sqlite"
    first = _notebook_run(path, 82.0)
    assert capsys.readouterr().out == ""  # a fresh file: nothing to tell
    second = _notebook_run(path, 60.0)
    told = capsys.readouterr().out
    assert f"{path} already holds the investigation 'EAGLE-3 slower than plain decoding' (2 steps" in told
    assert "This run records a new investigation, 'EAGLE-3 slower than plain decoding (2)'" in told
    assert (f"Journal('{path}', investigation='EAGLE-3 slower than plain decoding', resume=True)") in told
    assert second.notice is not None and second.notice in told
    assert second.investigation == "EAGLE-3 slower than plain decoding (2)"
    assert len(second.steps()) == 2 and len(first.steps()) == 2
    assert second.results(wide=True)["output_throughput"].tolist() == pytest.approx([60.0, 60.0])
    assert second.investigations()["n_steps"].tolist() == [2, 2]
    paths = postmortem.write(second, tmp_path / "out")
    markdown = paths.markdown.read_text(encoding="utf-8")
    assert "The investigation \u201cEAGLE-3 slower than plain decoding (2)\u201d took 2 steps" in markdown  # not 4


def test_resume_continues_the_named_or_latest_investigation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "j.sqlite"
    _notebook_run(path, 82.0)
    _notebook_run(path, 60.0)
    capsys.readouterr()
    latest = Journal(path, resume=True)
    assert latest.investigation == "EAGLE-3 slower than plain decoding (2)" and len(latest.steps()) == 2
    assert capsys.readouterr().out.startswith("Continuing the investigation 'EAGLE-3 slower than plain decoding (2)'")
    named = Journal(path, investigation="EAGLE-3 slower than plain decoding", resume=True)
    named.note("a third step", "added to the first run's investigation")
    assert named.steps()["title"].tolist() == ["baseline", "EAGLE-3", "a third step"]
    assert named.investigations()["n_steps"].tolist() == [3, 2]


def test_resume_of_a_name_the_file_lacks_lists_the_names(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    _notebook_run(path, 82.0)
    with pytest.raises(JournalError, match="holds no investigation named 'typo'") as missing:
        Journal(path, investigation="typo", resume=True)
    assert "'EAGLE-3 slower than plain decoding'" in str(missing.value)
    assert missing.value.hint is not None and "resume=True out" in missing.value.hint


def test_resume_on_a_new_file_just_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = Journal(tmp_path / "new.sqlite", investigation="first", resume=True)
    journal.note("n", "x")
    assert journal.investigations()["name"].tolist() == ["first"] and capsys.readouterr().out == ""


def test_opening_records_nothing_until_the_first_step(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    _notebook_run(path, 82.0)
    for _ in range(3):  # a report, a look at the tables: no empty investigations pile up
        Journal(path).close()
    journal = Journal(path)
    assert journal.investigation_id is None and journal.steps().empty and journal.results().empty
    assert journal.investigations()["name"].tolist() == ["EAGLE-3 slower than plain decoding"]
    journal.note("first of this run", "x")
    assert journal.investigations()["name"].tolist() == ["EAGLE-3 slower than plain decoding", "j"]


def test_without_a_name_the_new_investigation_is_named_after_the_file(tmp_path: Path) -> None:
    path = tmp_path / "eagle3.sqlite"
    for _ in range(3):
        Journal(path).note("n", "x")
    assert Journal(path, read_only=True).investigations()["name"].tolist() == ["eagle3", "eagle3 (2)", "eagle3 (3)"]


def test_a_secret_in_the_name_is_not_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = "hf_Zq8xP2mK9vL4tR7wY1nB5cD3fG6hJ0sA"
    path = tmp_path / "j.sqlite"
    Journal(path, investigation=f"run with {secret}").note("n", "x")
    again = Journal(path, investigation=f"run with {secret}")
    assert secret not in capsys.readouterr().out and again.investigation == "run with [REDACTED] (2)"


EARLIER = [Investigation(1, "EAGLE-3", 8, 1_772_136_000.0), Investigation(2, "NCCL", 3, 1_772_140_000.0)]


@pytest.mark.parametrize(("requested", "resume", "read_only", "expected"), [
    (None, False, False, ("j", None)),
    ("EAGLE-3", False, False, ("EAGLE-3 (2)", None)),
    ("new", False, False, ("new", None)),
    (None, True, False, ("NCCL", 2)),
    ("EAGLE-3", True, False, ("EAGLE-3", 1)),
    (None, False, True, ("NCCL", 2)),
    ("EAGLE-3", False, True, ("EAGLE-3", 1)),
])
def test_choose(requested: str | None, resume: bool, read_only: bool, expected: tuple[str, int | None]) -> None:
    choice = choose(EARLIER, requested=requested, resume=resume, read_only=read_only, default_name="j",
                    path="j.sqlite")
    assert (choice.name, choice.id) == expected
    assert choice.notice is not None  # the file holds investigations: the user is always told which
    if choice.id is None:
        named = "EAGLE-3" if requested == "EAGLE-3" else "NCCL"
        assert f"investigation={named!r}, resume=True" in choice.notice


def test_threads_that_record_first_start_one_investigation(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    _notebook_run(path, 82.0)
    journal = Journal(path, investigation="EAGLE-3 slower than plain decoding")
    go = threading.Barrier(4)

    def record(i: int) -> None:
        go.wait()
        journal.note(f"thread {i}", "x")

    threads = [threading.Thread(target=record, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(journal.steps()["title"]) == [f"thread {i}" for i in range(4)]
    assert journal.investigations()["n_steps"].tolist() == [2, 4]
