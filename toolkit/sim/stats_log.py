"""The engines' periodic throughput lines, fed by the step loop.

SGLang (TP0): `Prefill batch` per prefill, `Decode batch` every `--decode-log-interval` decode steps.
vLLM: every `VLLM_LOG_STATS_INTERVAL` s the throughput (and `SpecDecoding metrics`) line, at info level
only when this interval or the previous one had traffic, as its LoggingStatLogger does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from toolkit.sim import logs
from toolkit.sim.engine import Engine, GenRequest

__all__ = ["SglangStatsLog", "VllmStatsLog"]

Emit = Callable[[str, str, str], None]  # (message, level, vLLM source)


class SglangStatsLog:
    """A step hook printing SGLang's `Prefill batch` / `Decode batch` lines."""

    def __init__(self, engine: Engine, emit: Emit, interval_steps: int, max_total_tokens: int) -> None:
        self.engine = engine
        self.emit = emit
        self.interval = interval_steps
        self.max_total_tokens = max(max_total_tokens, 1)
        self._last_prefill = self._last_decode = time.perf_counter()
        self._steps = 0
        self._gen_mark = 0
        self._accept_mark = (0, 0)

    def __call__(self, kind: str, batch: list[GenRequest]) -> None:
        e = self.engine
        now = time.perf_counter()
        if kind == "prefill":
            new_tokens = sum(r.prompt_tokens for r in batch)
            joined = sum(1 for r in batch if r in e.running)
            gap = max(now - self._last_prefill, 1e-6)
            self._last_prefill = now
            self.emit(logs.sglang_prefill_batch(logs.PrefillStats(
                new_seq=len(batch), new_token=new_tokens, cached_token=0, queue_req=len(e.waiting),
                token_usage=e.num_tokens_in_use / self.max_total_tokens, running_req=len(e.running) - joined,
                input_throughput=new_tokens / gap)), "info", "")
            return
        self._steps += 1
        if self._steps % self.interval:
            return
        t = e.totals
        gap = max(now - self._last_decode, 1e-6)
        self._last_decode = now
        e.last_gen_throughput = (t.generation_tokens - self._gen_mark) / gap
        self._gen_mark = t.generation_tokens
        accept_len = accept_rate = None
        spec = e.model.setup.speculation
        if spec is not None:
            d_tokens = t.spec_accept_tokens - self._accept_mark[0]
            d_forward = t.spec_forward_ct - self._accept_mark[1]
            self._accept_mark = (t.spec_accept_tokens, t.spec_forward_ct)
            accept_len = d_tokens / d_forward if d_forward else 0.0
            accept_rate = d_tokens / (d_forward * spec.verified_tokens) if d_forward else 0.0
        self.emit(logs.sglang_decode_batch(logs.DecodeStats(
            running_req=len(batch), num_tokens=e.num_tokens_in_use,
            token_usage=e.num_tokens_in_use / self.max_total_tokens, cuda_graph=e.model.uses_cuda_graph(len(batch)),
            gen_throughput=e.last_gen_throughput, queue_req=len(e.waiting), accept_len=accept_len,
            accept_rate=accept_rate)), "info", "")


class VllmStatsLog:
    """A timer task printing vLLM's throughput and SpecDecoding lines."""

    def __init__(self, engine: Engine, emit: Emit, interval_s: float, max_total_tokens: int) -> None:
        self.engine = engine
        self.emit = emit
        self.interval_s = max(interval_s, 0.05)
        self.max_total_tokens = max(max_total_tokens, 1)

    async def run(self) -> None:
        e = self.engine
        t = e.totals
        marks = (t.prompt_tokens, t.generation_tokens, t.spec_forward_ct, t.spec_accepted_drafts,
                 t.spec_drafted_tokens, list(t.spec_accepted_per_pos))
        last = time.perf_counter()
        previous_active = False
        while True:
            await asyncio.sleep(self.interval_s)
            now = time.perf_counter()
            span = max(now - last, 1e-6)
            last = now
            prompt_tps = (t.prompt_tokens - marks[0]) / span
            gen_tps = (t.generation_tokens - marks[1]) / span
            active = prompt_tps > 0 or gen_tps > 0
            level = "info" if active or previous_active else "debug"
            previous_active = active
            self.emit(logs.vllm_throughput(prompt_tps, gen_tps, len(e.running), len(e.waiting),
                                           e.num_tokens_in_use / self.max_total_tokens, 0.0), level, "loggers.py:273")
            if e.model.setup.speculation is not None and t.spec_forward_ct > marks[2]:  # vLLM: only with drafts
                per_pos = [a - b for a, b in zip(t.spec_accepted_per_pos, marks[5], strict=True)]
                self.emit(logs.vllm_spec_metrics(t.spec_forward_ct - marks[2], t.spec_accepted_drafts - marks[3],
                                                 t.spec_drafted_tokens - marks[4], per_pos, span),
                          level, "metrics.py:120")
            marks = (t.prompt_tokens, t.generation_tokens, t.spec_forward_ct, t.spec_accepted_drafts,
                     t.spec_drafted_tokens, list(t.spec_accepted_per_pos))
