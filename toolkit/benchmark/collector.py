"""Keep Python's garbage collector out of a measured window, and put it back as it was.

Measured against a server that records every token it sends (issue 29), the client's full
collections took 60-80 ms about every 9 s under load: each one scans the whole heap (some 85,000
objects once pandas, aiohttp and the toolkit are imported), and while it runs no chunk is
timestamped, so its pause lands in the reported ITL p99 and TTFT. vLLM 0.33.0's client collects and
freezes its heap once before the benchmark (``vllm/benchmarks/serve.py:2265-2266`` calls
``freeze_gc_heap``, ``vllm/utils/gc_utils.py:120-131``: ``gc.collect(0..2)``, ``gc.freeze()``) and
leaves the collector on; its passes still took 13-23 ms.

:func:`quiet_collector` goes one step further for the window itself: it collects and freezes the
heap (the frozen objects are never scanned again), then disables automatic collection; at the end
it restores the collector's state exactly (enabled or not, thresholds, and a freeze only if it
made it) and runs one full collection, outside the window, for the cycles the run left behind.
Everything a run allocates lives until then: a few kilobytes per request.
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
    """No collection inside the block; the collector's state restored after it, even on error.

    A heap someone else froze (``gc.get_freeze_count() > 0`` before) stays frozen: unfreezing
    cannot tell their objects from ours, so ours stay frozen with theirs.

    Example::

        with quiet_collector():
            records = await run_requests(...)   # no GC pause in any timestamp
    """
    before = collector_state()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if before.frozen == 0:
            gc.unfreeze()
        gc.set_threshold(*before.thresholds)
        if before.enabled:
            gc.enable()
        gc.collect()
