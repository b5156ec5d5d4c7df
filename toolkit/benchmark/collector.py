"""Keep Python's garbage collector out of a measured window, and put it back as it was.

Measured against a server that records every token it sends (issue 29), the client's full
collections took 60-80 ms about every 9 s under load: each one scans the whole heap (some 85,000
objects once pandas, aiohttp and the toolkit are imported), and while it runs no chunk is
timestamped, so its pause lands in the reported ITL p99 and TTFT. vLLM 0.33.0's client collects and
freezes its heap once before the benchmark (``vllm/benchmarks/serve.py:2265-2266`` calls
``freeze_gc_heap``, ``vllm/utils/gc_utils.py:120-131``: ``gc.collect(0..2)``, ``gc.freeze()``) and
leaves the collector on; its passes still took 13-23 ms.

:func:`quiet_collector` turns automatic collection off for the window itself and puts the collector
back as it was after it (enabled or not, thresholds), and does nothing else: no collection before or
after, no freeze. With the collector off nothing is scanned inside the window, so a freeze would
save nothing there; and a forced full pass on each side cost every run two scans of the caller's
whole heap, about 250 ms each in a pytest process (400,000 objects) and more in a long notebook
kernel, the run's own start delayed by one of them. The cycles a run leaves behind are the
collector's to find later, by its own thresholds; everything a run allocates lives until then: a
few kilobytes per request.
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
    """No automatic collection inside the block; the collector's state restored after it, even on error.

    Thresholds and any freeze are left as they are: a collector the caller had disabled stays disabled.

    Example::

        with quiet_collector():
            records = await run_requests(...)   # no GC pause in any timestamp
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
