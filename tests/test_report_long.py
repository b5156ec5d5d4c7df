"""A long investigation's post-mortem shows the first and last steps and counts the rest; its timeline counts
outcomes per time bin instead of drawing a labelled bar per step (issue 20: 9.7k steps took 152 s and 2.6 GB;
the time and memory figures are in benchmarks/report_large.py)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
from journal_data import bench_result

from toolkit.journal import Journal
from toolkit.report import postmortem as report
from toolkit.report.capping import MAX_STEPS
from toolkit.report.document import Heading, Paragraph
from toolkit.server.spec import ServerSpec
from toolkit.views import plots
from toolkit.views.plots.story import LABELLED_STEPS

matplotlib.use("Agg")
STEPS = MAX_STEPS + 37


def _long_journal(path: Path) -> Journal:
    journal = Journal(path, investigation="overnight")
    result = bench_result(80.0)
    for i in range(STEPS):
        spec = ServerSpec.simulator(tp=1).with_flags({"--speculative-num-steps": i % 3 + 1})
        with journal.step("flag_change", f"trial {i}", spec=spec) as step:
            step.record(result)
            step.set_verdict(("confirmed", "refuted", "inconclusive")[i % 3])
    return journal


def test_every_per_step_section_shows_the_ends_and_counts_the_middle(tmp_path: Path) -> None:
    with _long_journal(tmp_path / "j.sqlite") as journal:
        _, blocks = report.build(journal, dpi=40)
    notes = [b.text for b in blocks if isinstance(b, Paragraph) and "are left out here" in b.text]
    assert len(notes) == 5  # timeline table, decisive log lines, every run, step details, reproduce
    assert all(f"... {STEPS - MAX_STEPS} more" in note for note in notes)
    titles = [b.text for b in blocks if isinstance(b, Heading) and b.level == 3 and b.text.startswith("#")]
    shown = {t.split(" ")[0] for t in titles}
    assert "#1" in shown and f"#{STEPS}" in shown and f"#{MAX_STEPS // 2 + 1}" not in shown


def test_the_timeline_of_many_steps_counts_outcomes_and_labels_none(tmp_path: Path) -> None:
    with _long_journal(tmp_path / "j.sqlite") as journal:
        steps = journal.steps()
    assert len(steps) > LABELLED_STEPS
    fig = plots.timeline(steps)
    ax = fig.axes[0]
    assert len(ax.texts) == 0 and len(ax.patches) <= 60 * 3
    assert sum(p.get_height() for p in ax.patches) == STEPS  # every step counted once
    few = plots.timeline(steps.head(5))
    labels = [t.get_text() for t in few.axes[-1].get_yticklabels()]  # beside the axis, one per step
    assert len(few.axes) == 2 and len(labels) == 5 and all(labels)  # a short investigation keeps its labels
