"""Metric formulas on fixed records, against values worked out by hand from vLLM's and SGLang's
definitions (vllm/benchmarks/serve.py: calculate_metrics; sglang/benchmark/serving.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.benchmark.metrics import SUMMARY_KEYS, RequestRecord, parse_goodput_slos, summarize

A = RequestRecord(
    send_time=0.0,
    chunk_times=(0.10, 0.15, 0.25, 0.30),
    end_time=0.31,
    prompt_tokens=10,
    output_tokens=4,
    output_tokens_source="usage",
)
B = RequestRecord(
    send_time=0.05,
    chunk_times=(0.20, 0.40),
    end_time=0.41,
    prompt_tokens=20,
    output_tokens=2,
    output_tokens_source="usage",
)
FAILED = RequestRecord(
    send_time=0.0,
    chunk_times=(0.1,),
    end_time=0.2,
    prompt_tokens=5,
    output_tokens=1,
    output_tokens_source="chunks",
    error="HTTP 500 Internal Server Error: boom",
)


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-9, abs=1e-9)


def test_per_request_definitions():
    assert A.ttft_s == approx(0.10)
    assert A.e2el_s == approx(0.30)  # last token chunk, not end_time
    assert A.tpot_s == approx((0.30 - 0.10) / 3)  # (e2el - ttft) / (out - 1)
    assert A.itl_s == approx((0.05, 0.10, 0.05))
    assert not FAILED.ok and A.ok


def test_summary_against_hand_computed_values():
    s = summarize([A, B, FAILED], duration_s=1.0)
    assert list(s) == list(SUMMARY_KEYS)
    assert (s["completed"], s["failed"], s["duration"]) == (2, 1, 1.0)
    assert (s["total_input_tokens"], s["total_output_tokens"]) == (30, 6)  # failed requests excluded
    assert s["request_throughput"] == approx(2.0)
    assert s["output_throughput"] == approx(6.0)
    assert s["total_token_throughput"] == approx(36.0)
    # TTFT [100, 150] ms
    assert (s["mean_ttft_ms"], s["median_ttft_ms"], s["std_ttft_ms"]) == (
        approx(125),
        approx(125),
        approx(25),
    )
    assert s["p90_ttft_ms"] == approx(145.0) and s["p99_ttft_ms"] == approx(149.5)
    # TPOT [66.67, 200] ms
    assert s["mean_tpot_ms"] == approx((200 / 3 + 200) / 2)
    # ITL pooled over requests: [50, 100, 50, 200] ms; numpy linear percentiles on [50, 50, 100, 200]
    assert s["mean_itl_ms"] == approx(100) and s["median_itl_ms"] == approx(75)
    assert s["std_itl_ms"] == approx(math.sqrt(3750))
    assert s["p90_itl_ms"] == approx(170.0) and s["p99_itl_ms"] == approx(197.0)
    assert s["mean_itl_per_token_ms"] == s["mean_itl_ms"]  # one token per chunk: the same
    # E2EL [300, 350]
    assert s["mean_e2el_ms"] == approx(325)
    # SGLang's concurrency: sum(e2el) / duration; vLLM's peaks in 1-second buckets
    assert s["concurrency"] == approx(0.65)
    assert s["max_output_tokens_per_s"] == 6.0 and s["max_concurrent_requests"] == 2
    assert s["request_goodput"] is None and s["accept_length"] is None
    assert s["output_tokens_source"] == "usage" and s["mean_tokens_per_chunk"] == approx(1.0)


def test_duration_defaults_to_first_send_to_last_end():
    assert summarize([A, B])["duration"] == approx(0.41)


def test_goodput_is_vllms_all_slos_met_per_second():
    assert summarize([A, B], 2.0, goodput_slos_ms="ttft:120")["request_goodput"] == approx(0.5)
    assert summarize([A, B], 1.0, goodput_slos_ms=["tpot:100", "e2el:320"])["request_goodput"] == approx(1.0)
    assert summarize([A, B], 1.0, goodput_slos_ms={"e2el": 350.001})["request_goodput"] == approx(2.0)
    one_token = RequestRecord(0.0, (0.5,), 0.5, 1, 1, "usage")
    assert summarize([one_token], 1.0, goodput_slos_ms="e2el:500")["request_goodput"] == approx(
        1.0
    )  # <= meets
    assert summarize([one_token], 1.0, goodput_slos_ms="tpot:1")["request_goodput"] == approx(1.0)  # tpot 0


def test_goodput_spec_errors_name_the_valid_choices():
    assert parse_goodput_slos("ttft:200 tpot:50") == {"ttft": 200.0, "tpot": 50.0}
    with pytest.raises(ValueError, match="valid: ttft, tpot, e2el"):
        parse_goodput_slos("itl:5")
    with pytest.raises(ValueError, match="NAME:MILLISECONDS"):
        parse_goodput_slos("ttft")
    with pytest.raises(ValueError, match="positive"):
        parse_goodput_slos({"ttft": -1})


def test_itl_per_token_spreads_each_gap_over_its_chunks_tokens():
    spec = RequestRecord(0.0, (0.0, 0.1, 0.4), 0.4, 4, 6, "usage", chunk_tokens=(1, 2, 3))
    s = summarize([spec], 1.0)
    assert s["mean_itl_ms"] == approx(200.0)  # per chunk: [100, 300]
    assert s["mean_itl_per_token_ms"] == approx((50 + 50 + 100 * 3) / 5)  # [50, 50, 100, 100, 100]
    assert s["median_itl_per_token_ms"] == approx(100.0)
    assert s["max_output_tokens_per_s"] == 6.0  # chunks count their tokens
    assert s["mean_tokens_per_chunk"] == approx(2.0)
    assert s["mean_tpot_ms"] == approx(400 / 5)


def test_itl_per_token_estimate_from_usage_when_chunks_carry_several_tokens():
    spec = RequestRecord(0.0, (0.0, 0.1, 0.3), 0.3, 4, 6, "usage")  # 3 chunks, 6 tokens: 2 per chunk
    s = summarize([spec], 1.0)
    assert s["mean_itl_ms"] == approx(150.0) and s["mean_itl_per_token_ms"] == approx(75.0)
    counted = RequestRecord(0.0, (0.0, 0.1, 0.3), 0.3, 4, 3, "chunks")
    assert summarize([counted], 1.0)["mean_itl_per_token_ms"] == approx(150.0)


def test_peak_buckets_start_at_the_first_send():
    a = RequestRecord(0.0, (0.5, 1.2, 1.3, 1.9, 2.5), 2.5, 1, 5, "chunks")
    s = summarize([a], 2.5)
    assert s["max_output_tokens_per_s"] == 3.0  # bucket [1, 2): 1.2, 1.3, 1.9
    assert s["max_concurrent_requests"] == 1


def test_all_failed_gives_none_not_zero():
    s = summarize([FAILED], 1.0)
    assert s["completed"] == 0 and s["failed"] == 1
    assert s["mean_ttft_ms"] is None and s["p99_itl_ms"] is None and s["output_tokens_source"] is None
    assert s["output_throughput"] == 0.0
    assert summarize([], None)["duration"] is None


@st.composite
def records(draw: st.DrawFn) -> RequestRecord:
    send = draw(st.floats(0, 10))
    gaps = draw(st.lists(st.floats(1e-6, 2.0), min_size=1, max_size=20))
    times, t = [], send
    for g in gaps:
        t += g
        times.append(t)
    usage = draw(st.booleans())
    out = draw(st.integers(1, 50)) if usage else len(times)
    ok = draw(st.integers(0, 9)) > 0
    return RequestRecord(
        send,
        tuple(times),
        t + draw(st.floats(0, 0.1)),
        draw(st.integers(0, 100)),
        out,
        "usage" if usage else "chunks",
        error=None if ok else "cut",
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(records(), min_size=1, max_size=12))
def test_invariants(recs: list[RequestRecord]):
    s = summarize(recs)
    done = [r for r in recs if r.ok]
    assert s["completed"] + s["failed"] == len(recs)
    for r in done:
        assert r.ttft_s is not None and r.e2el_s is not None and r.ttft_s <= r.e2el_s
    if done:
        assert s["mean_ttft_ms"] <= s["mean_e2el_ms"] + 1e-9
        assert s["median_ttft_ms"] <= max(r.e2el_s for r in done) * 1000 + 1e-9
        assert s["total_output_tokens"] == pytest.approx(s["output_throughput"] * s["duration"])
        assert s["max_output_tokens_per_s"] <= sum(len(r.chunk_times) for r in done)
        assert s["p99_itl_ms"] is None or s["p99_itl_ms"] >= s["median_itl_ms"] - 1e-9


def test_docstring_examples():
    import doctest
    import importlib

    assert doctest.testmod(importlib.import_module("toolkit.benchmark.metrics")).failed == 0
