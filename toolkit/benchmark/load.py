"""What a benchmark sends and how fast: the knobs of ``vllm bench serve``, as one frozen record (pure).

``bench()`` took them as two dozen keywords, and every move passed them on as a dict that
nothing checked until the first run. A :class:`Load` is checked when it is made, travels in a
:class:`~toolkit.moves.plan.Plan`, and reads well in a notebook::

    BENCH = Load(num_prompts=64, max_concurrency=8, input_len=32, output_len=512)
    bench(server, BENCH.replace(max_concurrency=1))

What the client then did is recorded apart: the exact requests (:class:`~toolkit.benchmark.workload.Workload`)
and the client's settings (:class:`~toolkit.benchmark.client.ClientSettings`).
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

    Lengths are in tokens (``input_len`` as the bench's ``tokenizer`` counts it; ``output_len`` is
    ``max_tokens``, with ``ignore_eos``); ``range_ratio`` follows vLLM (0 = fixed). ``request_rate``
    (req/s, ``inf`` = all at once) with ``burstiness`` (gamma shape, 1 = Poisson). ``warmup=None``
    first sends ``max_concurrency`` short requests, outside the results. ``dataset``: a prompt file
    (one per line), ShareGPT ``.json`` or vLLM custom ``.jsonl``. ``goodput="ttft:200 tpot:50"``:
    vLLM's request goodput. ``endpoint``: ``"completions"`` or ``"chat"``.

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
