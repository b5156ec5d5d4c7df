"""Which of the peers' benchmark figures equals which toolkit summary key, per backend.

Names match, definitions not always: under speculative decoding SGLang's "Median ITL" is per *token*
(native backend; OpenAI backends once ``/server_info`` reports an accept length), vLLM's per *chunk*.
Read from sglang 0.5.23 ``python/sglang/benchmark/serving.py`` and vllm 0.33.0 ``vllm/benchmarks/serve.py``.

>>> [n.toolkit_key for n in peer_names("sglang.bench_serving", "sglang", "median_itl_ms", speculative=True)]
['median_itl_per_token_ms']
>>> [n.toolkit_key for n in peer_names("vllm bench serve", "openai", "median_itl_ms", speculative=True)]
['median_itl_ms']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["PeerName", "PEER_NAMES", "peer_names", "Tool"]

Tool = Literal["sglang.bench_serving", "vllm bench serve"]
_SG = "sglang 0.5.23 python/sglang/benchmark/serving.py"
_VL = "vllm 0.33.0 vllm/benchmarks/serve.py"
# SGLang's backends that talk OpenAI; "sglang" is the native /generate backend.
_SG_OAI = ("sglang-oai", "sglang-oai-chat")
ANY_BACKEND = "*"


@dataclass(frozen=True)
class PeerName:
    """One figure a peer prints (``printed``) and writes (``json_key``), and the toolkit key equal to it.

    ``backends``: the ``--backend`` values it holds for (``*``: all); ``speculative``: None for either way.
    """

    tool: Tool
    backends: tuple[str, ...]
    printed: str
    json_key: str
    toolkit_key: str
    definition: str
    source: str
    speculative: bool | None = None


PEER_NAMES: tuple[PeerName, ...] = (
    PeerName("sglang.bench_serving", (ANY_BACKEND,), "Output token throughput (tok/s):", "output_throughput",
             "output_throughput", "sum of output tokens / benchmark duration", f"{_SG}:1274,1726,1878"),
    PeerName("sglang.bench_serving", (ANY_BACKEND,), "Median TTFT (ms):", "median_ttft_ms", "median_ttft_ms",
             "first chunk arrival - send", f"{_SG}:1281,1772,1887"),
    PeerName("sglang.bench_serving", (ANY_BACKEND,), "Median TPOT (ms):", "median_tpot_ms", "median_tpot_ms",
             "(latency - ttft) / (output_len - 1) per request", f"{_SG}:1171-1172,1782,1893"),
    PeerName("sglang.bench_serving", (ANY_BACKEND,), "Median E2E Latency (ms):", "median_e2e_latency_ms",
             "median_e2el_ms", "last chunk arrival - send", f"{_SG}:1300,1757,1881"),
    PeerName("sglang.bench_serving", ("sglang",), "Median ITL (ms):", "median_itl_ms", "median_itl_per_token_ms",
             "native /generate: each chunk gap / new tokens (completion_tokens delta), repeated per token",
             f"{_SG}:790-797,1293,1788"),
    PeerName("sglang.bench_serving", _SG_OAI, "Median ITL (ms):", "median_itl_ms", "median_itl_per_token_ms",
             "OpenAI backends once /server_info reports an accept length: each chunk gap / tokens in the chunk's "
             "text as the client's tokenizer counts them (retokenized), repeated per token",
             f"{_SG}:1153-1181,1293", speculative=True),
    PeerName("sglang.bench_serving", _SG_OAI, "Median ITL (ms):", "median_itl_ms", "median_itl_ms",
             "gap between successive chunks, pooled", f"{_SG}:228,381,1183", speculative=False),
    # The means: per-token on the same backends as the medians; a mean of per-token gaps is total gap time over
    # tokens, which a client that only knows each request's tokens per chunk computes exactly too.
    PeerName("sglang.bench_serving", ("sglang",), "Mean ITL (ms):", "mean_itl_ms", "mean_itl_per_token_ms",
             "native /generate: each chunk gap / new tokens, repeated per token; the mean", f"{_SG}:790-797,1292,1787"),
    PeerName("sglang.bench_serving", _SG_OAI, "Mean ITL (ms):", "mean_itl_ms", "mean_itl_per_token_ms",
             "OpenAI backends once /server_info reports an accept length: chunk gaps over the tokens of the "
             "chunk's text as the client's tokenizer counts them (retokenized); the mean", f"{_SG}:1153-1181,1292,1787",
             speculative=True),
    PeerName("sglang.bench_serving", _SG_OAI, "Mean ITL (ms):", "mean_itl_ms", "mean_itl_ms",
             "gap between successive chunks, pooled; the mean", f"{_SG}:228,381,1292,1787", speculative=False),
    PeerName("vllm bench serve", (ANY_BACKEND,), "Mean ITL (ms):", "mean_itl_ms", "mean_itl_ms",
             "gap between successive chunks, pooled: per chunk under speculative decoding; the mean",
             f"{_VL}:795,1424-1427"),
    PeerName("sglang.bench_serving", ("sglang", *_SG_OAI), "Accept length:", "accept_length", "accept_length",
             "GET /server_info internal_states[0].avg_spec_accept_length after the run: the server's own "
             "average, not limited to the benchmark's requests", f"{_SG}:1640-1662,1748,1905", speculative=True),
    PeerName("vllm bench serve", (ANY_BACKEND,), "Output token throughput (tok/s):", "output_throughput",
             "output_throughput", "sum of output tokens / benchmark duration", f"{_VL}:1252,1327"),
    PeerName("vllm bench serve", (ANY_BACKEND,), "Median TTFT (ms):", "median_ttft_ms", "median_ttft_ms",
             "first chunk arrival - send", f"{_VL}:1398-1438"),
    PeerName("vllm bench serve", (ANY_BACKEND,), "Median TPOT (ms):", "median_tpot_ms", "median_tpot_ms",
             "(latency - ttft) / (output_len - 1) per request", f"{_VL}:654-658,1398-1438"),
    PeerName("vllm bench serve", (ANY_BACKEND,), "Median ITL (ms):", "median_itl_ms", "median_itl_ms",
             "gap between successive chunks, pooled: per chunk (per decode step) under speculative decoding",
             f"{_VL}:661,1398-1438; vllm/benchmarks/lib/endpoint_request_func.py:290"),
    PeerName("vllm bench serve", (ANY_BACKEND,), "Median E2EL (ms):", "median_e2el_ms", "median_e2el_ms",
             "last chunk arrival - send", f"{_VL}:1398-1438"),
    PeerName("vllm bench serve", (ANY_BACKEND,), "Acceptance length:", "spec_decode_acceptance_length",
             "accept_length", "1 + accepted / drafts, from /metrics counters read before and after the run "
             "(0.14+)", f"{_VL}:996,1131-1171,1378,1478", speculative=True),
)


def peer_names(tool: Tool, backend: str, json_key: str | None = None,
               speculative: bool | None = None) -> tuple[PeerName, ...]:
    """The mappings that hold for ``tool`` run with ``--backend backend`` (and ``json_key`` if given)."""
    return tuple(
        n for n in PEER_NAMES
        if n.tool == tool
        and (ANY_BACKEND in n.backends or backend in n.backends)
        and (json_key is None or n.json_key == json_key)
        and (n.speculative is None or speculative is None or n.speculative == speculative)
    )
