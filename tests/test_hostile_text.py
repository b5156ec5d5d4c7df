"""Issue 25: text from a journal, a log or a server is inert in every output (plots, Markdown,
HTML, widgets, the terminal), and a damaged journal is refused in one line."""

from __future__ import annotations

from pathlib import Path

from journal_data import bench_result

from toolkit.__main__ import main as toolkit_main
from toolkit.journal import Journal


def test_dollar_signs_in_a_step_title_do_not_abort_the_report(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "dollars.sqlite", investigation="pid $$ in a path")
    for title in ("relaunch with --log /tmp/sgl-$$.log", r"$\foo$ and a $x^$", "baseline"):
        with journal.step(r"costs $\bar or $6", title) as step:
            step.record(bench_result(82.0))
    journal.close()
    assert toolkit_main(["report", str(journal.path), "--out", str(tmp_path / "out")]) == 0
    assert "/tmp/sgl-$$.log" in (tmp_path / "out" / "postmortem.html").read_text(encoding="utf-8")
