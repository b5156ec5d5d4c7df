"""What watching costs the server: tokens/s with and without GPU sampling side by side, and a profile's capture time.

Why: telemetry sampled during every measured run must not change what it measures, and a
profile is only a one-minute move if capturing and fetching it takes seconds. On one server,
rounds alternate (ABBA: on, off, off, on, ...) so that drift of a shared machine falls on both
sides; each round is one benchmark run. Then ``--profiles`` captures of ``tk.profile`` around
a short benchmark, timed from the start request to the summarised traces on this machine.

    .venv/bin/python benchmarks/observe_costs.py                      # the simulator (SGLang, EAGLE-3, TP 8)
    .venv/bin/python benchmarks/observe_costs.py --rounds 6 --interval-ms 100 --json out/costs.json

On this machine the sampler is the simulator's stand-in for nvidia-smi (a Python process polling
the server every interval): its cost is CPU time on a 2-core machine, an upper bound for what
``nvidia-smi -lms`` costs on a GPU host. ``benchmarks/real_gpu.py`` runs the same functions
against ``transformers serve`` on a GPU with the real nvidia-smi.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sim_process import free_port  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from toolkit.benchmark import BenchResult, Load, bench  # noqa: E402
from toolkit.host.host import Host  # noqa: E402
from toolkit.moves.profile import ProfileCapture  # noqa: E402
from toolkit.observe.telemetry import GpuTelemetry, simulated_telemetry_command  # noqa: E402
from toolkit.server.launch import launch  # noqa: E402
from toolkit.server.server import Server  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402
from toolkit.stats import mean_interval  # noqa: E402


def telemetry_overhead(server: Server, make_sampler: Callable[[], GpuTelemetry], run: Callable[[Server], BenchResult],
                       *, rounds: int = 4) -> list[dict[str, Any]]:
    """``rounds`` pairs of runs in ABBA order; one row per run: round, sampling, output tok/s, samples."""
    rows = []
    order = [(True, False) if r % 2 == 0 else (False, True) for r in range(rounds)]
    for round_no, pair in enumerate(tqdm(order, desc="telemetry overhead", unit="round")):
        for sampling in pair:
            sampler = make_sampler() if sampling else None
            if sampler is not None:
                sampler.start()
            try:
                result = run(server)
            finally:
                samples = sampler.stop() if sampler is not None else []
            rows.append({"round": round_no, "sampling": sampling, "output_throughput":
                         result.summary["output_throughput"], "samples": len(samples),
                         "failed": result.summary.get("failed", 0)})
    return rows


def overhead_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Medians with and without sampling, and the paired cost: per round (off - on) / off, mean and 95 % t-interval.

    Positive cost: sampling made the server slower. The pairs share a round's conditions (ABBA),
    so their differences carry less of the shared machine's drift than the medians do.
    """
    on = [r["output_throughput"] for r in rows if r["sampling"]]
    off = [r["output_throughput"] for r in rows if not r["sampling"]]
    median_on, median_off = statistics.median(on), statistics.median(off)
    spread = statistics.pstdev(off) / median_off if len(off) > 1 and median_off else float("nan")
    rounds = sorted({r["round"] for r in rows})
    paired = []
    for number in rounds:
        pair = {r["sampling"]: r["output_throughput"] for r in rows if r["round"] == number}
        if True in pair and False in pair and pair[False]:
            paired.append(100.0 * (pair[False] - pair[True]) / pair[False])
    cost, low, high = mean_interval(paired)
    return {"tok_s_sampling": median_on, "tok_s_without": median_off,
            "overhead_pct": 100.0 * (median_off - median_on) / median_off if median_off else float("nan"),
            "paired_cost_pct": cost, "paired_cost_ci95_low": low, "paired_cost_ci95_high": high,
            "run_to_run_cv_pct": 100.0 * spread, "rounds": len(on)}


def profile_capture_times(server: Server, run: Callable[[Server], BenchResult], out_dir: Path, *, captures: int = 2,
                          **options: Any) -> list[dict[str, Any]]:
    """Capture ``captures`` profiles around one benchmark each; time to fetched-and-summarised traces."""
    rows = []
    for n in tqdm(range(captures), desc="profile captures", unit="capture"):
        with ProfileCapture(server, label=f"capture-{n}", out_dir=out_dir, **options) as capture:
            started = time.time()
            run(server)
            window = time.time() - started
        stopped_to_done = time.time() - started - window
        result = capture.result
        assert result is not None
        began = time.perf_counter()
        table = result.kernels()
        summarise_s = time.perf_counter() - began
        rows.append({"capture": n, "window_s": window, "capture_s": result.capture_s,
                     "stop_to_fetched_s": stopped_to_done, "summarise_s": summarise_s,
                     "trace_bytes": sum(f.size_bytes for f in result.files if f.local_name),
                     "kernel_calls": int(table["calls"].sum()) if len(table) else 0})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="ABBA rounds (two runs each)")
    parser.add_argument("--interval-ms", type=int, default=200, help="sampling interval")
    parser.add_argument("--num-prompts", type=int, default=4)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--profiles", type=int, default=2, help="profile captures to time")
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)

    host = Host.local()
    spec = ServerSpec.simulator(tp=args.tp, port=free_port(), host="127.0.0.1", sim_startup_s=0.5).with_flags({
        "--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2, "--speculative-eagle-topk": 1,
        "--speculative-num-draft-tokens": 3, "--speculative-attention-mode": "decode"})
    load = Load(num_prompts=args.num_prompts, max_concurrency=args.concurrency, input_len=32,
                output_len=args.output_len)
    work = Path(tempfile.mkdtemp(prefix="observe-costs-"))
    with launch(host, spec, log_dir=str(work)) as server:
        server.wait_ready(timeout_s=120)
        command = simulated_telemetry_command(sys.executable, f"http://127.0.0.1:{spec.port}", args.interval_ms)
        rows = telemetry_overhead(server, lambda: GpuTelemetry(host, kind="simulated", command=command,
                                                               interval_ms=args.interval_ms),
                                  lambda server: bench(server, load, progress=False),
                                  rounds=args.rounds)
        captures = profile_capture_times(server, lambda server: bench(server, load.replace(num_prompts=1), progress=False),
                                         work / "profiles",
                                         captures=args.profiles, remote_dir=str(work / "remote"))
    summary = overhead_summary(rows)
    for row in rows:
        print(json.dumps(row))
    for row in captures:
        print(json.dumps(row))
    print(f"\ntelemetry ({args.interval_ms} ms, simulated stand-in): {summary['tok_s_sampling']:.1f} tok/s sampling vs "
          f"{summary['tok_s_without']:.1f} without (medians); paired cost {summary['paired_cost_pct']:+.1f}% "
          f"[{summary['paired_cost_ci95_low']:+.1f}, {summary['paired_cost_ci95_high']:+.1f}] (95% t, "
          f"{summary['rounds']} ABBA rounds; run-to-run CV without sampling {summary['run_to_run_cv_pct']:.1f}%)")
    print("profile capture (start -> traces fetched): " + ", ".join(f"{c['capture_s']:.2f} s" for c in captures)
          + "; after the window: " + ", ".join(f"{c['stop_to_fetched_s']:.2f} s" for c in captures))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"overhead": rows, "summary": summary, "captures": captures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
