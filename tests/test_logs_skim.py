"""The fast lane of `logs classify` (toolkit.logs.skim) changes no summary: every corpus log, and long serving
logs with trouble mixed in after the ready line, summarise the same through classify_chunks (fast lane) and
through classify_lines + summarize (every line fed to the classifier, every event built)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from toolkit.logs import classify_chunks
from toolkit.logs.classify import LogClassifier, classify_lines
from toolkit.logs.detect import packs_for
from toolkit.logs.rules import compile_rules
from toolkit.logs.skim import sort_line
from toolkit.logs.summary import LogSummary, SummaryBuilder, summarize

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from classify_speed import sglang_serving, vllm_serving  # noqa: E402

CORPUS = sorted((REPO / "tests" / "data" / "logs").glob("*.log")) + sorted((REPO / ".." / "shared" / "real-logs").glob("*.log"))


def _fed(lines: list[str], *, keep: int) -> LogSummary:
    """Every line through LogClassifier.feed, every event built: the path the fast lane must agree with."""
    classifier = LogClassifier(parse_metrics_after_ready=False)
    builder = SummaryBuilder(max_metrics=keep, max_lines=keep)
    for line in lines:
        for event in classifier.feed(line):
            builder.add(event)
    for event in classifier.finish():
        builder.add(event)
    return builder.summary()


def _both(data: bytes) -> tuple[object, object]:
    """(fast, slow) summaries, keeping every row and keeping the last 50 (the CLI's way, with metric rows skimmed)."""
    lines = data.decode("utf-8", "replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    chunks = [data[i:i + 4096] for i in range(0, len(data), 4096)]
    fast = (classify_chunks(chunks, max_metrics=None, max_lines=None), classify_chunks(chunks, max_metrics=50,
                                                                                       max_lines=50))
    return fast, (summarize(classify_lines(lines)), _fed(lines, keep=50))


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_every_corpus_log_summarises_the_same_through_the_fast_lane(path: Path) -> None:
    fast, slow = _both(path.read_bytes())
    assert fast == slow


# after the ready line: a benign line, a warning level, a 500, a traceback that a request survives,
# a progress bar with a carriage return, ANSI colour, then a fatal one
TROUBLE = [
    "[2026-01-01 00:00:01 TP5] Ignore import error when loading sglang.srt.models.glmasr: x",
    "[2026-01-01 00:00:02 TP0] WARNING: something odd",
    'INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
    "Traceback (most recent call last):", '  File "x.py", line 1, in f', "ValueError: bad request",
    "Capturing batches:  50%|#####     | 5/10 [00:01<00:01, 4.0it/s]\rCapturing batches: 100%|##########| 10/10",
    "\x1b[33m[2026-01-01 00:00:03 TP0] Decode batch. #running-req: 1, gen throughput (token/s): 1.0\x1b[0m",
    "[2026-01-01 00:00:04 TP3] Scheduler hit an exception: RuntimeError: CUDA error: an illegal memory access",
]


@pytest.mark.parametrize("build", [sglang_serving, vllm_serving], ids=["sglang", "vllm"])
def test_a_serving_log_with_trouble_after_ready_summarises_the_same(build: object) -> None:
    assert callable(build)
    lines: list[str] = build(6000, seed=3)
    rng = random.Random(7)
    for line in TROUBLE:
        lines.insert(rng.randrange(len(lines) // 2, len(lines)), line)
    fast, slow = _both("\n".join(lines).encode())
    assert fast == slow
    assert fast[0].state == "failed" and fast[1].metric_count > 1000  # type: ignore[index]


def test_sort_line_sends_everything_that_decides_to_feed() -> None:
    rules = compile_rules([r for p in packs_for("sglang") for r in p.rules])
    assert [sort_line(rules, line) for line in TROUBLE] == ["feed", "feed", "feed", "feed", "quiet", "feed",
                                                            "quiet", "metric", "feed"]
