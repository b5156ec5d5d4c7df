"""The EAGLE-3 investigation from the seed, replayed into a real journal: a fixture for the
plot and report tests, and a test of the journal's reading side on a realistic shape.

Figures follow the seed: baseline 82-83 tok/s, EAGLE-3 (2 steps) 59-61 tok/s, an old commit
with the same baseline, NCCL env reaching the workers, and ``--speculative-attention-mode
decode`` bringing EAGLE-3 back above the baseline.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from toolkit.errors import ServerDied
from toolkit.journal import Journal

BASE_FLAGS: list[list[Any]] = [
    ["--model-path", "moonshotai/Kimi-K2.5"],
    ["--tp", "8"],
    ["--port", "8000"],
    ["--trust-remote-code", None],
]
EAGLE_FLAGS = BASE_FLAGS + [["--speculative-algorithm", "EAGLE3"], ["--speculative-num-steps", "2"]]
NCCL_ENV = [["NCCL_ALGO", "Ring"], ["NCCL_PROTO", "Simple"]]
SECRET_TOKEN = "hf_Zq8xP2mK9vL4tR7wY1nB5cD3fG6hJ0sA"


@dataclass(frozen=True)
class FakeSpec:
    """Stands in for launch.ServerSpec: the journal only needs to_dict/command/describe."""

    flags: list[list[Any]]
    env: list[list[Any]] = field(default_factory=lambda: [["HF_TOKEN", SECRET_TOKEN]])
    commit: str = "3eef625b90fa4780c0ffee00d15ea5e0badc0de1"
    label: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": "sglang",
            "launcher": ["python", "-m", "sglang.launch_server"],
            "model": "moonshotai/Kimi-K2.5",
            "port": 8000,
            "flags": self.flags,
            "env": self.env,
            "workdir": "/data/eagle3",
            "python": "python",
            "commit": self.commit,
            "label": self.label,
            "simulated": True,
        }

    def command(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env)
        flags = " ".join(n if v is None else f"{n} {v}" for n, v in self.flags)
        return f"{env} python -m sglang.launch_server {flags}"

    def describe(self) -> str:
        return self.label or "sglang"


@dataclass
class FakeBench:
    """Stands in for bench.BenchResult: a summary and per-request rows."""

    summary: dict[str, Any]
    requests: list[dict[str, Any]]


@dataclass(frozen=True)
class FakeMetricRow:
    kind: str
    values: dict[str, float]
    timestamp: datetime | None
    rank: str | None
    line_no: int


def fake_bench(tok_s: float, rng: random.Random, *, n: int = 24, accept: float | None = None) -> FakeBench:
    itl = 1000.0 / tok_s
    requests = [
        {
            "ttft_ms": rng.gauss(180, 20),
            "tpot_ms": rng.gauss(itl, itl * 0.05),
            "e2el_ms": 0.0,
            "output_tokens": 128,
            "itl_ms": [rng.gauss(itl, itl * 0.1) for _ in range(16)],
            "error": None,
        }
        for _ in range(n)
    ]
    summary = {
        "completed": n,
        "failed": 0,
        "duration": 30.0,
        "output_throughput": tok_s,
        "request_throughput": tok_s / 128,
        "total_token_throughput": tok_s * 1.25,
        "median_ttft_ms": 180.0,
        "p99_ttft_ms": 230.0,
        "median_itl_ms": itl,
        "median_tpot_ms": itl,
    }
    if accept is not None:
        summary["accept_length"] = accept
    return FakeBench(summary, requests)


def metric_rows(tok_s: float, accept: float, start: float) -> list[FakeMetricRow]:
    return [
        FakeMetricRow(
            "decode",
            {"gen_throughput": tok_s + i % 3 - 1, "accept_len": accept},
            datetime.fromtimestamp(start + 5 * i, UTC),
            "TP0",
            100 + i,
        )
        for i in range(8)
    ]


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
    """Write the seed investigation (10 steps, 19 runs) into a fresh journal at ``path``."""
    rng = random.Random(6)
    journal = Journal(path, investigation="EAGLE-3 regression on Kimi-K2.5")
    plan: list[tuple[str, str, str, FakeSpec, float, float | None, str]] = [
        (
            "baseline",
            "baseline, no speculation",
            "82-83 tok/s is the reference",
            FakeSpec(BASE_FLAGS, label="baseline"),
            82.5,
            None,
            "confirmed",
        ),
        (
            "flag_change",
            "EAGLE-3, 2 steps",
            "EAGLE-3 should beat the baseline",
            FakeSpec(EAGLE_FLAGS, label="EAGLE3 steps=2"),
            60.0,
            2.4,
            "refuted",
        ),
        (
            "commit",
            "old SGLang commit",
            "a git pull caused the regression",
            FakeSpec(BASE_FLAGS, commit="0ld0c0mm1t5ha0000000000000000000000000aa", label="baseline@old"),
            82.7,
            None,
            "refuted",
        ),
        (
            "nccl_env",
            "NCCL tuning env on workers",
            "NCCL settings did not reach the TP workers",
            FakeSpec(EAGLE_FLAGS, env=NCCL_ENV + [["HF_TOKEN", SECRET_TOKEN]], label="EAGLE3 +NCCL env"),
            60.4,
            2.4,
            "refuted",
        ),
    ]
    for kind, title, hypothesis, spec, tok_s, accept, verdict in plan:
        with journal.step(kind, title, hypothesis=hypothesis, spec=spec, host="root@gpu-a") as step:
            for repeat in range(repeats):
                step.record(fake_bench(tok_s + rng.uniform(-0.6, 0.6), rng, accept=accept), repeat=repeat)
            step.record_metrics(metric_rows(tok_s, accept or 1.0, 1_780_000_000.0))
            step.set_verdict(verdict)  # type: ignore[arg-type]
    journal.note(
        "verify runs in extend mode",
        "The verify step uses forward_extend: no CUDA graphs. "
        "29 ms for 3 tokens against 12 ms per decode step.",
    )
    decode = FakeSpec(EAGLE_FLAGS + [["--speculative-attention-mode", "decode"]], label="EAGLE3 attn=decode")
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
        step.record_log_lines(
            [
                "[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: "
                "cannot import name 'GlmAsrConfig' from 'transformers'",
                f"[2026-02-26 20:26:09 TP0] <script>alert(1)</script> token={SECRET_TOKEN}",
            ]
        )
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
            step.record(fake_bench(91.0 + rng.uniform(-0.8, 0.8), rng, accept=2.4), repeat=repeat)
        step.record_metrics(metric_rows(91.0, 2.4, 1_780_000_100.0))
        step.record_log_lines(["[2026-02-26 20:31:40 TP0] Capture cuda graph end. Time elapsed: 41.2 s"])
        step.set_verdict("confirmed", note="91 tok/s: 1.10x the baseline")
    for i, (title, verdict) in enumerate(
        [("repeat baseline", "confirmed"), ("EAGLE-3, 3 steps", "inconclusive")]
    ):
        spec = FakeSpec(
            BASE_FLAGS if i == 0 else EAGLE_FLAGS[:-1] + [["--speculative-num-steps", "3"]],
            label="baseline" if i == 0 else "EAGLE3 steps=3",
        )
        with journal.step("flag_change", title, spec=spec, host="root@gpu-a") as step:
            for repeat in range(repeats):
                step.record(fake_bench((82.4 if i == 0 else 88.0) + rng.uniform(-3, 3), rng), repeat=repeat)
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
