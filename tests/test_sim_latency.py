"""The latency model's calibration to the EAGLE-3 incident, and the pure pieces around it."""

from __future__ import annotations

import random

import pytest

from toolkit.sim import logs, protocol
from toolkit.sim.latency import AcceptSampler, DecodeSetup, LatencyModel, PerfParams, Speculation
from toolkit.sim.source import parse_source_perf

BASE = DecodeSetup()
EAGLE_PREFILL = DecodeSetup(speculation=Speculation(num_steps=2))
EAGLE_DECODE = DecodeSetup(speculation=Speculation(num_steps=2, verify_in_extend=False))


def rate(setup: DecodeSetup, batch: int = 1) -> float:
    return LatencyModel(PerfParams(), setup).tokens_per_s(batch)


def test_seed_numbers_land():
    # The incident: 82-83 tok/s baseline, 59-61 with EAGLE-3 verifying in extend mode,
    # and the decode attention mode faster than the baseline.
    assert 82.0 <= rate(BASE) <= 83.0
    assert 59.0 <= rate(EAGLE_PREFILL) <= 61.0
    assert 110.0 <= rate(EAGLE_DECODE) <= 130.0
    model = LatencyModel(PerfParams(), EAGLE_PREFILL)
    assert 28.0 <= model.verify_ms() <= 30.0  # ~29 ms per verify of 3 tokens
    assert 1.8 <= model.mean_accept_length() <= 1.95


def test_cuda_graph_flags():
    assert rate(DecodeSetup(cuda_graph=False)) < 0.75 * rate(BASE)
    assert not LatencyModel(PerfParams(), EAGLE_PREFILL).uses_cuda_graph(1)  # extend-mode verify: never
    assert LatencyModel(PerfParams(), EAGLE_DECODE).uses_cuda_graph(1)
    assert not LatencyModel(PerfParams(), DecodeSetup(cuda_graph_max_bs=4)).uses_cuda_graph(5)


def test_batching_raises_aggregate_but_slows_each_step():
    model = LatencyModel(PerfParams(), BASE)
    assert model.step_ms(8) > model.step_ms(1)
    assert rate(BASE, 1) < rate(BASE, 4) < rate(BASE, 16)


def test_accept_sampler_converges_fast_and_is_seeded():
    model = LatencyModel(PerfParams(), EAGLE_PREFILL)
    dist = model.accept_distribution()
    assert sum(dist) == pytest.approx(1.0)
    for seed in range(20):
        sampler = AcceptSampler(dist, random.Random(seed).random())
        draws = [1 + sampler.next() for _ in range(40)]
        assert set(draws) <= {1, 2, 3}
        assert sum(draws) / 40 == pytest.approx(model.mean_accept_length(), rel=0.03)
    a, b = AcceptSampler(dist, 0.25), AcceptSampler(dist, 0.25)
    assert [a.next() for _ in range(10)] == [b.next() for _ in range(10)]


def test_perf_params_validation_names_the_problem():
    assert PerfParams.from_mapping({"decode_step_ms": 14.5}).decode_step_ms == 14.5
    with pytest.raises(ValueError, match="decode_stp_ms"):
        PerfParams.from_mapping({"decode_stp_ms": 1.0})
    with pytest.raises(ValueError, match="must be a number"):
        PerfParams.from_mapping({"decode_step_ms": "fast"})
    source = parse_source_perf(
        '{"version": "0.5.9.dev3", "perf": {"decode_step_ms": 13.0},'
        ' "import_error": {"module": "a.b", "name": "c"}}'
    )
    assert source.params.decode_step_ms == 13.0 and source.import_error == ("a.b", "c")
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_source_perf("{")


def test_log_lines_match_real_formats():
    # 031 (SGLang 0.5.7): "Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00,
    # #running-req: 0, #queue-req: 0, "; 030 adds "#pending-token: 0, cuda graph: ..., input throughput".
    line = logs.sglang_prefill_batch(logs.PrefillStats(1, 7, 0, 0.0, 0, 0, 1.81))
    assert line.startswith(
        "Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False"
    )
    assert line.endswith("input throughput (token/s): 1.81")
    decode = logs.sglang_decode_batch(logs.DecodeStats(1, 181, 0.0, True, 60.12, 0, 1.92, 0.64))
    assert decode == (
        "Decode batch, #running-req: 1, #token: 181, token usage: 0.00, accept len: 1.92, "
        "accept rate: 0.64, cuda graph: True, gen throughput (token/s): 60.12, #queue-req: 0"
    )
    # 067 (vLLM): "Engine 000: Avg prompt throughput: 13.4 tokens/s, Avg generation throughput: 7.1 ..."
    assert logs.vllm_throughput(13.4, 7.1, 1, 0, 0.009, 0.0) == (
        "Engine 000: Avg prompt throughput: 13.4 tokens/s, Avg generation throughput: 7.1 tokens/s, Running: 1 "
        "reqs, Waiting: 0 reqs, GPU KV cache usage: 0.9%, Prefix cache hit rate: 0.0%"
    )
    spec = logs.vllm_spec_metrics(10, 12, 20, [7, 5], 10.0)
    assert spec.startswith(
        "SpecDecoding metrics: Mean acceptance length: 2.20, Accepted throughput: 1.20 tokens/s"
    )
    assert spec.endswith("Per-position acceptance rate: 0.700, 0.500, Avg Draft acceptance rate: 60.0%")
    assert logs.uvicorn_line(0.0, "info", "Started server process [1]").endswith(
        "] INFO:     Started server process [1]"
    )
    assert logs.uvicorn_line(0.0, "error", "x").endswith("] ERROR:    x")
    assert logs.sglang_line(0.0, "Load weight begin.", rank=5).endswith(" TP5] Load weight begin.")


def test_protocol_counts_and_rejects():
    assert protocol.count_prompt_tokens({"prompt": "one two three"}, chat=False) == 3
    assert protocol.count_prompt_tokens({"prompt": [1, 2, 3, 4]}, chat=False) == 4
    chat = {"messages": [{"role": "user", "content": "a b"}, {"role": "user", "content": [{"text": "c"}]}]}
    assert protocol.count_prompt_tokens(chat, chat=True) == 3
    with pytest.raises(protocol.BadRequest, match="max_tokens"):
        protocol.parse_sampling({"prompt": "x", "max_tokens": 0}, False, "m", strict_model=False)
    with pytest.raises(protocol.BadRequest) as info:
        protocol.parse_sampling({"prompt": "x", "model": "other"}, False, "m", strict_model=True)
    assert info.value.status == 404
    sampling = protocol.parse_sampling(
        {"prompt": "x", "stream": True, "stream_options": {"include_usage": True}},
        False,
        "m",
        strict_model=False,
    )
    assert sampling.max_tokens == 16 and sampling.include_usage
