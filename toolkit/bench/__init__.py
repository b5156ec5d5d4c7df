"""Benchmark an OpenAI-compatible server (SGLang, vLLM) with the engines' own definitions.

``bench(url_or_server, ...)`` streams a workload and returns a :class:`BenchResult`: TTFT,
TPOT, ITL (per chunk and per token), E2EL, throughputs and goodput as ``vllm bench serve``
and SGLang's ``bench_serving`` define them (``docs/metrics.md``), plus the server's own
view (speculative accept length). The layers, each importable on its own:

- ``sse`` (pure): SSE framing under any chunk split.
- ``metrics`` (pure): ``RequestRecord`` -> ``summarize`` with stable keys.
- ``workload`` (pure): prompts, lengths, arrival schedule from a seed.
- ``client``: the aiohttp streaming client; ``runner``: ``bench``; ``result``: ``BenchResult``.
- ``server_view``: Prometheus / ``/server_info`` / log rows -> accept length.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from toolkit.bench.client import ClientSettings
from toolkit.bench.metrics import SUMMARY_KEYS, RequestRecord, summarize
from toolkit.bench.result import BenchResult
from toolkit.bench.runner import bench, bench_async
from toolkit.bench.server_view import ServerView
from toolkit.bench.sse import SSEDecoder
from toolkit.bench.workload import Workload, make_workload

__all__ = [
    "bench",
    "bench_async",
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


class _CallableModule(types.ModuleType):
    """`tk.bench(server, ...)` and `toolkit.bench.client` must both work.

    The package and its main function share a name; once the package is imported, Python
    binds `toolkit.bench` to the module, whatever `toolkit/__init__` exports. Calling the
    module calls :func:`bench`, so the notebook vocabulary holds in any import order.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> BenchResult:
        return bench(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
