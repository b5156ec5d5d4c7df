"""The simulated scheduler: one global step loop, like continuous batching, paced in real time.

A step is a prefill (waiting requests join, each gets its first token) or a decode (1 token per running
request, or 1 + accepted drafts). Step ends are absolute deadlines; the last ms is a blocking sleep
(epoll wakes on whole ms), so gaps are exact to ~0.1 ms.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from toolkit.sim.latency import AcceptSampler, LatencyModel, noise_slowdown
from toolkit.sim.protocol import WordSource

__all__ = ["Chunk", "Engine", "GenRequest", "Totals", "modelled_ms"]

# A step up to this late keeps the schedule (the next ones come sooner): a loaded test machine stalls a
# process for seconds (a TP-8 simulator on two cores: runs of 1.2 s measured 3-4 s). Beyond it, give up.
CATCH_UP_S = 5.0


@dataclass(frozen=True)
class Chunk:
    """Tokens one step produced for one request; `finish_reason` is set on the last chunk."""

    texts: tuple[str, ...]
    finish_reason: str | None = None


@dataclass
class GenRequest:
    """A request inside the engine. The HTTP handler reads `out` until a chunk has a finish reason."""

    rid: str
    prompt_tokens: int
    max_tokens: int
    sampler: AcceptSampler
    words: WordSource
    out: asyncio.Queue[Chunk] = field(default_factory=asyncio.Queue)
    generated: int = 0
    cancelled: bool = False
    slowdown: float = 1.0  # --sim-noise-pct: this request's steps take this much longer


@dataclass
class Totals:
    """Cumulative counters since start: /metrics, /get_server_info and the periodic log lines read them."""

    requests_admitted: int = 0
    requests_finished: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    decode_steps: int = 0
    spec_forward_ct: int = 0  # request-steps of speculative decoding (SGLang's forward ct)
    spec_accept_tokens: int = 0  # sum of accept lengths (1 + accepted drafts) over those steps
    spec_drafted_tokens: int = 0  # vLLM: draft tokens proposed
    spec_accepted_drafts: int = 0  # vLLM: draft tokens accepted
    spec_accepted_per_pos: list[int] = field(default_factory=list)


StepHook = Callable[[str, list[GenRequest]], None]  # (kind "prefill" | "decode", the step's batch)


def modelled_ms(model: LatencyModel, kind: str, batch: list[GenRequest]) -> float:
    """A step's duration by the latency model, without noise (the GPU load and the profiler count it)."""
    if kind == "prefill":
        return model.prefill_ms(sum(r.prompt_tokens for r in batch))
    return model.step_ms(len(batch))


class Engine:
    """Owns the waiting queue and the running batch; `run()` is the step loop task."""

    def __init__(self, model: LatencyModel, seed: int, spin_ms: float, max_running: int, *,
                 noise_pct: float = 0.0, noise_key: str = "") -> None:
        self.model = model
        self.seed = seed
        self.noise_pct = noise_pct
        self.noise_key = noise_key
        self.spin_s = spin_ms / 1000.0
        self.max_running = max_running
        self.waiting: deque[GenRequest] = deque()
        self.running: list[GenRequest] = []
        spec = model.setup.speculation
        self.totals = Totals(spec_accepted_per_pos=[0] * (spec.num_steps if spec else 0))
        self.hooks: list[StepHook] = []
        self.last_gen_throughput = 0.0
        self._wake = asyncio.Event()
        self._counter = 0
        self._noisy = 0  # generation requests of 2+ tokens so far: the index of their noise draw

    def new_request(self, rid: str, prompt_tokens: int, max_tokens: int, words: WordSource | None = None
                    ) -> GenRequest:
        """A request with seeded token texts and acceptance; ``words``: the texts of greedy requests."""
        self._counter += 1
        rng = random.Random(self.seed * 1_000_003 + self._counter)
        sampler = AcceptSampler(self.model.accept_distribution(), rng.random())
        texts = WordSource(rng.randrange(1 << 30))
        request = GenRequest(rid, prompt_tokens, max_tokens, sampler, words if words is not None else texts)
        if max_tokens >= 2:  # one-token readiness probes come in varying numbers: they draw no noise
            request.slowdown = noise_slowdown(self.seed, self.noise_key, self._noisy, self.noise_pct)
            self._noisy += 1
        return request

    def submit(self, request: GenRequest) -> None:
        self.waiting.append(request)
        self._wake.set()

    @property
    def num_tokens_in_use(self) -> int:
        return sum(r.prompt_tokens + r.generated for r in self.running)

    async def _sleep_until(self, deadline: float) -> None:
        remaining = deadline - time.perf_counter() - self.spin_s
        await asyncio.sleep(max(remaining, 0.0))  # always yield: handlers write the previous step's chunks
        if self.spin_s > 0:  # the rest precisely (clock_nanosleep): a timer of the loop may end up to 1 ms late
            time.sleep(max(deadline - time.perf_counter(), 0.0))

    async def run(self) -> None:
        """The step loop: runs until cancelled."""
        deadline = time.perf_counter()
        while True:
            self.running = [r for r in self.running if not r.cancelled]
            if not self.waiting and not self.running:
                self._wake.clear()
                await self._wake.wait()
                deadline = time.perf_counter()
            admit: list[GenRequest] = []
            while self.waiting and len(self.running) + len(admit) < self.max_running:
                request = self.waiting.popleft()
                if not request.cancelled:
                    admit.append(request)
            if admit:
                batch, kind = admit, "prefill"
            elif self.running:
                batch, kind = list(self.running), "decode"
            else:
                continue
            slowdown = sum(r.slowdown for r in batch) / len(batch)  # 1.0 without --sim-noise-pct
            duration = modelled_ms(self.model, kind, batch) / 1000.0 * slowdown
            deadline += duration
            await self._sleep_until(deadline)
            now = time.perf_counter()
            if now - deadline > max(duration, CATCH_UP_S):
                deadline = now  # badly late (overloaded machine): give up catching up rather than burst
            if admit:
                self._prefill(admit)
            else:
                self._decode()
            for hook in self.hooks:
                hook(kind, batch)

    def _emit(self, request: GenRequest, n: int) -> None:
        n = min(n, request.max_tokens - request.generated)
        request.generated += n
        self.totals.generation_tokens += n
        done = request.generated >= request.max_tokens
        request.out.put_nowait(Chunk(tuple(request.words.take(n)), "length" if done else None))
        if done:
            self.totals.requests_finished += 1

    def _prefill(self, admit: list[GenRequest]) -> None:
        self.totals.requests_admitted += len(admit)
        for request in admit:
            self.totals.prompt_tokens += request.prompt_tokens
            self._emit(request, 1)
            if request.generated < request.max_tokens:
                self.running.append(request)

    def _decode(self) -> None:
        self.totals.decode_steps += 1
        spec = self.model.setup.speculation
        for request in self.running:
            if request.cancelled:
                continue
            accepted = request.sampler.next() if spec else 0
            if spec:
                t = self.totals
                t.spec_forward_ct += 1
                t.spec_accept_tokens += 1 + accepted
                t.spec_drafted_tokens += spec.num_steps
                t.spec_accepted_drafts += accepted
                for pos in range(accepted):
                    t.spec_accepted_per_pos[pos] += 1
            self._emit(request, 1 + accepted)
        self.running = [r for r in self.running if not r.cancelled and r.generated < r.max_tokens]
