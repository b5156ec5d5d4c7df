"""The client against the simulator (`python -m toolkit.sim`) running EAGLE-3: several tokens per chunk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sim_process as testing  # noqa: E402

from toolkit.benchmark import Load
from toolkit.benchmark.load import Endpoint
from toolkit.benchmark.runner import bench

pytestmark = pytest.mark.timeout(60)
READY = testing.READY_LINE
EAGLE = list(testing.EAGLE3_ARGS)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with testing.SimProcess(["--model-path", "m", "--tp-size", "1", "--sim-startup-s", "0.2", *EAGLE]) as sim:
        sim.wait_for(READY)
        yield f"http://127.0.0.1:{sim.port}"


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_speculative_chunks_and_the_servers_accept_length(sim_url: str, endpoint: Endpoint) -> None:
    r = bench(sim_url, Load(endpoint=endpoint, num_prompts=4, max_concurrency=2, input_len=8, output_len=30),
              progress=False)
    s = r.summary
    assert (s["completed"], s["failed"], s["total_output_tokens"]) == (4, 0, 120)
    assert s["output_tokens_source"] == "usage" and r.settings.model == "m"  # from /v1/models
    assert s["mean_tokens_per_chunk"] > 1.0  # one chunk per verify step
    assert s["mean_itl_per_token_ms"] < s["mean_itl_ms"]
    assert r.server_view.accept_length_source == "sglang_server_info" and r.server_view.cumulative
    assert s["accept_length"] is not None and s["accept_length"] > 1.0


def test_input_len_is_counted_in_the_servers_tokens(sim_url: str) -> None:
    """As `vllm bench serve`: 48 input tokens means 48 of the server's tokens, not 48 words.

    The simulator's tokenizer gives long words two tokens, so 48 words are ~55 tokens: a word
    count would be off by more than 10 %.
    """
    r = bench(sim_url, Load(num_prompts=6, input_len=48, output_len=4, range_ratio=0.5), progress=False)
    assert r.workload.input_len_unit == "tokens (the server's /tokenize)"
    usage = [rec.prompt_tokens for rec in r.records]
    assert usage == [spec.prompt_len for spec in r.workload.requests]  # the server counts what we fitted
    assert all(24 <= n <= 72 for n in usage) and len(set(usage)) > 1
    words = bench(sim_url, Load(num_prompts=6, input_len=48, output_len=4), progress=False, tokenizer=None)
    assert words.workload.input_len_unit == "words"
    assert all(spec.prompt_len == 48 for spec in words.workload.requests)
    assert [rec.prompt_tokens for rec in words.records] != [48] * 6  # words are not tokens


def test_a_local_tokenizer_file_counts_the_tokens(sim_url: str, tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    from toolkit.benchmark.workload import _WORDS

    vocabulary = {word: i for i, word in enumerate(_WORDS)}
    vocabulary["[UNK]"] = len(vocabulary)
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))  # one token per word: lengths in words and tokens agree
    r = bench(sim_url, Load(num_prompts=3, input_len=20, output_len=4), progress=False,
              tokenizer=str(tmp_path))
    assert r.workload.input_len_unit == f"tokens (tokenizer.json in {tmp_path.name})"
    assert all(len(spec.prompt.split()) == 20 for spec in r.workload.requests)
