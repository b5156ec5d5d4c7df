"""The simulator's latency model: how long one scheduler step takes, and how many tokens it yields. Pure.

Calibrated to the EAGLE-3 incident (8-GPU SGLang, 61-layer MoE target): baseline decode under CUDA
graphs ~12 ms per step (82-83 tok/s single stream); EAGLE-3 with 2 draft steps verifying in extend
("prefill") mode without CUDA graphs ~29 ms per verify of 3 tokens (59-61 tok/s);
``--speculative-attention-mode decode`` verifies under CUDA graphs near decode cost (~124 tok/s).
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import operator
import random
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["AcceptSampler", "DecodeSetup", "LatencyModel", "PerfParams", "Speculation", "noise_slowdown"]

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class PerfParams:
    """Performance parameters of one simulated build (`sim_perf.json`); defaults reproduce the incident."""

    decode_step_ms: float = 12.1  # one decode step of the target, CUDA graph replay, batch 1
    num_layers: int = 61  # target layers: each pays launch overhead when not graph-captured
    eager_launch_ms_per_layer: float = 0.10  # kernel-launch overhead per layer without CUDA graphs
    extend_verify_ms_per_layer: float = 0.165  # extra per layer when verify runs in extend mode
    verify_ms_per_extra_token: float = 0.35  # each verified token beyond the first
    draft_step_ms: float = 1.2  # one draft-model step (EAGLE head), graph captured
    draft_num_layers: int = 1  # draft layers: launch overhead when the draft runs eagerly
    batch_growth_per_req: float = 0.03  # step time grows 3% per running request beyond the first
    prefill_base_ms: float = 30.0  # one prefill (extend) step, fixed part
    prefill_ms_per_token: float = 0.02  # one prefill step, per new prompt token
    accept_prob_first: float = 0.62  # P(first draft token accepted)
    accept_prob_decay: float = 0.68  # each further position: previous probability x decay

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> PerfParams:
        """Build from a JSON-like mapping; unknown keys are an error, so typos in a checkout show up."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(f"unknown performance parameter(s) {unknown}; valid ones are {sorted(names)}")
        kwargs: dict[str, float | int] = {}
        for key, raw in values.items():
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                raise ValueError(f"performance parameter {key!r} must be a number, got {raw!r}")
            kwargs[key] = int(raw) if names[key].type == "int" else float(raw)
        params = cls(**kwargs)  # type: ignore[arg-type]
        params.validate()
        return params

    def to_mapping(self) -> dict[str, float | int]:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        for key, value in self.to_mapping().items():
            if value < 0:
                raise ValueError(f"performance parameter {key!r} must be >= 0, got {value}")
        if self.decode_step_ms <= 0:
            raise ValueError("decode_step_ms must be > 0")
        if not 0.0 <= self.accept_prob_first <= 1.0 or not 0.0 <= self.accept_prob_decay <= 1.0:
            raise ValueError("accept_prob_first and accept_prob_decay must lie in [0, 1]")


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding as SGLang configures it (`--speculative-*`)."""

    num_steps: int  # draft steps per verify (`--speculative-num-steps`)
    topk: int = 1  # `--speculative-eagle-topk`: branching of the draft tree
    num_draft_tokens: int | None = None  # tokens verified per step; None means num_steps + 1
    verify_in_extend: bool = True  # `--speculative-attention-mode prefill` (SGLang's default)

    @property
    def verified_tokens(self) -> int:
        return self.num_draft_tokens if self.num_draft_tokens is not None else self.num_steps + 1


@dataclass(frozen=True)
class DecodeSetup:
    """What the launch flags decide about a decode step."""

    cuda_graph: bool = True  # False with `--disable-cuda-graph` / vLLM `--enforce-eager`
    cuda_graph_max_bs: int = 256  # larger batches run eagerly, as in SGLang
    speculation: Speculation | None = None


class LatencyModel:
    """Step durations and acceptance for one launch configuration.

    >>> LatencyModel(PerfParams(), DecodeSetup()).tokens_per_s()  # baseline, one stream
    82.64462809917356
    """

    def __init__(self, params: PerfParams, setup: DecodeSetup) -> None:
        self.params = params
        self.setup = setup

    def uses_cuda_graph(self, batch_size: int = 1) -> bool:
        """Whether a decode/verify step at this batch size replays a CUDA graph (the log's `cuda graph:`)."""
        spec = self.setup.speculation
        if spec is not None and spec.verify_in_extend:
            return False  # extend-mode verify is never graph-captured: the incident's root cause
        return self.setup.cuda_graph and batch_size <= self.setup.cuda_graph_max_bs

    def _eager_ms(self, batch_size: int) -> float:
        p = self.params
        return 0.0 if self.uses_cuda_graph(batch_size) else p.num_layers * p.eager_launch_ms_per_layer

    def verify_ms(self, batch_size: int = 1) -> float:
        """Target forward of one step at batch 1 (a plain decode step without speculation)."""
        p, spec = self.params, self.setup.speculation
        cost = p.decode_step_ms + self._eager_ms(batch_size)
        if spec is None:
            return cost
        cost += max(spec.verified_tokens - 1, 0) * p.verify_ms_per_extra_token
        return cost + (p.num_layers * p.extend_verify_ms_per_layer if spec.verify_in_extend else 0.0)

    def draft_ms(self) -> float:
        """All draft steps of one speculative step (zero without speculation)."""
        p, spec = self.params, self.setup.speculation
        if spec is None:
            return 0.0
        eager = 0.0 if self.setup.cuda_graph else p.draft_num_layers * p.eager_launch_ms_per_layer
        return spec.num_steps * (p.draft_step_ms + eager)

    def batch_factor(self, batch_size: int) -> float:
        return 1.0 + self.params.batch_growth_per_req * max(batch_size - 1, 0)

    def step_ms(self, batch_size: int = 1) -> float:
        """Wall time of one decode (or draft+verify) step with `batch_size` running requests."""
        return (self.verify_ms(batch_size) + self.draft_ms()) * self.batch_factor(batch_size)

    def prefill_ms(self, new_tokens: int) -> float:
        """One prefill step over `new_tokens` prompt tokens (it also yields each request's first token)."""
        p = self.params
        draft_extend = self.draft_ms() / max(self.setup.speculation.num_steps, 1) if self.setup.speculation else 0.0
        return p.prefill_base_ms + p.prefill_ms_per_token * max(new_tokens, 0) + draft_extend

    def accept_probs(self) -> tuple[float, ...]:
        """P(draft position i accepted | position i-1 was); a wider tree (topk) offers more candidates."""
        spec, p = self.setup.speculation, self.params
        if spec is None:
            return ()
        return tuple(1.0 - (1.0 - p.accept_prob_first * p.accept_prob_decay**i) ** max(spec.topk, 1)
                     for i in range(spec.num_steps))

    def accept_distribution(self) -> tuple[float, ...]:
        """P(k draft tokens accepted) for k = 0..num_steps; empty without speculation."""
        probs = self.accept_probs()
        if not probs:
            return ()
        reach = list(itertools.accumulate(probs, operator.mul, initial=1.0))  # P(position i is reached)
        return tuple(r * (1.0 - p) for r, p in zip(reach[:-1], probs, strict=True)) + (reach[-1],)

    def mean_accept_length(self) -> float:
        """Tokens per step (SGLang's `accept len`): 1 + expected accepted draft tokens."""
        return 1.0 + sum(k * w for k, w in enumerate(self.accept_distribution()))

    def tokens_per_s(self, batch_size: int = 1) -> float:
        """Aggregate decode throughput with `batch_size` streams (single stream by default)."""
        return batch_size * self.mean_accept_length() / (self.step_ms(batch_size) / 1000.0)


class AcceptSampler:
    """Seeded per-request acceptance counts whose running mean converges fast.

    A golden-ratio recurrence from a seeded offset, not independent uniforms: 40 steps land within ~2%
    of the model's mean, so a short measurement matches the documented rate.
    """

    def __init__(self, distribution: tuple[float, ...], offset: float) -> None:
        self._cumulative = list(itertools.accumulate(distribution))
        self._position = offset % 1.0

    def next(self) -> int:
        """Accepted draft tokens in the next verify step (0 when there is no speculation)."""
        if not self._cumulative:
            return 0
        self._position = (self._position + _GOLDEN) % 1.0
        u = self._position * self._cumulative[-1]
        return min(bisect.bisect_right(self._cumulative, u), len(self._cumulative) - 1)


def noise_slowdown(seed: int, key: str, index: int, noise_pct: float) -> float:
    """How much slower the ``index``-th generation request of a launch runs: seeded, lognormal, median 1.

    Noise that is the same on every run, to test a bisection's judge: it depends only on the seed, the
    key (the source version: each commit draws its own) and the request's place in the launch.

    >>> noise_slowdown(0, "0.5.9.dev3", 2, 5.0) == noise_slowdown(0, "0.5.9.dev3", 2, 5.0) != noise_slowdown(0, "", 2, 5.0)
    True
    """
    if noise_pct <= 0:
        return 1.0
    return math.exp(random.Random(f"{seed}/{key}/{index}").gauss(0.0, noise_pct / 100.0))
