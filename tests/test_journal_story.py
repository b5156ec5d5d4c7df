"""The EAGLE-3 investigation from the seed, replayed into a real journal: a fixture for the
plot and report tests, and a test of the journal's reading side on a realistic shape.

Figures follow the seed: baseline 82-83 tok/s, EAGLE-3 (2 steps) 59-61 tok/s, an old commit
with the same baseline, NCCL env reaching the workers, and ``--speculative-attention-mode
decode`` bringing EAGLE-3 back above the baseline.
"""

from __future__ import annotations

import dataclasses
import random
import sqlite3
from pathlib import Path

import pytest
from journal_data import GLMASR, bench_result, decode_line, metric_rows

from toolkit.benchmark.result import BenchResult
from toolkit.errors import ServerDied
from toolkit.journal import Journal
from toolkit.logs import MetricRow
from toolkit.server.spec import ServerSpec

SECRET_TOKEN = "hf_Zq8xP2mK9vL4tR7wY1nB5cD3fG6hJ0sA"
BASE = dataclasses.replace(
    ServerSpec.sglang("moonshotai/Kimi-K2.5", tp=8, port=8000, trust_remote_code=True).with_env(HF_TOKEN=SECRET_TOKEN),
    commit="3eef625b90fa4780c0ffee00d15ea5e0badc0de1", workdir="/data/eagle3",
)
EAGLE = BASE.with_flags({"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2})
NCCL_ENV = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}


def labelled(spec: ServerSpec, label: str, **changes: str) -> ServerSpec:
    return dataclasses.replace(spec, label=label, **changes)


def seed_bench(tok_s: float, rng: random.Random, *, accept: float | None = None) -> BenchResult:
    """A run as the seed saw it: 24 requests, TTFT around 180 ms, ITL of one decode step."""
    first = rng.gauss(165, 10)
    return bench_result(tok_s, n=24, ttft_ms=(first, first + 40), itl_ms=1000.0 / tok_s, accept_length=accept)


def server_metric_rows(tok_s: float, accept: float) -> list[MetricRow]:
    """Eight SGLang decode lines of rank TP0, five seconds apart."""
    return metric_rows([decode_line(tok_s + i % 3 - 1, accept, 5 * i) for i in range(8)])


def _spread_over_an_afternoon(path: Path) -> None:
    """Real steps take minutes (a TP8 start alone is ~5 min); give the replay realistic times."""
    start = 1_772_136_000.0  # 2026-02-26 20:00 UTC
    with sqlite3.connect(path) as conn:
        for i, (step_id,) in enumerate(conn.execute("SELECT id FROM steps ORDER BY id").fetchall()):
            began = start + i * 14 * 60
            conn.execute(
                "UPDATE steps SET started_at = ?, updated_at = ?, finished_at = ? WHERE id = ?",
                (began, began + 9 * 60, began + 9 * 60, step_id),
            )
    conn.close()


def build_story(path: Path, *, repeats: int = 3) -> Journal:
    """Write the seed investigation (10 steps, 21 runs) into a fresh journal at ``path``."""
    rng = random.Random(6)
    journal = Journal(path, investigation="EAGLE-3 regression on Kimi-K2.5")
    plan: list[tuple[str, str, str, ServerSpec, float, float | None, str]] = [
        ("baseline", "baseline, no speculation", "82-83 tok/s is the reference", labelled(BASE, "baseline"), 82.5,
         None, "confirmed"),
        ("flag_change", "EAGLE-3, 2 steps", "EAGLE-3 should beat the baseline", labelled(EAGLE, "EAGLE3 steps=2"),
         60.0, 2.4, "refuted"),
        ("commit", "old SGLang commit", "a git pull caused the regression",
         labelled(BASE, "baseline@old", commit="0ld0c0mm1t5ha0000000000000000000000000aa"), 82.7, None, "refuted"),
        ("nccl_env", "NCCL tuning env on workers", "NCCL settings did not reach the TP workers",
         labelled(EAGLE.with_env(NCCL_ENV), "EAGLE3 +NCCL env"), 60.4, 2.4, "refuted"),
    ]
    for kind, title, hypothesis, spec, tok_s, accept, verdict in plan:
        with journal.step(kind, title, hypothesis=hypothesis, spec=spec, host="root@gpu-a") as step:
            for repeat in range(repeats):
                step.record(seed_bench(tok_s + rng.uniform(-0.6, 0.6), rng, accept=accept), repeat=repeat)
            step.record_metrics(server_metric_rows(tok_s, accept or 1.0))
            step.set_verdict(verdict)  # type: ignore[arg-type]
    journal.note(
        "verify runs in extend mode",
        "The verify step uses forward_extend: no CUDA graphs. "
        "29 ms for 3 tokens against 12 ms per decode step.",
    )
    decode = labelled(EAGLE.with_flags(speculative_attention_mode="decode"), "EAGLE3 attn=decode")
    with (
        pytest.raises(ServerDied),
        journal.step(
            "attention_mode",
            "decode-mode verify (first try)",
            hypothesis="decode attention lets verify use CUDA graphs",
            spec=decode,
            host="root@gpu-a",
        ) as step,
    ):
        step.record_log_lines([GLMASR, f"[2026-02-26 20:26:09 TP0] <script>alert(1)</script> token={SECRET_TOKEN}"])
        raise ServerDied(
            "the server exited during start-up",
            host="root@gpu-a",
            evidence=["[TP3] RuntimeError: CUDA error: out of memory"],
            hint="lower --mem-fraction-static",
        )
    journal.note(
        "GlmAsrConfig import error is benign",
        "TP5 prints 'Ignore import error when loading "
        "sglang.srt.models.glmasr' on every start; the real failure was the OOM on TP3.",
    )
    with journal.step(
        "attention_mode",
        "decode-mode verify",
        hypothesis="decode attention lets verify use CUDA graphs",
        spec=decode,
        host="root@gpu-a",
    ) as step:
        for repeat in range(repeats):
            step.record(seed_bench(91.0 + rng.uniform(-0.8, 0.8), rng, accept=2.4), repeat=repeat)
        step.record_metrics(server_metric_rows(91.0, 2.4))
        step.record_log_lines(["[2026-02-26 20:31:40 TP0] Capture cuda graph end. Time elapsed: 41.2 s"])
        step.set_verdict("confirmed", note="91 tok/s: 1.10x the baseline")
    for i, (title, verdict) in enumerate([("repeat baseline", "confirmed"), ("EAGLE-3, 3 steps", "inconclusive")]):
        spec = labelled(BASE, "baseline") if i == 0 else labelled(EAGLE.with_flags(speculative_num_steps=3),
                                                                   "EAGLE3 steps=3")
        with journal.step("flag_change", title, spec=spec, host="root@gpu-a") as step:
            for repeat in range(repeats):
                step.record(seed_bench((82.4 if i == 0 else 88.0) + rng.uniform(-3, 3), rng), repeat=repeat)
            step.set_verdict(verdict)  # type: ignore[arg-type]
    _spread_over_an_afternoon(path)
    journal.root_cause(
        "The EAGLE-3 verify step ran in extend (prefill) mode without CUDA graphs: 61 dynamic NCCL "
        "launches per step. `--speculative-attention-mode decode` fixes it."
    )
    return journal


@pytest.fixture
def story(tmp_path: Path) -> Journal:
    return build_story(tmp_path / "eagle3.sqlite")


def test_story_reads_back_as_the_seed_tells_it(story: Journal) -> None:
    steps = story.steps()
    assert len(steps) == 10
    assert list(steps["status"]).count("failed") == 1
    failed = steps[steps["status"] == "failed"].iloc[0]
    assert "out of memory" in failed["evidence"]["evidence"][0]
    assert failed["evidence"]["hint"] == "lower --mem-fraction-static"
    comparison = story.compare("baseline", "EAGLE3 steps=2").set_index("name")
    assert comparison.loc["output_throughput", "verdict"] == "a_faster"
    assert 0.70 < comparison.loc["output_throughput", "ratio"] < 0.76
    assert comparison.loc["flag:--speculative-algorithm", "b"] == "EAGLE3"
    assert comparison.loc["flag:--speculative-algorithm", "a"] == "(absent)"


def test_story_results_lead_with_configurations(story: Journal) -> None:
    results = story.results()
    assert results["configuration"].tolist() == [
        "baseline", "EAGLE3 steps=2", "baseline@old", "EAGLE3 +NCCL env", "EAGLE3 attn=decode", "EAGLE3 steps=3"]
    baseline = results.iloc[0]
    assert (baseline["runs"], baseline["steps"], baseline["verdict"]) == (6, "#1, #9", "confirmed")
    assert 81.0 < baseline["output tok/s"] < 84.0 and baseline["± 95% CI"] < 2.0
    assert results.set_index("configuration").loc["EAGLE3 steps=2", "accept length (tokens/step)"] == 2.4
    assert len(story.results(wide=True)) == 21  # 7 measured steps x 3 repeats
