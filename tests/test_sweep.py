"""The pure parts of sweeps and A/B tests: grids, names, schedules, verdicts, metric windows."""

from __future__ import annotations

import math
from datetime import datetime

import pytest

from toolkit.errors import InvalidFlag
from toolkit.logs import classify_lines
from toolkit.logs.window import LogLedger, metric_window
from toolkit.moves import ABSENT, apply_param, expand, spec_differences
from toolkit.moves.abtest import ab_sentence, ab_verdict, schedule, side_labels
from toolkit.server.spec import ServerSpec
from toolkit.stats import compare_samples

BASE = ServerSpec.sglang("moonshotai/Kimi-K2.5", tp=8, port=8000)
EAGLE = BASE.with_flags({"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2})


def test_a_grid_is_the_product_of_vary_in_order_named_by_what_differs() -> None:
    variants = expand(EAGLE, vary={"--speculative-attention-mode": ["prefill", "decode"],
                                   "env:NCCL_ALGO": [None, "Ring"]})
    assert [v.title for v in variants] == [
        "--speculative-attention-mode=prefill, without NCCL_ALGO",
        "--speculative-attention-mode=prefill, NCCL_ALGO=Ring",
        "--speculative-attention-mode=decode, without NCCL_ALGO",
        "--speculative-attention-mode=decode, NCCL_ALGO=Ring",
    ]
    assert variants[3].label == "speculative-attention-mode=decode, NCCL_ALGO=Ring"
    assert variants[3].spec.flag("--speculative-attention-mode") == "decode"
    assert dict(variants[3].spec.env) == {"NCCL_ALGO": "Ring"}
    assert dict(variants[0].params) == {"--speculative-attention-mode": "prefill", "env:NCCL_ALGO": None}


def test_one_varied_flag_labels_by_value_none_removes_true_switches() -> None:
    variants = expand(EAGLE.with_flags({"--disable-cuda-graph": True}),
                      vary={"--disable-cuda-graph": [None, True], "--speculative-num-steps": [3]})
    assert variants[0].spec.flag("--disable-cuda-graph") is not None  # MISSING: removed
    assert "--disable-cuda-graph" not in variants[0].spec.argv()
    assert variants[1].spec.argv().count("--disable-cuda-graph") == 1
    assert [v.title for v in variants] == ["without --disable-cuda-graph, --speculative-num-steps=3",
                                           "--disable-cuda-graph, --speculative-num-steps=3"]
    single = expand(EAGLE, vary={"--speculative-attention-mode": [None, "decode"]})
    assert [v.label for v in single] == [ABSENT, "decode"]


def test_explicit_specs_are_named_and_tabulated_by_their_differences() -> None:
    decode = EAGLE.with_flags({"--speculative-attention-mode": "decode"})
    variants = expand(BASE, specs=[BASE, EAGLE, decode])
    assert [v.label for v in variants] == ["baseline", "EAGLE3 steps=2", "EAGLE3 steps=2 attn=decode"]
    assert variants[0].title == "baseline"
    assert variants[2].title == ("--speculative-algorithm=EAGLE3, --speculative-num-steps=2, "
                                 "--speculative-attention-mode=decode")
    assert dict(variants[1].params) == {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": "2",
                                        "--speculative-attention-mode": None}
    assert spec_differences(EAGLE, EAGLE.with_env({"NCCL_ALGO": "Tree"})) == {"env:NCCL_ALGO": "Tree"}
    assert spec_differences(BASE, BASE) == {}


def test_no_vary_is_the_base_alone_and_bad_input_says_how_to_fix_it() -> None:
    assert [v.spec for v in expand(BASE)] == [BASE]
    with pytest.raises(InvalidFlag, match="'env:NCCL_ALGO'"):
        expand(BASE, vary={"NCCL_ALGO": ["Ring"]})
    with pytest.raises(ValueError, match="non-empty list"):
        expand(BASE, vary={"--speculative-attention-mode": "decode"})  # a string is not a list of values
    with pytest.raises(ValueError, match="not both"):
        expand(BASE, vary={"--tp": [1]}, specs=[BASE])
    with pytest.raises(InvalidFlag):
        apply_param(BASE, "env:NCCL_ALGO", True)  # a variable has no switch form


def test_ab_order_is_counterbalanced_and_reuse_runs_blocks() -> None:
    assert schedule(2, interleave=True, reuse_launch=False) == [("a", 1), ("b", 1), ("b", 1), ("a", 1)]
    assert schedule(2, interleave=False, reuse_launch=False) == [("a", 1), ("a", 1), ("b", 1), ("b", 1)]
    assert schedule(3, interleave=False, reuse_launch=True) == [("a", 3), ("b", 3)]


def test_sides_are_named_by_what_differs() -> None:
    decode = EAGLE.with_flags({"--speculative-attention-mode": "decode"})
    assert side_labels(EAGLE.with_flags({"--speculative-attention-mode": "prefill"}), decode) == ("--speculative-attention-mode=prefill",
                                                                                      "--speculative-attention-mode=decode")
    assert side_labels(EAGLE, decode) == ("without --speculative-attention-mode", "--speculative-attention-mode=decode")
    assert side_labels(EAGLE, EAGLE.with_env({"NCCL_ALGO": "Tree"})) == ("without NCCL_ALGO", "NCCL_ALGO=Tree")
    assert side_labels(EAGLE, EAGLE) == ("A", "B")


def test_the_verdict_sentence_says_ratio_interval_and_noise() -> None:
    faster = compare_samples([59.4, 60.8, 61.0], [122.0, 123.5, 121.9])
    verdict, reason = ab_verdict(faster, 0.01)
    text = ab_sentence(faster, verdict, reason, "prefill", "decode", "output_throughput")
    assert verdict == "b_faster"
    assert text.startswith("decode is 2.03x prefill on output tok/s (122.5 vs 60.4; 95% CI of the ratio 1.9")
    assert text.endswith("3+3 runs): decode better beyond noise")

    same = compare_samples([82.1, 83.0, 82.6], [82.4, 82.9, 82.2])
    verdict, reason = ab_verdict(same, 0.01)
    assert verdict == "within_noise"
    assert "within noise (the 95% interval of the difference includes zero)" in ab_sentence(
        same, verdict, reason, "A", "B", "output_throughput")

    tiny = compare_samples([100.0, 100.01, 100.02], [100.5, 100.51, 100.52])  # beyond noise, below 1 %
    assert tiny.verdict == "b_faster"
    verdict, reason = ab_verdict(tiny, 0.01)
    assert verdict == "within_noise" and "below min_effect=1%" in reason

    single = compare_samples([60.0], [120.0])
    verdict, reason = ab_verdict(single, 0.01)
    assert verdict == "within_noise"
    assert "one run per side: noise unknown" in ab_sentence(single, verdict, reason, "A", "B", "output_throughput")


LOG = [
    "[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: cannot import name "
    "'GlmAsrConfig' from 'transformers' (/usr/lib/python3.12/site-packages/transformers/__init__.py)",
    "[2026-02-26 20:26:09] The server is fired up and ready to roll!",
    "[2026-02-26 20:26:10 TP0] Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, "
    "#running-req: 0, #queue-req: 0, cuda graph: False, input throughput (token/s): 190.19",  # warm-up
    "[2026-02-26 20:26:12 TP0] Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, "
    "#running-req: 0, #queue-req: 0, cuda graph: False, input throughput (token/s): 190.19",
    "[2026-02-26 20:26:13 TP0] Decode batch, #running-req: 1, #token: 85, token usage: 0.00, accept len: 1.88, "
    "accept rate: 0.63, cuda graph: False, gen throughput (token/s): 59.87, #queue-req: 0",
    "[2026-02-26 20:26:20 TP0] Decode batch, #running-req: 1, #token: 85, token usage: 0.00, accept len: 1.88, "
    "accept rate: 0.63, cuda graph: False, gen throughput (token/s): 59.87, #queue-req: 0",  # after the run
]


def test_metric_window_is_bounded_by_line_numbers_and_drops_the_warmup_by_time() -> None:
    events = classify_lines(LOG, engine="sglang")
    assert [r.line_no for r in metric_window(events, 2, 5)] == [3, 4, 5]
    started = datetime(2026, 2, 26, 20, 26, 12, 400000).timestamp()  # the run began after the warm-up
    assert [r.line_no for r in metric_window(events, 2, 5, started)] == [4, 5]
    far_clock = datetime(2030, 1, 1).timestamp()  # a host clock far from ours: keep the line window
    assert [r.line_no for r in metric_window(events, 2, 5, far_clock)] == [3, 4, 5]


def test_the_ledger_keeps_the_benign_and_the_fatal_lines_and_the_ready_one_on_request() -> None:
    events = classify_lines([*LOG, "[2026-02-26 20:27:00 TP3] Scheduler hit an exception: Traceback (most "
                             "recent call last):", "torch.OutOfMemoryError: CUDA out of memory."], engine="sglang")
    ledger = LogLedger()
    ledger(events[:3])
    ledger(events[3:])
    chosen = ledger.decisive()
    assert [e.verdict.value for e in chosen] == ["benign", "fatal"]
    assert "GlmAsrConfig" in chosen[0].text and math.isfinite(chosen[1].line_no)
    assert [e.verdict.value for e in ledger.decisive(ready=True)] == ["benign", "ready", "fatal"]
    assert [r.line_no for r in ledger.metric_rows(2, 5)] == [3, 4, 5]  # the same cut as metric_window
    assert ledger.last_line == max(e.line_no for e in events)


def test_the_ledger_keeps_the_first_benign_lines_and_the_last_fatal_ones() -> None:
    benign = LOG[0]
    fatal = "[2026-02-26 20:27:00 TP3] torch.OutOfMemoryError: CUDA out of memory. ({n})"
    events = classify_lines([benign] * 150 + [fatal.format(n=n) for n in range(30)], engine="sglang")
    ledger = LogLedger()
    for event in events:
        ledger([event])
    chosen = ledger.decisive()
    kept_benign = [e for e in chosen if e.verdict.value == "benign"]
    kept_fatal = [e for e in chosen if e.verdict.value == "fatal"]
    assert [e.line_no for e in kept_benign] == list(range(1, 101))
    assert [e.line_no for e in kept_fatal] == list(range(161, 181)) and "(29)" in kept_fatal[-1].text
