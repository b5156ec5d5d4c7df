"""The fast lane of `logs classify` (toolkit.logs.skim) changes no summary: every corpus log, and long serving
logs with trouble mixed in after the ready line, summarise the same through classify_chunks (fast lane) and
through classify_lines + summarize (every line fed to the classifier, every event built)."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest

from toolkit.logs import classify_chunks
from toolkit.logs import line as line_module
from toolkit.logs.classify import LogClassifier, classify_lines
from toolkit.logs.detect import packs_for
from toolkit.logs.digits import digit_blind
from toolkit.logs.line import HEADER_PATTERNS, fields_at, header_shape, parse_fields
from toolkit.logs.rules import compile_rules
from toolkit.logs.skim import HEADERS_DIGIT_BLIND, Skimmer, sort_line
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
    for event in classifier.end_of_log():
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
    # a frame line opens a traceback though its header is lost (toolkit.logs.tracebacks.opens_traceback)
    assert [sort_line(rules, line) for line in TROUBLE] == ["feed", "feed", "feed", "feed", "feed", "feed",
                                                            "quiet", "metric", "feed"]


# -- one shape, decided once (toolkit.logs.digits, Skimmer) --------------------------------------------------

@pytest.mark.parametrize(("pattern", "blind"), [
    (r"\d{4}-\d\d-\d\d \d\d:\d\d", True),  # \d treats every digit alike; {4} is syntax, not a digit
    (r"[0-9;?]*[A-Za-z]", True),  # a set with all ten digits
    (r"[^\x07\x1b]*", True),  # a set with none: escapes that spell no digit
    (r"(?P<x>a)?(?(x)b|c)\w+\b.", True),
    (r'HTTP/1.1" 5\d\d', False),  # a digit named
    (r"exit code [1-9]", False),  # some digits, not all
    (r"[/-:]", True), (r"[+-5]", False),  # a range over all ten digits; over some
    (r"\x35", False), (r"\N{DIGIT FIVE}", False),  # escapes that spell a digit
    (r"(a|\d)\1", False), (r"(?P<n>\d)(?P=n)", False),  # back-references compare the digits captured
])
def test_digit_blind_proves_only_what_holds(pattern: str, blind: bool) -> None:
    assert digit_blind(pattern) is blind


def test_every_pattern_parse_fields_reads_with_is_listed_and_blind() -> None:
    """The shapes' reuse rests on this: a new header pattern must join HEADER_PATTERNS (and be blind)."""
    patterns = [v for v in vars(line_module).values() if isinstance(v, re.Pattern)]
    assert sorted(p.pattern for p in patterns) == sorted(p.pattern for p in HEADER_PATTERNS)
    assert HEADERS_DIGIT_BLIND


def _variants(line: str, rng: random.Random, n: int = 3) -> list[str]:
    """Lines of ``line``'s digit shape with other digits (a 200 becomes a 500, an exit code 0 a 7)."""
    return ["".join(rng.choice("0123456789") if c in "0123456789" else c for c in line) for _ in range(n)]


def _rules_of(path: Path) -> object:
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    classifier = LogClassifier()
    for line in lines[:500]:
        classifier.feed(line)
    return compile_rules(classifier.rules), lines


@pytest.mark.parametrize("path", CORPUS[::4], ids=lambda p: p.name)
def test_the_skimmer_sorts_every_line_as_sort_line_does_whatever_its_digits(path: Path) -> None:
    rules, lines = _rules_of(path)  # type: ignore[misc]
    rng = random.Random(path.name)
    skimmer = Skimmer(rules)
    for line in lines:
        for variant in (line, *_variants(line, rng)):
            assert skimmer.sort(variant) == sort_line(rules, variant), variant


def test_a_status_code_is_read_on_every_line_of_its_shape() -> None:
    """Access lines of one shape: the rules that read the status are asked each time (200 quiet; 404 benign and 500 a warning: fed)."""
    rules = compile_rules([r for p in packs_for("vllm") for r in p.rules])
    skimmer = Skimmer(rules)
    codes = [200, 500, 201, 404, 503, 200]
    lines = [f'(APIServer pid=1) INFO:     127.0.0.1:4{i}000 - "POST /v1/completions HTTP/1.1" {c} OK'
             for i, c in enumerate(codes)]
    assert [skimmer.sort(line) for line in lines] == [sort_line(rules, line) for line in lines]
    assert [skimmer.sort(line) for line in lines] == ["quiet", "feed", "quiet", "feed", "feed", "quiet"]  # a 404 is benign: counted
    assert len(skimmer._shapes) == 1  # one shape, learnt once


def test_skim_stops_at_the_first_line_to_feed_and_collects_metric_lines() -> None:
    rules = compile_rules([r for p in packs_for("sglang") for r in p.rules])
    lines = sglang_serving(3000, seed=5)[-400:]
    lines.insert(300, TROUBLE[-1])
    skimmer, metrics = Skimmer(rules), []  # type: ignore[var-annotated]
    end = skimmer.skim(lines, 0, metrics)
    kinds = [sort_line(rules, line) for line in lines]
    assert end == kinds.index("feed")
    assert metrics == [i for i, kind in enumerate(kinds[:end]) if kind == "metric"]
    assert skimmer.skim(lines, 0, None) == min(kinds.index("feed"), kinds.index("metric"))


@pytest.mark.parametrize("path", CORPUS[1::3], ids=lambda p: p.name)
def test_the_live_classifier_reads_lines_by_shape_as_it_reads_them_in_full(path: Path) -> None:
    """Each line, then two of its digit shape with other digits (a shape is learnt when seen again): every event
    the shape path builds equals the one built reading each line in full."""
    rng = random.Random(path.name)
    lines = []
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        lines += [line, *_variants(line, rng, 2)]
    by_shape, in_full = LogClassifier(), LogClassifier(by_shape=False)
    for line in lines:
        assert by_shape.feed(line) == in_full.feed(line), line
    assert by_shape.finish() == in_full.finish()
    assert by_shape.state == in_full.state


@pytest.mark.parametrize("path", CORPUS[2::3], ids=lambda p: p.name)
def test_a_header_read_by_position_gives_parse_fields_fields(path: Path) -> None:
    """header_shape/fields_at (the shape path) and parse_fields' own fast path read the same header alike."""
    rng = random.Random(path.name)
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        for variant in (line, *_variants(line, rng, 1)):
            shape = header_shape(variant)
            if shape is not None:
                assert fields_at(variant, shape) == parse_fields(variant), variant
