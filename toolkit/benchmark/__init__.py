"""Benchmark an OpenAI-compatible server (SGLang, vLLM) with the engines' own definitions.

``bench(url_or_server, Load(...))`` streams a workload and returns a :class:`BenchResult`: TTFT,
TPOT, ITL (per chunk and per token), E2EL, throughputs and goodput as ``vllm bench serve``
and SGLang's ``bench_serving`` define them (``docs/metrics.md``), plus the server's own
view (speculative accept length). The layers, each importable on its own:

- ``sse`` (pure): SSE framing under any chunk split.
- ``metrics`` (pure): ``RequestRecord`` -> ``summarize`` with stable keys.
- ``load`` (pure): ``Load``, what to send and how fast; ``workload`` (pure): the prompts, lengths and
  arrival schedule it makes from a seed.
- ``client``: the streaming client (``wire``: each response read inside its connection); ``runner``: ``bench``; ``result``: ``BenchResult``.
- ``server_view``: Prometheus / ``/server_info`` / log rows -> accept length.
"""

from __future__ import annotations

from toolkit.benchmark.client import ClientSettings
from toolkit.benchmark.load import Load
from toolkit.benchmark.metrics import SUMMARY_KEYS, RequestRecord, summarize
from toolkit.benchmark.result import BenchResult
from toolkit.benchmark.runner import bench, bench_async
from toolkit.benchmark.server_view import ServerView
from toolkit.benchmark.sse import SSEDecoder
from toolkit.benchmark.workload import Workload, make_workload

__all__ = [
    "bench",
    "bench_async",
    "Load",
    "BenchResult",
    "ClientSettings",
    "Workload",
    "make_workload",
    "RequestRecord",
    "summarize",
    "SUMMARY_KEYS",
    "ServerView",
    "SSEDecoder",
]
