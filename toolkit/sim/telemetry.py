"""``python -m toolkit.sim telemetry --url URL --interval-ms N``: nvidia-smi's CSV for a simulated server's GPUs.

Same fields and format as ``nvidia-smi --query-gpu=timestamp,index,name,utilization.gpu,utilization.memory,
memory.used,memory.total,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms N``,
following the server's load (``GET /sim/gpu``): SM clock 1980 MHz busy, 345 MHz idle (read on an H200).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime

__all__ = ["main", "csv_lines"]

GPU_NAME = "NVIDIA H200 (simulated by toolkit.sim)"
TOTAL_MIB = 143771


def csv_lines(state: dict[str, object], util_pct: float, now: float) -> list[str]:
    """One nvidia-smi CSV line per simulated GPU for one sample."""
    stamp = datetime.fromtimestamp(now).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    tp = int(state.get("tp_size", 1) or 1)  # type: ignore[call-overload]
    fraction = float(state.get("mem_fraction_static", 0.85) or 0.85)  # type: ignore[arg-type]
    lines = []
    for gpu in range(tp):
        util = max(0.0, min(100.0, util_pct - 0.3 * gpu))  # rank 0 leads a hair, as it does on real TP
        used = int(TOTAL_MIB * fraction) + 512 + 37 * gpu
        lines.append(f"{stamp}, {gpu}, {GPU_NAME}, {util:.0f}, {util * 0.6:.0f}, {used}, {TOTAL_MIB}, "
                     f"{1980 if util > 5 else 345}, {75.0 + 6.25 * util:.2f}, {31 + round(0.35 * util)}")
    return lines


def _state(url: str) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/sim/gpu", timeout=2) as response:  # noqa: S310
            data = json.loads(response.read())
            return data if isinstance(data, dict) else None
    except (OSError, ValueError, urllib.error.URLError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolkit.sim telemetry", description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the simulated server, e.g. http://127.0.0.1:30000")
    parser.add_argument("--interval-ms", type=int, default=500, help="sampling interval (nvidia-smi's -lms)")
    parser.add_argument("--count", type=int, default=0, help="stop after this many samples (0: until killed)")
    args = parser.parse_args(argv)
    previous: tuple[float, float] | None = None
    taken, complained = 0, False
    while args.count <= 0 or taken < args.count:
        state = _state(args.url)
        now = time.time()
        if state is None and not complained:
            print(f"Unable to reach the simulated server at {args.url} (toolkit.sim telemetry)",
                  file=sys.stderr, flush=True)
            complained = True
        elif state is not None:
            busy = float(state.get("busy_s", 0.0) or 0.0)  # type: ignore[arg-type]
            util = 0.0 if previous is None else 100.0 * (busy - previous[1]) / max(now - previous[0], 1e-3)
            previous = (now, busy)
            print("\n".join(csv_lines(state, util, now)), flush=True)
            taken += 1
        time.sleep(args.interval_ms / 1000.0)
    return 0
