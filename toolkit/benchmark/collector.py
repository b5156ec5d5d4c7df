"""Keep Python's garbage collector out of a measured window, and put it back as it was.

Against a server that records every token it sends (issue 29), full collections took 60-80 ms about
every 9 s under load, and no chunk is timestamped meanwhile: the pause lands in ITL p99 and TTFT. vLLM
0.33.0 freezes its heap once before the benchmark (``vllm/benchmarks/serve.py:2265-2266``,
``vllm/utils/gc_utils.py:120-131``) and leaves the collector on; its passes still took 13-23 ms.

No collection or freeze around the window: a forced full pass on each side cost every run two scans of
the caller's heap (about 250 ms each in a pytest process); a run leaves a few kilobytes per request.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["CollectorState", "collector_state", "quiet_collector"]


@dataclass(frozen=True)
class CollectorState:
    """What :func:`quiet_collector` changes, to compare before and after."""

    enabled: bool
    thresholds: tuple[int, ...]
    frozen: int


def collector_state() -> CollectorState:
    """The collector's state now."""
    return CollectorState(gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())


@contextmanager
def quiet_collector() -> Iterator[None]:
    """No automatic collection inside the block; a collector the caller had disabled stays disabled."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
