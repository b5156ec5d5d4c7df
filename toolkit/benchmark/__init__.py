"""Benchmark an OpenAI-compatible server (SGLang, vLLM) with the engines' own metric definitions.

``bench(url_or_server, Load(...))`` returns a :class:`BenchResult` (``docs/metrics.md``). Layers: ``sse``,
``metrics``, ``load``, ``workload`` (pure); ``client`` over ``wire``; ``runner`` (``bench``); ``result``;
``server_view`` (the server's own accept length).
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

__all__ = ["bench", "bench_async", "Load", "BenchResult", "ClientSettings", "Workload", "make_workload",
           "RequestRecord", "summarize", "SUMMARY_KEYS", "ServerView", "SSEDecoder"]
