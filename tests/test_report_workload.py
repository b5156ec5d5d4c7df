"""Like with like (issue 28): results grouped by label *and* workload, a concurrency sweep drawn as a curve
with its knee, a setup header, and a bench command a reader can run in every reproduce block."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
from journal_data import bench_result

from toolkit.journal import Journal
from toolkit.report import comparisons
from toolkit.report import postmortem as report
from toolkit.report.workload import bench_command, describe
from toolkit.server.spec import ServerSpec
from toolkit.stats import knee

matplotlib.use("Agg")

# Notebook 07's shape: throughput grows with concurrency until the running batch is capped at 8.
_CAPPED = {1: 40.0, 4: 150.0, 8: 300.0, 32: 310.0}


def _sweep_journal(path: Path) -> Journal:
    journal = Journal(path, investigation="throughput at concurrency")
    spec = ServerSpec.simulator("sglang", port=30000, model="m", **{"--cuda-graph-max-bs-decode": 8,
                                                                    "--sim-startup-s": 1.0})
    with journal.step("baseline", "cap 8 at concurrency 1", spec=spec) as step:
        for repeat, jitter in enumerate((-0.4, 0.4)):
            step.record(bench_result(_CAPPED[1] + jitter, max_concurrency=1), run_label="8", repeat=repeat)
    for concurrency, tok_s in _CAPPED.items():
        with journal.step("sweep", f"concurrency {concurrency}", spec=spec) as step:
            for repeat, jitter in enumerate((-0.5, 0.5)):
                step.record(bench_result(tok_s + jitter, max_concurrency=concurrency), run_label="8",
                            repeat=repeat)
    return journal


def test_knee_is_where_the_curve_stops_growing() -> None:
    assert knee([1, 4, 8, 32], [40.0, 150.0, 300.0, 310.0]) == 8
    assert knee([1, 4, 8, 32], [40.0, 150.0, 300.0, 900.0]) is None
    assert knee([1, 4], [40.0, 41.0]) is None
    with pytest.raises(ValueError, match="one y per x"):
        knee([1, 2, 3], [1.0])


def test_results_are_never_pooled_across_a_workload_change(tmp_path: Path) -> None:
    journal = _sweep_journal(tmp_path / "sweep.sqlite")
    results = journal.results(wide=True)
    configs = comparisons.configurations(results, "8")
    assert [(c["workload"]["workload:max_concurrency"], c["runs"]) for c in configs] == [
        (1, 4), (4, 2), (8, 2), (32, 2)]
    assert configs[0]["name"] == "8 · concurrency 1" and configs[0]["requests"] == 16
    # the baseline is the same label: nothing else ran at concurrency 1, and nothing is compared across
    assert all(c.get("ratio") is None for c in configs)
    (curve,) = comparisons.curves(configs)
    assert curve.concurrency == (1.0, 4.0, 8.0, 32.0) and curve.knee == 8.0
    assert "stops growing at concurrency 8" in curve.sentence()


def test_a_sweep_postmortem_concludes_from_the_curve(tmp_path: Path) -> None:
    journal = _sweep_journal(tmp_path / "sweep.sqlite")
    paths = report.write(journal, tmp_path / "out", dpi=50)
    markdown = paths.markdown.read_text(encoding="utf-8")
    summary = markdown.split("## Root cause")[0]
    assert "\u201c8\u201d: output tok/s stops growing at concurrency 8 (300.0 tok/s at concurrency 8" in summary
    assert "than the baseline" not in markdown  # no comparison across concurrencies
    assert (tmp_path / "out" / "concurrency.png").stat().st_size > 5_000
    assert "| 8 · concurrency 32 | 4 prompts, 32 in / 16 out tokens, concurrency 32 |" in markdown
    setup = markdown.split("## Setup")[1].split("## Summary")[0]
    assert "Engine: the toolkit's simulator (python -m toolkit.sim) imitating SGLang" in setup and "Toolkit: " in setup
    assert "Workloads: 4 prompts, 32 in / 16 out tokens; varied: concurrency 1, 4, 8, 32 (" in setup
    # every reproduce block: the launch from a clone of the toolkit, then the benchmark of each workload
    blocks = markdown.split("## How to reproduce each step")[1]
    assert blocks.count("python -m toolkit bench") == 5
    assert "--max-concurrency 32" in blocks and ".venv/bin/python -m toolkit.sim" in blocks
    assert str(Path.cwd()) not in blocks
    # the simulator's own knob is not the change a reader would make
    first = markdown.split("### #2 concurrency 1")[1]
    assert "--sim-startup-s" not in first.split("\n\n")[1] or "simulator only" in first


def test_vs_baseline_only_under_the_same_workload(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "ab.sqlite", investigation="ab")
    base = ServerSpec.sglang("m", port=30000)
    with journal.step("baseline", spec=base) as step:
        for repeat, tok_s in enumerate((80.0, 81.0)):
            step.record(bench_result(tok_s), repeat=repeat)
    with journal.step("flag_change", spec=base.with_flags({"--x": 1})) as step:
        for repeat, tok_s in enumerate((60.0, 61.0)):
            step.record(bench_result(tok_s), repeat=repeat)
        step.record(bench_result(200.0, max_concurrency=8), run_label="x at 8")
    configs = comparisons.configurations(journal.results(wide=True), comparisons.baseline_label(
        journal.steps(), journal.results(wide=True)))
    by_name = {c["name"]: c for c in configs}
    changed = next(c for c in configs if c["label"] != "baseline" and c["workload"]["workload:max_concurrency"] == 1)
    assert changed["ratio"] == pytest.approx(60.5 / 80.5) and changed["verdict"] == "slower beyond noise"
    low, high = changed["ratio_ci"]
    assert low < 60.5 / 80.5 < high
    assert by_name["x at 8 · concurrency 8"].get("no_baseline") and "ratio" not in by_name["x at 8 · concurrency 8"]


def test_a_change_beyond_noise_but_under_one_percent_says_it_is_too_small(tmp_path: Path) -> None:
    """The table agrees with the moves' verdicts: 0.3 % beyond noise is under min_effect's 1 %, and says so."""
    journal = Journal(tmp_path / "small.sqlite", investigation="small")
    base = ServerSpec.sglang("m", port=30000)
    for spec, values in ((base, (100.0, 100.02, 100.01)), (base.with_flags({"--x": 1}), (100.3, 100.32, 100.31))):
        with journal.step("baseline" if spec is base else "flag_change", spec=spec) as step:
            for repeat, tok_s in enumerate(values):
                step.record(bench_result(tok_s), repeat=repeat)
    results = journal.results(wide=True)
    configs = comparisons.configurations(results, comparisons.baseline_label(journal.steps(), results))
    (changed,) = (c for c in configs if not c["is_baseline"])
    assert changed["verdict_code"] == "b_faster" and changed["small"]
    assert changed["verdict"] == "faster beyond noise, under 1%"


def test_workload_words_and_bench_command() -> None:
    row = {"workload:num_prompts": 3, "workload:input_len": 128, "workload:output_len": 96,
           "workload:max_concurrency": 1, "workload:request_rate": 2.0, "workload:dataset": "/data/x/prompts.txt",
           "workload:url": "http://127.0.0.1:30000"}
    assert describe(row) == "3 prompts, 128 in / 96 out tokens, concurrency 1, 2 req/s, prompts from prompts.txt"
    assert bench_command(row) == (
        "python -m toolkit bench --url http://127.0.0.1:30000 --num-prompts 3 --max-concurrency 1 "
        "--input-len 128 --output-len 96 --request-rate 2 --dataset prompts.txt")
    assert describe({}) == "workload not recorded"


def test_an_ab_side_says_what_it_runs_on_top_of(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "ab.sqlite", investigation="attention mode")
    base = ServerSpec.sglang("m", port=30000)
    eagle = base.with_flags({"--speculative-algorithm": "EAGLE3"})
    with journal.step("baseline", spec=base) as step:
        for repeat, tok_s in enumerate((80.0, 81.0)):
            step.record(bench_result(tok_s), repeat=repeat)
    with journal.step("attention_mode", spec=eagle.with_flags({"--speculative-attention-mode": "decode"})) as step:
        for repeat, tok_s in enumerate((115.0, 116.0)):
            step.record(bench_result(tok_s), run_label="--speculative-attention-mode=decode", repeat=repeat)
    with journal.step("flag_change", "EAGLE-3", spec=eagle) as step:  # the change itself: on top of nothing
        for repeat, tok_s in enumerate((58.0, 59.0)):
            step.record(bench_result(tok_s), repeat=repeat)
    results = journal.results(wide=True)
    side, change = [c for c in comparisons.configurations(results, "baseline") if not c["is_baseline"]]
    assert side["on_top_of"] == "--speculative-algorithm=EAGLE3" and change["on_top_of"] == ""
    markdown = report.write(journal, tmp_path / "out", dpi=40).markdown.read_text(encoding="utf-8")
    assert "\u201c--speculative-attention-mode=decode\u201d (on top of --speculative-algorithm=EAGLE3) gave" in markdown


@pytest.mark.parametrize(("label", "varying", "name"), [
    ("--cuda-graph-max-bs-decode=8, concurrency 32", "concurrency 32, 64 prompts",
     "--cuda-graph-max-bs-decode=8, concurrency 32 · 64 prompts"),      # the title already says the concurrency
    ("8", "concurrency 1, 2 prompts", "8 · concurrency 1, 2 prompts"),
    ("baseline, concurrency 16", "concurrency 1, 2 prompts", "baseline, concurrency 16 · concurrency 1, 2 prompts"),
    ("baseline, concurrency 4, 8 prompts", "concurrency 4, 8 prompts", "baseline, concurrency 4, 8 prompts"),
])
def test_a_configuration_name_says_each_workload_word_once(label: str, varying: str, name: str) -> None:
    assert comparisons._named(label, varying) == name
