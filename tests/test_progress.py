"""Progress bars are text: a notebook keeps their last state, never a widget it cannot redraw (issue 28)."""

from __future__ import annotations

import io
import sys

import pytest

from toolkit.progress import progress_bar, short_desc


def test_a_bar_is_text_on_stderr_and_ends_at_its_total(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    bar = progress_bar(total=3, desc="bench", unit="req", disable=False)
    assert type(bar).__module__ == "tqdm.std"  # not tqdm.notebook's ipywidget
    bar.update(3)
    bar.close()
    assert "bench: 100%" in err.getvalue().split("\r")[-1] and "3/3" in err.getvalue().split("\r")[-1]


def test_a_long_description_is_cut_at_a_word_so_the_bar_fits() -> None:
    label = "localhost: B: 1ecaec28 [Feature] Report avg_spec_accept_length in the server info"
    cut = short_desc(label)
    assert len(cut) <= 40 and cut.endswith("…") and cut.startswith("localhost: B: 1ecaec28")
    assert short_desc("localhost: concurrency 32 · 8") == "localhost: concurrency 32 · 8"
