"""Tokens/s of the real CPU server (`transformers serve`, tiny random Llama), CB off/on x concurrency.

Why: the simulator cannot show that a flag changes a real engine's throughput; this does, in
about a minute on two cores. It builds the tiny model if needed (in .venv-cpu), starts one
server per mode on a free loopback port, measures each (mode, concurrency) cell with the
toolkit's own client (`toolkit.benchmark.bench`: vLLM's metric definitions, docs/metrics.md),
round after round, stops the servers, and prints one JSON line per cell and a median table.

    .venv/bin/python benchmarks/real_server.py                   # CB off/on x concurrency 1,4, 3 rounds
    .venv/bin/python benchmarks/real_server.py --modes on --concurrency 1,2,4,8 --output-len 128
    .venv/bin/python benchmarks/real_server.py --hidden-size 256 --layers 4  # a heavier tiny model

`ignore_eos` is not sent: transformers serve rejects unknown fields with HTTP 422. The tiny
model has no EOS token in its generation config, so every request still generates exactly
`--output-len` tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sim_process import free_port  # noqa: E402

from toolkit.benchmark import Load, bench  # noqa: E402
from toolkit.testbeds.realserver import TinyModelConfig, ensure_tiny_model, serve_env, transformers_serve_argv  # noqa: E402


@contextmanager
def running_server(
    argv: list[str], env: dict[str, str], log_path: Path, ready_timeout_s: float
) -> Iterator[str]:
    """Start the server in its own process group; yield its URL once the port accepts; kill the group.

    The port is bound only after the forced model has loaded, so accepting means ready.
    """
    url = f"http://127.0.0.1:{argv[argv.index('--port') + 1]}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode} before ready; log: {log_path}")
            try:
                with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"server not ready after {ready_timeout_s}s; log: {log_path}"
                    ) from None
                time.sleep(0.2)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


KEYS = ("output_throughput", "median_ttft_ms", "median_tpot_ms", "completed", "failed", "duration")


def measure(
    url: str, *, num_prompts: int, concurrency: int, input_len: int, output_len: int
) -> dict[str, float]:
    """One cell through the toolkit's bench client; a failed request is an error here, not a data point."""
    result = bench(url,
                   Load(num_prompts=num_prompts, max_concurrency=concurrency, input_len=input_len,
                        output_len=output_len, ignore_eos=False),
                   progress=False)
    summary = {key: result.summary[key] for key in KEYS}
    if summary["failed"]:
        raise RuntimeError(f"{summary['failed']} requests failed: {result.errors}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=None, help="default: out/tiny-llama-<hidden>x<layers>")
    parser.add_argument("--venv", default=".venv-cpu", help="the venv with torch and transformers[serving]")
    parser.add_argument("--modes", default="off,on", help="continuous batching: off,on")
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--num-prompts", type=int, default=16)
    parser.add_argument("--input-len", type=int, default=16, help="words per prompt")
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the table shows the median")
    parser.add_argument("--omp-num-threads", type=int, default=1)
    parser.add_argument("--hidden-size", type=int, default=TinyModelConfig.hidden_size)
    parser.add_argument("--layers", type=int, default=TinyModelConfig.layers)
    args = parser.parse_args(argv)

    config = TinyModelConfig(hidden_size=args.hidden_size, layers=args.layers)
    venv = Path(args.venv)
    model_dir = Path(args.model_dir or f"out/tiny-llama-{config.hidden_size}x{config.layers}")
    model_dir = ensure_tiny_model(model_dir, python=venv / "bin" / "python", config=config).resolve()
    env = serve_env(omp_num_threads=args.omp_num_threads)
    log_dir = Path(tempfile.mkdtemp(prefix="real-server-bench-"))
    modes = args.modes.split(",")
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    cells: dict[tuple[str, int], list[dict[str, float]]] = {}
    with ExitStack() as stack:
        # All servers up at once (an idle one costs no CPU) and cells interleaved round by round, so
        # that other tenants' load on a shared machine falls on every mode alike.
        urls = {}
        for mode in modes:
            serve = transformers_serve_argv(
                model_dir,
                port=free_port(),
                continuous_batching=mode == "on",
                launcher=(str(venv / "bin" / "transformers"), "serve"),
            )
            print("$", " ".join(serve), file=sys.stderr)
            urls[mode] = stack.enter_context(running_server(serve, env, log_dir / f"cb-{mode}.log", 180))
        for round_no in range(args.repeat):
            for concurrency in concurrencies:
                for mode in modes:
                    cell = measure(
                        urls[mode],
                        num_prompts=args.num_prompts,
                        concurrency=concurrency,
                        input_len=args.input_len,
                        output_len=args.output_len,
                    )
                    cells.setdefault((mode, concurrency), []).append(cell)
                    row = {"round": round_no, "continuous_batching": mode, "concurrency": concurrency, **cell}
                    print(json.dumps(row), flush=True)

    print(
        f"\n{config}, OMP_NUM_THREADS={args.omp_num_threads}, {args.num_prompts} prompts x {args.output_len}"
    )
    print(f"tokens, median of {args.repeat} rounds [min-max]\n")
    print("| CB | concurrency | output tok/s | median TTFT ms | median TPOT ms |")
    print("|---|---|---|---|---|")
    for (mode, concurrency), runs in sorted(cells.items(), key=lambda item: (item[0][1], item[0][0])):
        tok_s = [run["output_throughput"] for run in runs]
        print(
            f"| {mode} | {concurrency} | {statistics.median(tok_s):.0f} [{min(tok_s):.0f}-{max(tok_s):.0f}] "
            f"| {statistics.median(run['median_ttft_ms'] for run in runs):.1f} "
            f"| {statistics.median(run['median_tpot_ms'] for run in runs):.2f} |"
        )
    print(f"\nserver logs in {log_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
