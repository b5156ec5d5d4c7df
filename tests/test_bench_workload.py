"""Workloads: vLLM's length ranges and arrival schedule, datasets, reproducibility."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from toolkit.benchmark.workload import (
    arrival_offsets,
    make_workload,
    parse_prompt_lines,
    parse_sharegpt,
    sample_lengths,
    warmup_requests,
)


def test_range_ratio_zero_is_fixed_as_in_vllm():
    w = make_workload(num_prompts=20, input_len=32, output_len=512, seed=1)
    assert {r.output_len for r in w.requests} == {512}
    assert {len(r.prompt.split()) for r in w.requests} == {32} == {r.prompt_len for r in w.requests}
    assert w.kind == "random" and "words" in w.notes[0]


def test_range_ratio_bounds_follow_vllms_floor_ceil():
    lens = sample_lengths(2000, 100, 0.25, np.random.default_rng(0))
    assert min(lens) == 75 and max(lens) == 125
    assert min(sample_lengths(500, 1, 0.9, np.random.default_rng(0))) == 1  # never 0 tokens
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        sample_lengths(1, 10, 1.0, np.random.default_rng(0))


def test_same_seed_same_workload_other_seed_other_prompts():
    a = make_workload(num_prompts=5, input_len=8, output_len=4, range_ratio=0.5, seed=3)
    b = make_workload(num_prompts=5, input_len=8, output_len=4, range_ratio=0.5, seed=3)
    c = make_workload(num_prompts=5, input_len=8, output_len=4, range_ratio=0.5, seed=4)
    assert a == b and a.prompts_sha256 == b.prompts_sha256 != c.prompts_sha256
    d = a.to_dict()
    assert (
        d["input_len_unit"] == "words" and "prompts" not in d and len(a.to_dict(prompts=True)["prompts"]) == 5
    )
    json.dumps(d)


def test_prompt_file_and_sharegpt(tmp_path):
    assert parse_prompt_lines("a b\n\n  c  \n") == ["a b", "c"]
    lines = make_workload(num_prompts=5, output_len=7, dataset_text="one two\nthree\n")
    assert lines.kind == "lines" and {r.prompt for r in lines.requests} == {"one two", "three"}
    assert any("repeat" in n for n in lines.notes) and {r.output_len for r in lines.requests} == {7}
    data = [
        {"conversations": [{"from": "human", "value": "hi there"}, {"from": "gpt", "value": "a b c"}]},
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x y"}]},
        {"conversations": [{"from": "human", "value": "only one turn"}]},
    ]
    assert parse_sharegpt(data) == [("hi there", "a b c"), ("q", "x y")]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data))
    w = make_workload(num_prompts=2, output_len=None, dataset=str(path), seed=0)
    assert w.kind == "sharegpt" and sorted(r.output_len for r in w.requests) == [2, 3]
    with pytest.raises(ValueError, match="no usable conversations"):
        make_workload(num_prompts=1, dataset_text="[]")
    with pytest.raises(ValueError, match="pass output_len"):
        make_workload(num_prompts=1, output_len=None, dataset_text="a prompt")


def test_warmup_prompts_are_fresh_and_short():
    w = make_workload(num_prompts=4, input_len=16, output_len=256)
    warm = warmup_requests(w, 6, output_len_cap=32)
    assert len(warm) == 6 and {r.output_len for r in warm} == {32}
    assert not {r.prompt for r in warm} & {r.prompt for r in w.requests}
    assert warmup_requests(w, 0) == ()


def test_arrivals_follow_vllms_gamma_schedule():
    assert arrival_offsets(4, math.inf) == (0.0,) * 4
    t = arrival_offsets(200, 10.0, 1.0, seed=0)
    assert t[-1] == pytest.approx(200 / 10.0)  # rescaled: last at N / rate
    assert all(b >= a for a, b in zip(t, t[1:], strict=False)) and t[0] > 0
    assert arrival_offsets(200, 10.0, 1.0, seed=0) == t != arrival_offsets(200, 10.0, 1.0, seed=1)
    assert np.allclose(np.diff(arrival_offsets(5, 2.0, math.inf)), 0.5)  # burstiness inf: uniform
    bursty = np.diff(arrival_offsets(2000, 10.0, 0.2, seed=0))
    smooth = np.diff(arrival_offsets(2000, 10.0, 5.0, seed=0))
    assert bursty.std() > smooth.std()
    with pytest.raises(ValueError, match="burstiness"):
        arrival_offsets(3, 1.0, 0.0)
