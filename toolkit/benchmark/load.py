"""What a benchmark sends and how fast: the knobs of ``vllm bench serve``, as one frozen record (pure).

Two dozen keywords passed on as a dict were checked only at the first run; a :class:`Load` is checked
when made and travels in a :class:`~toolkit.moves.plan.Plan`. What the client then did is recorded
apart (:class:`~toolkit.benchmark.workload.Workload`, :class:`~toolkit.benchmark.client.ClientSettings`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Load", "Endpoint", "ENDPOINTS"]

Endpoint = Literal["completions", "chat"]
ENDPOINTS: tuple[Endpoint, ...] = ("completions", "chat")


@dataclass(frozen=True)
class Load:
    """The requests of a benchmark run and their pacing, as ``vllm bench serve`` spells them.

    Lengths in tokens (``output_len`` is ``max_tokens`` with ``ignore_eos``); ``range_ratio`` as vLLM
    (0 = fixed); ``request_rate`` in req/s (``inf``: all at once) with ``burstiness`` (1 = Poisson).
    ``warmup=None`` first sends ``max_concurrency`` short requests. ``dataset``: a prompt file, ShareGPT
    ``.json`` or vLLM custom ``.jsonl``. ``goodput="ttft:200 tpot:50"``: vLLM's request goodput.

    >>> Load(num_prompts=8, max_concurrency=4).replace(output_len=32).output_len
    32
    """

    num_prompts: int = 100
    max_concurrency: int | None = 1
    input_len: int | None = 1024
    output_len: int | None = 128
    range_ratio: float = 0.0
    request_rate: float = math.inf
    burstiness: float = 1.0
    warmup: int | None = None
    ignore_eos: bool = True
    temperature: float = 0.0
    dataset: str | None = None
    seed: int = 0
    endpoint: Endpoint = "completions"
    goodput: str | Sequence[str] | Mapping[str, float] | None = None
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint must be one of {', '.join(ENDPOINTS)}, got {self.endpoint!r}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1 (or None for unlimited), got {self.max_concurrency}")
        if self.num_prompts < 1:
            raise ValueError(f"num_prompts must be at least 1, got {self.num_prompts}")

    def replace(self, **changes: Any) -> Load:
        """This load with some fields changed (checked again): ``BENCH.replace(max_concurrency=32)``."""
        return dataclasses.replace(self, **changes)
