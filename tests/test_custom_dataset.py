"""The custom dataset files of vLLM and SGLang, as the clients read them (issue 23, agreement with their clients)."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from toolkit.benchmark import custom_dataset
from toolkit.benchmark.custom_dataset import (
    parse_custom_jsonl,
    sglang_dataset_args,
    vllm_dataset_args,
    write_custom_jsonl,
    write_sglang_custom_jsonl,
)
from toolkit.benchmark.workload import make_workload


def test_docstring_examples_run() -> None:
    assert doctest.testmod(custom_dataset).failed == 0


def test_a_jsonl_dataset_is_read_in_file_order_with_its_output_lengths(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text(write_custom_jsonl(["one two", "three", "four five six"], [3, 5, 7]))
    workload = make_workload(num_prompts=2, output_len=None, dataset=str(path))
    assert workload.kind == "custom"
    assert [(r.prompt, r.output_len) for r in workload.requests] == [("one two", 3), ("three", 5)]
    fixed = make_workload(num_prompts=3, output_len=128, dataset=str(path))  # vLLM's --custom-output-len
    assert [r.output_len for r in fixed.requests] == [128, 128, 128]


@pytest.mark.parametrize(("text", "says"), [
    ('{"prompt": "a"}\nnot json\n', "line 2 is not JSON"),
    ('{"text": "a"}\n', 'line 1 has no "prompt"'),
    ('{"prompt": "a", "output_tokens": 0}\n', "must be a positive integer"),
    ("\n\n", "holds no prompts"),
])
def test_a_bad_line_is_named_with_what_to_do(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_custom_jsonl(text, source="p.jsonl")


def test_too_few_lines_and_a_missing_length_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a"}\n')
    with pytest.raises(ValueError, match="fewer than num_prompts=2"):
        make_workload(num_prompts=2, output_len=8, dataset=str(path))
    with pytest.raises(ValueError, match="--custom-output-len"):
        make_workload(num_prompts=1, output_len=None, dataset=str(path))


def test_vllms_client_is_told_to_keep_the_order_and_the_text() -> None:
    args = vllm_dataset_args("/tmp/p.jsonl", 128)
    assert args[:4] == ["--dataset-name", "custom", "--dataset-path", "/tmp/p.jsonl"]
    assert {"--disable-shuffle", "--skip-chat-template"} <= set(args) and args[-2:] == ["--custom-output-len", "128"]


def test_sglangs_custom_shape_is_read_too_and_its_client_gets_a_fixed_output_length(tmp_path: Path) -> None:
    """sglang 0.5.17 python/sglang/benchmark/datasets/custom.py:80-90: the first turn of "conversations"."""
    path = tmp_path / "prompts.jsonl"
    path.write_text(write_sglang_custom_jsonl(["one two", "three four"]))
    assert parse_custom_jsonl(path.read_text()) == [("one two", None), ("three four", None)]
    workload = make_workload(num_prompts=2, output_len=128, dataset=str(path))
    assert [(r.prompt, r.output_len) for r in workload.requests] == [("one two", 128), ("three four", 128)]
    value_key = '{"conversation": [{"from": "human", "value": "hi there"}, {"from": "gpt", "value": "x"}]}\n'
    assert parse_custom_jsonl(value_key) == [("hi there", None)]
    with pytest.raises(ValueError, match='no "conversations" list of two turns'):
        parse_custom_jsonl('{"conversations": [{"content": "alone"}]}\n')
    assert sglang_dataset_args("/tmp/p.jsonl", 128) == ["--dataset-name", "custom", "--dataset-path", "/tmp/p.jsonl",
                                                        "--sharegpt-output-len", "128"]
