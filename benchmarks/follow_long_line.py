"""How long the live follower takes on one long line, and how much memory it holds (issue 25).

A log with one ``--mb`` MB line without a newline, then a short line, is followed by a
``LogFollower`` on this machine (``tail -F`` through ``Host.local()``), from the first byte
until both lines are classified; peak RSS growth is read from ``/proc/self/status`` (VmHWM).
Before the fix: 10 MB 1.9 s, 50 MB 26.6 s and 305 MB, the line kept whole.

    .venv/bin/python benchmarks/follow_long_line.py --mb 50
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from toolkit.host.host import Host
from toolkit.server.follow import LogFollower


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50, help="the long line's size in MB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "server.log"
        with log.open("wb") as f:
            f.write(b"INFO start ")
            for _ in range(args.mb):
                f.write(b"x" * 1_000_000)
            f.write(b" the end\nINFO next\n")
        before = _peak_rss_mb()
        started = time.perf_counter()
        with LogFollower(Host.local(), str(log), engine="sglang") as follower:
            while follower.stats.lines < 2:
                time.sleep(0.01)
            took = time.perf_counter() - started
            kept = len(follower.events()[0].raw)
    print(f"{args.mb} MB line followed in {took:.2f} s; peak RSS grew {_peak_rss_mb() - before:.0f} MB; "
          f"the line kept as {kept:,} characters")


if __name__ == "__main__":
    main()
