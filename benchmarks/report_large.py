"""Time and peak memory of ``python -m toolkit report`` on a journal of 10,000 steps.

A long investigation (a sweep left running overnight, a bisection over a thousand commits)
records thousands of steps; the post-mortem must still come out in seconds and in bounded
memory (issue 20: a 9.7k-step journal took 152 s and 2.6 GB). This script builds a seeded
journal through the journal's own API (steps with specs from a small flag sweep, a bench
result each, server metric lines and decisive log lines on some, failures with evidence on
others), then runs the report in a fresh process and reads its wall time and peak resident
memory (``ru_maxrss`` from ``os.wait4``). ``--ref BRANCH`` runs the same report with another
checkout's toolkit (``git worktree``) and prints both side by side.

    .venv/bin/python benchmarks/report_large.py                      # 10,000 steps
    .venv/bin/python benchmarks/report_large.py --steps 2000 --ref main
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm.auto import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from journal_data import OOM, bench_result, decode_line, events  # noqa: E402

from toolkit.journal import Journal  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402

KINDS = ("flag_change", "baseline", "attention_mode", "env_change", "rerun")


def build(path: Path, steps: int, seed: int = 0) -> None:
    """A journal of ``steps`` steps: one bench run each, metric lines on every 10th, log lines and failures on some."""
    rng = random.Random(seed)
    base = ServerSpec.simulator(tp=8, port=30000)
    variants = [base] + [base.with_flags({"--speculative-num-steps": k, "--cuda-graph-max-bs": 8 * (k + 1)})
                         for k in range(1, 12)]
    # a pool of results (building one costs more than recording it), drawn from by the seeded generator
    pool = [bench_result(rng.uniform(55.0, 85.0), n=4, accept_length=rng.uniform(2.0, 3.5)) for _ in range(40)]
    with Journal(path, investigation="overnight sweep") as journal:
        for i in tqdm(range(steps), desc="building the journal", unit="step"):
            spec = variants[rng.randrange(len(variants))]
            kind = "baseline" if i == 0 else KINDS[rng.randrange(len(KINDS))]
            try:
                with journal.step(kind, f"trial {i}", hypothesis="more draft steps speed decode up", spec=spec) as step:
                    step.record(pool[rng.randrange(len(pool))])
                    if i % 10 == 0:
                        step.record_log_lines(events(*(decode_line(rng.uniform(50, 90), 2.5, s) for s in range(5))))
                    if i % 97 == 0:
                        step.record_log_lines([OOM])
                        raise RuntimeError(f"server died in trial {i}: CUDA error: out of memory")
                    step.set_verdict(("confirmed", "refuted", "inconclusive")[rng.randrange(3)])
            except RuntimeError:
                continue
        journal.root_cause("the draft model's attention ran in prefill mode on TP5")


def measure(python: str, cwd: Path, journal: Path, out: Path) -> tuple[float, float, int, str]:
    """(wall seconds, peak RSS MiB, exit status, last line printed) of the report in a fresh process."""
    with tempfile.TemporaryFile() as printed:
        start = time.perf_counter()
        proc = subprocess.Popen([python, "-m", "toolkit", "report", str(journal), "--out", str(out)], cwd=cwd,
                                stdout=printed, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        printed.seek(0)
        last = (printed.read().decode("utf-8", "replace").strip().splitlines() or [""])[-1]
    return wall_s, usage.ru_maxrss / 1024, proc.returncode, last


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ref", help="a git ref to measure side by side (e.g. main, or the commit before the fix)")
    ap.add_argument("--keep", type=Path, help="build (or reuse) the journal at this path instead of a temporary one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        journal = args.keep or folder / "journal.sqlite"
        if not journal.exists():
            started = time.perf_counter()
            build(journal, args.steps, args.seed)
            print(f"built {args.steps:,} steps in {time.perf_counter() - started:.0f} s "
                  f"({journal.stat().st_size / 1e6:.0f} MB)")
        rows = []
        if args.ref:
            ref_tree = folder / "ref"
            subprocess.run(["git", "worktree", "add", "--detach", str(ref_tree), args.ref], cwd=REPO, check=True,
                           capture_output=True)
            try:
                rows.append((args.ref, *measure(sys.executable, ref_tree, journal, folder / "out-ref")))
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(ref_tree)], cwd=REPO, check=False,
                               capture_output=True)
        rows.append(("this checkout", *measure(sys.executable, REPO, journal, folder / "out")))
        print(f"{'toolkit':<16}{'wall s':>8}{'peak MiB':>10}{'exit':>6}  printed")
        for name, wall_s, peak, code, last in rows:
            print(f"{name:<16}{wall_s:>8.1f}{peak:>10.0f}{code:>6}  {last[:90]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
