"""A simulated SGLang / vLLM server for testing the toolkit without GPUs (manual: docs/simulator.md).

`python -m toolkit.sim --model-path M --tp 8 ...` imitates `python -m sglang.launch_server` (or
`vllm serve` with `--engine vllm`). Importing this package is cheap: the server (aiohttp) lives in
`toolkit.sim.server`.

>>> from toolkit.sim import LatencyModel, PerfParams, DecodeSetup, Speculation
>>> round(LatencyModel(PerfParams(), DecodeSetup(speculation=Speculation(2))).tokens_per_s(), 1)
60.0
"""

from __future__ import annotations

from toolkit.sim.latency import AcceptSampler, DecodeSetup, LatencyModel, PerfParams, Speculation
from toolkit.sim.repo import CommitInfo, make_repo
from toolkit.sim.source import SourcePerf, load_source_perf, parse_source_perf

__all__ = ["AcceptSampler", "CommitInfo", "DecodeSetup", "LatencyModel", "PerfParams", "SourcePerf",
           "Speculation", "load_source_perf", "make_repo", "parse_source_perf"]
