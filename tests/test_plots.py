"""Every plot renders headless to a non-empty PNG, with the labels a reader needs."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from matplotlib.figure import Figure
from test_journal_story import SECRET_TOKEN, build_story

from toolkit.journal import Journal
from toolkit.views import plots

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Journal:
    return build_story(tmp_path_factory.mktemp("story") / "eagle3.sqlite")


def _png(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=72)
    assert path.stat().st_size > 3_000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return path


def test_throughput_shows_repeats_ci_and_baseline(story: Journal, tmp_path: Path) -> None:
    fig = plots.throughput(story.results(wide=True), baseline="baseline")
    _png(fig, tmp_path / "throughput.png")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "output tok/s" and ax.get_xlabel() == "configuration"
    assert [t.get_text() for t in ax.get_xticklabels()][:2] == ["baseline", "EAGLE3 steps=2"]
    assert any("0.73x" in t.get_text() for t in ax.texts)
    assert any(str(line.get_label()).startswith("baseline 8") for line in ax.get_lines())
    other = plots.throughput(story.results(wide=True), baseline="EAGLE3 steps=2",  # an A/B's side A
                             baseline_name="side A (EAGLE3 steps=2)").axes[0]
    assert any(str(line.get_label()).startswith("side A (EAGLE3 steps=2) ") for line in other.get_lines())


def test_throughput_with_hue_and_numeric_baseline(story: Journal, tmp_path: Path) -> None:
    fig = plots.throughput(story.results(wide=True), x="kind", hue="verdict", baseline=82.5)
    _png(fig, tmp_path / "throughput_hue.png")
    with pytest.raises(ValueError, match="not a value of column"):
        plots.throughput(story.results(wide=True), baseline="nope")
    with pytest.raises(ValueError, match="needs the column"):
        plots.throughput(story.results(wide=True), y="goodput")


@pytest.mark.parametrize(
    ("metric", "xlabel", "ylabel"),
    [
        ("ttft_ms", "TTFT (ms)", "fraction of requests"),
        ("itl_ms", "ITL (ms) per chunk", "fraction of inter-chunk gaps"),
    ],
)
def test_latency_ecdf(story: Journal, tmp_path: Path, metric: str, xlabel: str, ylabel: str) -> None:
    fig = plots.latency_ecdf(story.requests(), metric)
    _png(fig, tmp_path / f"{metric}.png")
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == (xlabel, ylabel)
    assert len(ax.get_lines()) == story.results(wide=True)["label"].nunique()
    legend = ax.get_legend()  # beside the curves, never over them, and saying how many requests each one is
    assert legend is not None and legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1
    assert all(" requests)" in text.get_text() for text in legend.get_texts())


def test_latency_ecdf_puts_a_legend_of_long_labels_below_the_curves(story: Journal, tmp_path: Path) -> None:
    requests = story.requests()
    requests["label"] = requests["label"].astype(str) + " draft=kimi-k2.5-eagle3 steps=2 topk=1 draft-tokens=3"
    fig = plots.latency_ecdf(requests, "itl_ms")
    _png(fig, tmp_path / "itl_long.png")
    ax = fig.axes[0]
    assert ax.get_legend() is None and len(fig.legends) == 1  # beside, these labels left the axes a strip
    legend = fig.legends[0]
    assert legend.get_window_extent().y1 <= ax.get_window_extent().y0  # under the axes, not over the curves
    assert len(legend.get_texts()) == len(ax.get_lines()) == requests["label"].nunique()
    assert ax.get_window_extent().width > 0.8 * fig.bbox.width  # the curves keep the figure's width
    assert "\n" in ax.get_title()  # the pooled-gaps note on its own line, not off the figure's edge
    rows = story.metric_lines()
    rows["label"] = rows["label"].astype(str) + " draft=kimi-k2.5-eagle3 steps=2 topk=1 draft-tokens=3"
    fig = plots.server_metrics(rows, "gen_throughput")
    assert fig.axes[0].get_legend() is None and len(fig.legends) == 1  # the same rule for the server's metrics


@pytest.mark.parametrize(
    ("y", "label"), [("gen_throughput", "generation tok/s"), ("accept_len", "accept length (tokens/step)")]
)
def test_server_metrics_over_time(story: Journal, tmp_path: Path, y: str, label: str) -> None:
    fig = plots.server_metrics(story.metric_lines(), y)
    _png(fig, tmp_path / f"{y}.png")
    assert fig.axes[0].get_ylabel() == label
    assert fig.axes[0].get_xlabel() == "seconds since the run's first metric line"
    assert fig.axes[0].get_ylim()[0] == 0  # an axis from 1.80 makes 1.80-1.98 look like a collapse


def test_server_metrics_resolves_aliases_and_explains_misses() -> None:
    rows = pd.DataFrame({"label": ["a", "a"], "t_s": [0.0, 5.0], "mean_acceptance_length": [2.1, 2.3]})
    assert plots.server_metrics(rows, "accept_len").axes[0].get_ylabel() == "accept length (tokens/step)"
    with pytest.raises(ValueError, match="mean_acceptance_length"):
        plots.server_metrics(rows, "gen_throughput")


def test_timeline_colours_verdicts(story: Journal, tmp_path: Path) -> None:
    fig = plots.timeline(story.steps())
    _png(fig, tmp_path / "timeline.png")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "minutes since the first step" and ax.get_ylabel() == "step"
    assert ax.get_yticklabels()[0].get_text() == "#1 baseline, no speculation"
    legend = ax.get_legend()
    assert legend is not None
    colours = {p.get_label(): p.get_facecolor() for p in legend.get_patches()}
    assert set(colours) >= {"confirmed", "refuted", "inconclusive", "failed"}
    assert matplotlib.colors.to_hex(colours["failed"]) == plots.VERDICT_COLORS["failed"]
    notes = [t.get_text() for t in fig.axes[1].get_yticklabels()]  # outcomes beside the axis, not on it
    assert any("ServerDied" in note for note in notes)
    steps = story.steps()
    last_end = (steps["finished_at"].max() - steps["started_at"].min()).total_seconds() / 60
    assert ax.get_xlim()[1] <= last_end * 1.05 + 1e-6  # the axis ends with the last step


def test_bisect_colours_probes_and_draws_the_threshold(tmp_path: Path) -> None:
    probes = pd.DataFrame(
        {
            "commit": ["a1b2c3d4e5f6", "b2c3d4e", "c3d4e5f", "d4e5f6a"],
            "order": [0, 1, 2, 3],
            "output_throughput": [82.4, 82.9, float("nan"), 60.2],
            "status": ["good", "good", "skip", "bad"],
        }
    )
    fig = plots.bisect(probes, threshold=75.0)
    _png(fig, tmp_path / "bisect.png")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "output tok/s" and ax.get_xticklabels()[0].get_text() == "a1b2c3d4"
    legend = ax.get_legend()
    assert legend is not None
    assert {t.get_text() for t in legend.get_texts()} == {"good", "bad", "skip", "threshold 75"}


def test_env_matrix_marks_missing_and_redacts_values(tmp_path: Path) -> None:
    # The columns of envcheck.EnvReport.frame.
    rows = [
        {
            "variable": v,
            "process": f"TP{r} [{4240 + r}]",
            "expected": "Ring",
            "status": "missing" if (v, r) == ("NCCL_ALGO", 5) else "ok",
            "actual": {"NCCL_ALGO": "Ring", "HF_TOKEN": SECRET_TOKEN}[v],
        }
        for v in ("NCCL_ALGO", "HF_TOKEN")
        for r in range(8)
    ]
    fig = plots.env_matrix(pd.DataFrame(rows))
    _png(fig, tmp_path / "env.png")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "environment variable" and ax.get_xlabel() == "process (rank)"
    texts = [t.get_text() for t in ax.texts]
    assert "(missing)" in texts and "Ring" in texts and SECRET_TOKEN not in " ".join(texts)


def test_empty_frames_render_a_message_not_an_error(tmp_path: Path) -> None:
    empty_journal = Journal(tmp_path / "empty.sqlite")
    figures = [
        plots.throughput(empty_journal.results(wide=True).assign(output_throughput=[])),
        plots.latency_ecdf(pd.DataFrame({"ttft_ms": [], "label": []})),
        plots.server_metrics(empty_journal.metric_lines()),
        plots.timeline(empty_journal.steps()),
        plots.bisect(pd.DataFrame({"commit": [], "output_throughput": [], "status": []})),
        plots.env_matrix(pd.DataFrame({"variable": [], "process": [], "status": []})),
    ]
    for i, fig in enumerate(figures):
        _png(fig, tmp_path / f"empty{i}.png")


def test_no_pyplot_figures_are_left_open(story: Journal) -> None:
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    plots.throughput(story.results(wide=True))
    plots.timeline(story.steps())
    assert plt.get_fignums() == before
