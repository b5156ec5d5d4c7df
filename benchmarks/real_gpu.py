"""The toolkit against a real inference server on a GPU: `transformers serve`, a random ~1B Llama, one investigation.

Everything goes through the toolkit as a user would drive it (Host, ServerSpec, launch,
wait_ready, observed benchmarks, a profile, the journal, the post-mortem):

1. build a random Llama (vocab 4096, hidden 2048, 16 layers, 16 heads: ~1.1B parameters, bf16,
   initialised on the GPU) and its tokenizer, here, with `toolkit.testbeds.tiny_model`;
2. sweep `--attn-implementation` (sdpa, eager) x `--continuous-batching` (off, on), plus the
   KV caps that once killed the CB worker here, one launch each, benchmarked at two
   concurrencies with GPU telemetry from the real nvidia-smi; a configuration that fails is
   recorded with its evidence and the sweep goes on;
3. launch configurations under the profiler (`toolkit.observe.profiled`: transformers has no
   profile endpoint) and profile a short benchmark each: CB without and with its CUDA graphs
   (``--cb-use-cuda-graph``), and one request at a time: kernels, CUDA graphs or not;
4. measure what sampling costs the server (`benchmarks/observe_costs.py`, ABBA rounds);
5. write the journal, the post-mortem and `measured.json`.

On the GPU machine (see docs/real-gpu/README.md for the exact command and wheels)::

    python3 benchmarks/real_gpu.py --out $OUT/real-gpu --launcher /tmp/site/bin/transformers

On this machine's CPU server, to check the whole path in a minute (tiny model, no nvidia-smi)::

    .venv/bin/python benchmarks/real_gpu.py --out out/real-cpu --device cpu --python .venv-cpu/bin/python \\
        --launcher .venv-cpu/bin/transformers --vocab-size 1024 --hidden-size 64 --layers 2 --heads 4 --dtype float32
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path[:0] = [str(REPO / "benchmarks"), str(REPO / "tests")]

from observe_costs import overhead_summary, telemetry_overhead  # noqa: E402
from sim_process import free_port  # noqa: E402

from toolkit.benchmark import BenchResult, Load, bench  # noqa: E402
from toolkit.errors import ToolkitError  # noqa: E402
from toolkit.host.host import Host  # noqa: E402
from toolkit.journal import Journal  # noqa: E402
from toolkit.moves.observed import observed  # noqa: E402
from toolkit.moves.profile import profile, with_profiling  # noqa: E402
from toolkit.observe.telemetry import GpuTelemetry  # noqa: E402
from toolkit.report.postmortem import write  # noqa: E402
from toolkit.server.launch import launch  # noqa: E402
from toolkit.server.server import Server  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402
from toolkit.testbeds.tiny_model import TinyModelConfig, config_args, is_cached  # noqa: E402


def build_model(args: argparse.Namespace, target: Path) -> tuple[Path, float]:
    config = TinyModelConfig(args.vocab_size, args.hidden_size, args.layers, args.heads, dtype=args.dtype)
    if is_cached(target, config):
        return target, 0.0
    started = time.time()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    command = [args.python, "-m", "toolkit.testbeds.tiny_model", "build", str(target), *config_args(config),
               "--device", args.device]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, env=env, timeout=900)
    return target, time.time() - started


def base_spec(args: argparse.Namespace, model: Path, port: int) -> ServerSpec:
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false",
           "NCCL_NVLS_ENABLE": "0", "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", ""))
                                                                  if p)}
    if args.device == "cpu":
        env["OMP_NUM_THREADS"] = "1"
    spec = ServerSpec("transformers", (args.launcher, "serve", str(model)), str(model), port, python=args.python)
    return spec.with_flags({"--port": port, "--host": "127.0.0.1", "--device": args.device if args.device == "cpu"
                            else "cuda", "--dtype": args.dtype, "--log-level": "info"}).with_env(env)


def bench_call(concurrency: int, args: argparse.Namespace, output_len: int | None = None
               ) -> Callable[[Server], BenchResult]:
    # transformers serve rejects unknown fields (422): no ignore_eos; the model has no EOS anyway (tiny_model.py)
    load = Load(num_prompts=max(args.min_prompts, concurrency), max_concurrency=concurrency, input_len=64,
                output_len=output_len or args.output_len, ignore_eos=False)
    return lambda server: bench(server, load, progress=False, tokenizer=None)


# `--configs` words: ATTENTION:CB[+EXTRA], EXTRA graph (CB's CUDA graphs) or caps (the KV caps that killed the CB worker
# in an earlier run on the GPU machine, by the shared GPU notes: --cb-num-blocks 4096 --cb-max-batch-tokens 4096)
_EXTRAS: dict[str, dict[str, object]] = {
    "graph": {"--cb-use-cuda-graph": True},
    "caps": {"--cb-num-blocks": 4096, "--cb-max-batch-tokens": 4096},
}


def config_spec(base: ServerSpec, word: str) -> tuple[str, ServerSpec]:
    """``sdpa:on+graph`` -> (its label, the spec with its flags)."""
    head, _, extra = word.partition("+")
    attention, _, batching = head.partition(":")
    flags: dict[str, object] = {"--attn-implementation": attention, "--continuous-batching": batching == "on"}
    if extra:
        flags.update(_EXTRAS[extra])
    label = f"attn={attention} CB={batching}" + (f" +{extra}" if extra else "")
    return label, base.with_flags(flags)


def _check(result: Any, label: str, concurrency: int, server: Any) -> None:
    if not result.ok:
        raise ToolkitError(f"no request of the c={concurrency} run completed on {label}: {result.first_error}",
                           evidence=[f"{n} x {e}" for e, n in list(result.errors.items())[:3]] + server.log_tail(15),
                           hint="read the server log: the engine says why it answered errors")


def sweep(host: Host, journal: Journal, base: ServerSpec, args: argparse.Namespace, deadline: float) -> list[str]:
    """Each configuration as one journal step and launch; a failure is recorded and the sweep goes on."""
    outcomes = []
    telemetry = "off" if args.device == "cpu" else "nvidia-smi"
    for word in args.configs:
        label, spec = config_spec(base, word)
        if time.time() > deadline:
            outcomes.append(f"{label}: skipped (time budget)")
            continue
        started = time.time()
        try:
            with journal.step("flag_change", label, spec=spec, host=host,
                              hypothesis="sdpa beats eager attention; continuous batching scales with concurrency"
                              ) as step, launch(host, spec, log_dir=args.log_dir) as server:
                try:
                    server.wait_ready(timeout_s=args.ready_timeout_s)
                    step.record(server.readiness)
                    watch = observed(telemetry=telemetry, telemetry_interval_ms=args.interval_ms)
                    for concurrency in args.concurrency:
                        for repeat in range(args.repeats):
                            result = watch.observe(server, bench_call(concurrency, args))
                            run_id = step.record(result, run_label=f"{label} c={concurrency}", repeat=repeat)
                            watch.record(step, result, run_id)
                            _check(result, label, concurrency, server)
                finally:
                    step.record_log_lines(server.ledger.decisive())
                    said = [line for line in server.log_tail(2000) if " ERROR " in line or "Error" in line][:5]
                    if said:  # the engine's own words, which its 503 answers do not carry into the bench
                        step.note("errors in the server log:\n" + "\n".join(said))
            outcomes.append(f"{label}: ok in {time.time() - started:.0f} s")
        except ToolkitError as exc:
            outcomes.append(f"{label}: FAILED in {time.time() - started:.0f} s: {exc.message}")
        print(outcomes[-1], flush=True)
    return outcomes


def profiled(host: Host, journal: Journal, base: ServerSpec, args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    """Each ``--profiles`` configuration launched under the profiler, profiled around one short benchmark."""
    found = []
    for word in args.profiles:
        config, _, conc = word.rpartition(":c")
        label, spec = config_spec(base, config)
        concurrency = int(conc)
        spec = with_profiling(spec, str(out / "remote-traces"))
        try:
            with journal.step("note", f"profile: {label} c={concurrency} under torch.profiler", spec=spec,
                              host=host) as step, launch(host, spec, log_dir=args.log_dir) as server:
                server.wait_ready(timeout_s=args.ready_timeout_s)
                step.record(server.readiness)
                watch = observed(bench_call(concurrency, args, args.profile_tokens),
                                 telemetry="off" if args.device == "cpu" else "nvidia-smi",
                                 telemetry_interval_ms=args.interval_ms)
                watch(server)  # warm: the first requests of a launch compile and allocate
                with profile(server, label=f"{label} c={concurrency}", journal=journal, step=step,
                             timeout_s=240) as capture:
                    result = watch(server)
                run_id = step.record(result, run_label=f"profiled: {label} c={concurrency}")
                watch.record(step, result, run_id)
                assert capture.result is not None
                profile_seen = capture.result
                print(profile_seen.summary(), flush=True)
                print(profile_seen.kernels(top=8).to_string(), flush=True)
                found.append({"label": profile_seen.label, "capture_s": profile_seen.capture_s,
                              "trace_bytes": sum(f.size_bytes for f in profile_seen.files),
                              "kernel_calls": profile_seen.n_kernel_calls, "gpu_ms": profile_seen.gpu_ms,
                              "phases": profile_seen.phases().to_dict("records")})
        except ToolkitError as exc:
            found.append({"label": f"{label} c={concurrency}", "failed": exc.message})
            print(f"profile {label} FAILED: {exc}", flush=True)
    return found


def overhead(host: Host, journal: Journal, base: ServerSpec, args: argparse.Namespace) -> dict[str, Any]:
    spec = base.with_flags({"--attn-implementation": "sdpa"})
    with journal.step("note", "telemetry overhead: nvidia-smi sampling on/off, ABBA", spec=spec, host=host) as step, \
            launch(host, spec, log_dir=args.log_dir) as server:
        server.wait_ready(timeout_s=args.ready_timeout_s)
        rows = telemetry_overhead(server, lambda: GpuTelemetry(host, interval_ms=args.overhead_interval_ms),
                                  bench_call(1, args), rounds=args.overhead_rounds)
        summary = overhead_summary(rows)
        step.note("telemetry overhead (output tok/s, c=1, nvidia-smi every "
                  f"{args.overhead_interval_ms} ms): {json.dumps(rows)}\nsummary: {json.dumps(summary)}")
        return {"rows": rows, "summary": summary, "interval_ms": args.overhead_interval_ms}


def findings(journal: Journal, measured: dict[str, Any]) -> str:
    """What the measurements say, in one paragraph (numbers from the journal, failures from the sweep)."""
    results = journal.results(wide=True)
    parts = []
    for label, runs in results.groupby("label", sort=False):
        if "output_throughput" in runs:
            parts.append(f"{label}: {runs['output_throughput'].mean():.1f} tok/s")
    failed = [line for line in measured["sweep"] if "FAILED" in line]
    text = "Measured: " + "; ".join(parts) + "."
    if failed:
        text += " Failed: " + " | ".join(failed) + "."
    for seen in measured.get("profiles", []):
        if "phases" in seen:
            where = ", ".join(f"{p['phase']} {p['share_pct']:.0f}% {p['where']}" for p in seen["phases"])
            text += (f" Profile {seen['label']}: {seen['kernel_calls']} kernel calls, {seen['gpu_ms']:.1f} ms of GPU "
                     f"time ({where}), captured in {seen['capture_s']:.1f} s.")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--python", default="python3", help="the engine's interpreter (torch, transformers)")
    parser.add_argument("--launcher", default="transformers", help="the transformers console script")
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--hidden-size", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--concurrency", type=lambda s: [int(c) for c in s.split(",")], default=[1, 8])
    parser.add_argument("--configs", type=lambda s: s.split(","),
                        default=["sdpa:off", "sdpa:on", "eager:off", "eager:on", "sdpa:on+caps"])
    parser.add_argument("--profiles", type=lambda s: s.split(","), default=["sdpa:on:c8", "sdpa:on+graph:c8", "sdpa:off:c1"],
                        help="CONFIG:cN, profiled in this order (the post-mortem compares the first to the others)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per concurrency on each launch")
    parser.add_argument("--ready-timeout-s", type=float, default=120.0,
                        help="a CB worker that died answers 503 forever: the launch fails after this")
    parser.add_argument("--min-prompts", type=int, default=4)
    parser.add_argument("--output-len", type=int, default=48)
    parser.add_argument("--profile-tokens", type=int, default=24)
    parser.add_argument("--interval-ms", type=int, default=200)
    parser.add_argument("--overhead-rounds", type=int, default=5)
    parser.add_argument("--overhead-interval-ms", type=int, default=100)
    parser.add_argument("--budget-s", type=float, default=420.0, help="no new sweep launch after this")
    args = parser.parse_args(argv)
    started = time.time()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.log_dir = str(out / "logs")
    model, build_s = build_model(args, (args.model_dir or out / "model").resolve())
    host = Host.local()
    journal = Journal(out / "journal.sqlite", investigation="transformers serve on a GPU: attention x batching")
    base = base_spec(args, model, free_port())
    measured: dict[str, Any] = {"model_build_s": build_s, "command": sys.argv}
    measured["sweep"] = sweep(host, journal, base, args, started + args.budget_s)
    measured["profiles"] = profiled(host, journal, base, args, out)
    try:
        measured["overhead"] = overhead(host, journal, base, args)
    except ToolkitError as exc:
        measured["overhead"] = {"failed": exc.message}
        print(f"overhead FAILED: {exc}", flush=True)
    journal.root_cause(findings(journal, measured))
    report = write(journal, out / "report")
    measured["report_s"] = report.seconds
    measured["total_s"] = time.time() - started
    (out / "measured.json").write_text(json.dumps(measured, indent=2, default=str) + "\n")
    print(json.dumps({k: v for k, v in measured.items() if k != "profiles"}, indent=2, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
