"""Time and peak memory of ``python -m toolkit logs classify`` on long logs: does it stream?

Each case writes one log file into a temporary folder, then runs the CLI on it in a fresh
process and reads that process's peak resident memory (``ru_maxrss`` from ``os.wait4``), its
wall time and how many bytes it printed. A streaming classifier keeps the peak flat as the file
grows (the same peak for 200k and 2M lines); one that reads the whole file grows with it.

Cases (deterministic, seeded):

- ``sglang_serving``: a real SGLang start-up then serving lines (``classify_speed.sglang_serving``);
- ``vllm_metrics``: vLLM serving lines, most of them metric lines (``classify_speed.vllm_serving``);
- ``one_line_50mb``: one 50 MB line that ends in a CUDA out-of-memory error: the fatal reason
  printed must be capped, not the whole line.

    .venv/bin/python benchmarks/classify_memory.py
    .venv/bin/python benchmarks/classify_memory.py --lines 200000 --lines 2000000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from classify_speed import sglang_serving, vllm_serving

REPO = Path(__file__).resolve().parents[1]


def _write(path: Path, lines: Sequence[str]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(line)
            f.write("\n")


def _one_line(path: Path, size_bytes: int) -> None:
    tail = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    with path.open("w", encoding="utf-8") as f:
        f.write("x" * (size_bytes - len(tail)))
        f.write(tail)


def measure(path: Path) -> tuple[float, float, int, int]:
    """(wall seconds, peak RSS in MiB, exit status, bytes printed) of the CLI on ``path``."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "toolkit", "logs", "classify", str(path), "--json"],
                                cwd=REPO, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4: tell Popen
        printed = out.seek(0, 2)
    return wall_s, usage.ru_maxrss / 1024, proc.returncode, printed


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, action="append", help="log lengths to try (default 200000 and 2000000)")
    ap.add_argument("--one-line-mb", type=int, default=50, help="size of the single-line file in MB (default 50)")
    args = ap.parse_args(argv)
    lengths = args.lines or [200_000, 2_000_000]
    print(f"{'case':<16}{'lines':>11}{'file MB':>9}{'wall s':>8}{'peak MiB':>10}{'exit':>6}{'printed B':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cases: list[tuple[str, int, Path]] = []
        for n in lengths:
            for name, build in (("sglang_serving", sglang_serving), ("vllm_metrics", vllm_serving)):
                path = folder / f"{name}-{n}.log"
                _write(path, build(n))
                cases.append((name, n, path))
        single = folder / "one-line.log"
        _one_line(single, args.one_line_mb * 1_000_000)
        cases.append(("one_line_50mb", 1, single))
        for name, n, path in cases:
            wall_s, peak_mib, code, printed = measure(path)
            size_mb = path.stat().st_size / 1e6
            print(f"{name:<16}{n:>11,}{size_mb:>9.1f}{wall_s:>8.1f}{peak_mib:>10.0f}{code:>6}{printed:>11,}")
            path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
