"""tk.agreement with SGLang's client as the reference (issue 23, point 8): its command, its result file, the ratios.

The reference client here is a stand-in program (not SGLang's, which needs transformers): it keeps
``sglang.bench_serving``'s contract as sglang 0.5.17 python/sglang/benchmark/serving.py:1790-1850 writes
it: one JSON line appended to ``--output-file`` per run, with ``median_e2e_latency_ms`` where vLLM
writes ``median_e2el_ms``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import sim_process as testing

from toolkit.errors import ToolkitError
from toolkit.host.host import Host
from toolkit.moves.agreement import agreement, sglang_bench_words, vllm_bench_words
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec

pytestmark = [pytest.mark.timeout(240)]

STAND_IN = """\
import json, sys
args = sys.argv[1:]
out = args[args.index("--output-file") + 1]
assert args[args.index("--backend") + 1] == "sglang-oai" and "--sharegpt-output-len" in args
with open(out, "a") as f:  # sglang appends one line per run
    f.write(json.dumps({"output_throughput": 100.0, "request_throughput": 1.0, "median_ttft_ms": 20.0,
                        "median_tpot_ms": 5.0, "median_itl_ms": 5.0, "median_e2e_latency_ms": 400.0}) + "\\n")
"""


def _spec() -> ServerSpec:
    return ServerSpec.simulator(tp=1, port=testing.free_port(), host="127.0.0.1", python=sys.executable,
                                sim_engine_version="0.5.17", sim_startup_s=0.3, sim_warmup_s=0.05)


def test_sglangs_client_is_told_the_openai_backend_the_file_and_a_result_file(tmp_path: Path) -> None:
    with launch(Host.local(), _spec(), log_dir=str(tmp_path)) as server:  # a Server for its URL and model
        words = sglang_bench_words(["python", "-m", "sglang.bench_serving"], server, "/tmp/p.jsonl", num_prompts=64,
                                   max_concurrency=8, output_len=128, output_file="/tmp/r/round0.jsonl",
                                   tokenizer="/tmp/tok")
        vllm = vllm_bench_words(["vllm", "bench", "serve"], server, "/tmp/p.jsonl", num_prompts=64, max_concurrency=8,
                                output_len=128, result_dir="/tmp/r", result_name="round0.json")
    def value(flag: str) -> str:
        return words[words.index(flag) + 1]

    assert words[:3] == ["python", "-m", "sglang.bench_serving"]
    assert value("--backend") == "sglang-oai" and value("--base-url") == server.url.rstrip("/")
    assert value("--dataset-name") == "custom" and value("--sharegpt-output-len") == "128"
    assert value("--temperature") == "0" and value("--output-file") == "/tmp/r/round0.jsonl"
    assert words[-2:] == ["--tokenizer", "/tmp/tok"] and "--apply-chat-template" not in words
    assert vllm[3:5] == ["--backend", "vllm"]  # vLLM's command is unchanged


def test_one_reference_client_is_required() -> None:
    with pytest.raises(ValueError, match="give one reference client"):
        agreement(None, "p.jsonl", rounds=2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="give one reference client"):
        agreement(None, "p.jsonl", vllm_bench=["v"], sglang_bench=["s"], rounds=2)  # type: ignore[arg-type]


def test_an_agreement_against_sglangs_client_reads_its_jsonl_under_vllms_keys(tmp_path: Path) -> None:
    client = tmp_path / "client.py"
    client.write_text(STAND_IN)
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"conversations": [{"content": f"prompt {i} " * 8}, {"content": "ok"}]})
                               + "\n" for i in range(4)))
    with launch(Host.local(), _spec(), log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        result = agreement(server, str(dataset), sglang_bench=[sys.executable, str(client)], rounds=2, num_prompts=4,
                           max_concurrency=2, output_len=16)
    assert result.reference == "sglang" and list(result.runs["client"]) == ["toolkit", "sglang", "sglang", "toolkit"]
    assert set(result.runs["cache"]) == {"flushed"}  # POST /flush_cache before every run
    row = result.ratios.set_index("figure").loc["median_e2el_ms"]
    assert row["sglang"] == 400.0 and row["toolkit"] > 0  # median_e2e_latency_ms, read under vLLM's key
    assert "sglang.bench_serving over 2 ABBA rounds" in str(result)
    assert len(result.commands) == 2 and all("--output-file" in c for c in result.commands)


def test_a_vllm_client_without_its_bench_extras_is_told_to_install_them(tmp_path: Path) -> None:
    client = tmp_path / "vllm_without_pandas.py"  # what vllm 0.33.0 prints when pandas is missing, then exit 1
    client.write_text("print('  | ImportError: Please install vllm[bench] for bench support'); raise SystemExit(1)\n")
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": f"prompt {i} " * 8, "output_tokens": 16}) + "\n" for i in range(4)))
    with launch(Host.local(), _spec(), log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        with pytest.raises(ToolkitError, match="vllm bench serve failed") as failed:
            agreement(server, str(dataset), vllm_bench=[sys.executable, str(client)], rounds=2, num_prompts=4,
                      max_concurrency=2, output_len=16)
    assert "vllm[bench]" in (failed.value.hint or "") and "pandas" in (failed.value.hint or "")
    assert any("Please install vllm[bench]" in line for line in failed.value.evidence)
