"""The field test on real vLLM 0.25.0 (issue 23), through the public API only, in stages that fit a remote command.

Every stage shares one journal in ``--work`` (kept between calls) and copies the products (journal,
post-mortem with its figures, kernel table, agreement table, executed notebook, ``commands.txt``,
``timings.json``) into ``--out``. Stages (comma-separated; ``basics,bench,profile`` share one launch):

- ``basics``: the flag check with a typo (caught, with its suggestion) and a second check timed in a
  fresh process (read from the disk cache); launch to ready with its phases; the env check of every
  engine process (``NCCL_ALGO=Ring`` and a marker, with the source that decided each row); one observed
  run (prefix cache flushed and its state recorded, nvidia-smi telemetry, ``/metrics`` scraped, greedy
  outputs compared with a reference taken before it);
- ``bench``: one dataset file of 64 prompts of 256 tokens (fitted with the server's tokenizer) with
  128 output tokens, then ``tk.agreement`` against ``vllm bench serve`` on that file: 3 AB/BA rounds at
  concurrency 8, greedy, ``ignore_eos``, the prefix cache flushed before each run;
- ``profile``: a torch profile of a short run, and its kernel table;
- ``fail``: a start that cannot fit its KV cache (``--gpu-memory-utilization 0.02``), timed to the error;
- ``graphs``: CUDA graphs on vs ``--enforce-eager``, a recorded ``tk.compare``;
- ``diagnose``: the same pair through ``tk.diagnose`` (issue 27): A B B A launches, a profile of each side,
  the differences ranked (the comparison is recorded as the diagnosis step; it replaces ``graphs`` on the GPU);
- ``notebook``: notebook 02 executed by papermill with vLLM parameters only.

On the GPU machine (docs/real-gpu/vllm/README.md)::

    /tmp/vv/bin/python benchmarks/field_vllm.py --python /tmp/vv/bin/python --model /tmp/m --out $OUT --stage basics,bench,profile

Here, against the simulator imitating vLLM 0.25.0 (the vLLM client from ../shared/peers when it is built)::

    .venv/bin/python benchmarks/field_vllm.py --simulate --work /tmp/field-sim --out out/field-sim --stage basics
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import toolkit as tk  # noqa: E402

STAGES = ("basics", "bench", "profile", "fail", "graphs", "diagnose", "notebook")
SERVED = ("basics", "bench", "profile")  # these share one launch when run in one call
ENV = {"VLLM_USE_FLASHINFER_SAMPLER": "0",  # FlashInfer is not carried to the GPU machine (../shared/gpu)
       "NCCL_NVLS_ENABLE": "0", "NCCL_ALGO": "Ring", "FIELD_MARKER": "issue-23",
       "VLLM_SERVER_DEV_MODE": "1"}  # POST /reset_prefix_cache: vllm 0.25.0 vllm/entrypoints/openai/api_server.py:198-201
EXPECTED = {"NCCL_ALGO": "Ring", "FIELD_MARKER": "issue-23"}
PEERS = Path("/tmp/peers")  # built by ../shared/peers/setup_all.sh (the vLLM 0.33 client, its tokenizer)


class Field:
    """The run's shared state: where things go, the journal, the timings and commands of this call."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.work)
        self.out = Path(args.out)
        self.work.mkdir(parents=True, exist_ok=True)
        self.out.mkdir(parents=True, exist_ok=True)
        self.journal = tk.Journal(self.work / "field.sqlite", investigation="vLLM 0.25.0 field test", resume=True)
        self.host = tk.Host.local()
        self.timings: dict[str, Any] = _load(self.work / "timings.json")
        self.commands: list[str] = []
        self.figures: dict[str, Any] = _load(self.work / "figures.json")

    def spec(self, port: int, **flags: object) -> tk.ServerSpec:
        if self.args.simulate:
            spec = tk.ServerSpec.simulator("vllm", tp=1, port=port, host="127.0.0.1", sim_engine_version="0.25.0",
                                           sim_startup_s=2.0, sim_warmup_s=0.5, **flags)
        else:
            spec = tk.ServerSpec.vllm(self.args.model, python=self.args.python, port=port, host="127.0.0.1",
                                      **{"--max-model-len": 2048, "--gpu-memory-utilization": 0.35, **flags})
        return spec.with_env({**ENV, "VLLM_LOG_STATS_INTERVAL": "1"})

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.timings[name] = round(time.monotonic() - start, 2)
            print(f"[field] {name}: {self.timings[name]:.1f} s", flush=True)

    def keep(self, name: str, value: Any) -> None:
        self.figures[name] = value
        print(f"[field] {name}: {value}", flush=True)

    def save(self) -> None:
        (self.work / "timings.json").write_text(json.dumps(self.timings, indent=2))
        (self.work / "figures.json").write_text(json.dumps(self.figures, indent=2, default=str))
        with open(self.work / "commands.txt", "a", encoding="utf-8") as f:
            f.write("".join(f"{c}\n" for c in self.commands))
        for name in ("field.sqlite", "timings.json", "figures.json", "commands.txt", "kernels.csv", "agreement.csv",
                     "prompts.jsonl", "diagnosis.csv", "diagnosis.txt"):
            if (self.work / name).exists():
                shutil.copy2(self.work / name, self.out / name)
        if (self.work / "notebook").exists():
            shutil.copytree(self.work / "notebook", self.out / "notebook", dirs_exist_ok=True)
        tk.report.write(self.journal, self.out / "postmortem")


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


# ---- basics ----------------------------------------------------------------------------------
def flag_check(field: Field, spec: tk.ServerSpec) -> None:
    with field.journal.step("flag_check", "the flag check: a typo, then a second check from the cache",
                            spec=spec, host=field.host.name) as step:
        with field.timed("flag_check_typo"):
            try:
                tk.validate_spec(field.host, spec.with_flags({"--max-modle-len": 2048}))
                caught = "NOT caught"
            except tk.errors.InvalidFlag as exc:
                caught = exc.message
        field.keep("typo", caught)
        step.note(f"typo --max-modle-len: {caught}")
        code = ("import sys, time; sys.path.insert(0, sys.argv[1]); import toolkit as tk; import json; "
                "spec = tk.ServerSpec.from_dict(json.loads(sys.argv[2])); t = time.monotonic(); "
                "tk.validate_spec(tk.Host.local(), spec); print(f'{time.monotonic() - t:.3f}')")
        with field.timed("flag_check_second_process"):
            ran = subprocess.run([sys.executable, "-c", code, str(REPO), json.dumps(spec.to_dict())],
                                 capture_output=True, text=True, timeout=300, check=False)
        second = ran.stdout.strip().splitlines()[-1] if ran.returncode == 0 and ran.stdout.strip() else ran.stderr[-300:]
        field.keep("flag_check_second_s", second)
        step.note(f"second check of the same release in a fresh process: {second} s (--help read from the disk cache)")


def basics(field: Field, server: tk.Server) -> None:
    with field.journal.step("baseline", "launch to ready, env check, one observed run", spec=server.spec,
                            host=field.host.name) as step:
        with field.timed("ready"):
            report = server.wait_ready(timeout_s=600)
        step.record(report)
        field.keep("ready_s", report.time_to_ready_s)
        field.keep("phases", list(report.phase_names))
        with field.timed("env_check"):
            env = tk.env_report(server, EXPECTED, journal=field.journal, title="NCCL_ALGO and a marker, every process")
        rows = env.frame[["process", "variable", "actual", "status", "source"]]
        field.keep("env", rows.to_dict("records"))
        step.note(str(env) + "\n" + rows.to_string(index=False))
        reference = tk.greedy_outputs(server, max_tokens=32)
        watch = tk.observed(tk.Load(num_prompts=16, max_concurrency=4, input_len=256, output_len=128), cache="flush", telemetry="auto", metrics_interval_s=0.5,
                            reference=reference)
        with field.timed("observed_run"):
            result = watch(server)
        run_id = step.record(result)
        observation = watch.observation(result)
        field.keep("observation", observation.note() if observation is not None else None)
        watch.record(step, result, run_id)
        field.keep("observed_output_tok_s", result.summary.get("output_throughput"))


# ---- bench: agreement with vllm bench serve ----------------------------------------------------
def vllm_bench_command(field: Field) -> tuple[list[str], str | None]:
    if field.args.vllm_bench:
        return field.args.vllm_bench.split(), field.args.tokenizer
    if field.args.simulate:
        return [str(PEERS / "venv-vllm" / "bin" / "python"), str(REPO.parent / "shared" / "peers" /
                                                                "vllm_bench_serve.py")], str(PEERS / "tok")
    return [str(Path(field.args.python).parent / "vllm"), "bench", "serve"], None


def bench(field: Field, server: tk.Server) -> None:
    args = field.args
    with field.journal.step("agreement", "tk.bench vs vllm bench serve on one dataset file, AB/BA rounds",
                            spec=server.spec, host=field.host.name) as step:
        server.wait_ready(timeout_s=600)
        fitted = tk.bench(server,
                          tk.Load(num_prompts=args.prompts, input_len=256, output_len=128, max_concurrency=8),
                          progress=False)  # prompts fitted to 256 tokens by the server's tokenizer
        dataset = field.work / "prompts.jsonl"
        dataset.write_text("".join(json.dumps({"prompt": r.prompt, "output_tokens": r.output_len}) + "\n"
                                   for r in fitted.workload.requests))
        command, tokenizer = vllm_bench_command(field)
        with field.timed("agreement"):
            result = tk.agreement(server, str(dataset), vllm_bench=command, rounds=args.rounds,
                                  num_prompts=args.prompts, max_concurrency=8, output_len=128, tokenizer=tokenizer)
        field.commands += list(result.commands)
        result.ratios.to_csv(field.work / "agreement.csv", index=False)
        field.keep("agreement", result.ratios.to_dict("records"))
        field.keep("agreement_runs", result.runs.to_dict("records"))
        step.note(str(result) + "\n\n" + result.runs.to_string(index=False))


# ---- profile ------------------------------------------------------------------------------------
def profile(field: Field, server: tk.Server) -> None:
    with field.journal.step("profile", "a torch profile of a short run, and its kernel table", spec=server.spec,
                            host=field.host.name) as step:
        server.wait_ready(timeout_s=600)
        with field.timed("profile"), tk.profile(server, label="vllm 0.25 decode", journal=field.journal, step=step,
                                                timeout_s=240) as capture:
            tk.bench(server, tk.Load(num_prompts=8, max_concurrency=4, input_len=256, output_len=64),
                     progress=False)
        assert capture.result is not None
        kernels = capture.result.kernels(top=20)
        kernels.to_csv(field.work / "kernels.csv", index=False)
        field.keep("profile_files", [f.local_name for f in capture.result.files])
        field.keep("kernels_top5", kernels.head(5).to_dict("records"))


# ---- fail, graphs, notebook ----------------------------------------------------------------------
def fail(field: Field) -> None:
    flags: dict[str, object] = {"--sim-fault": "oom"} if field.args.simulate else {"--gpu-memory-utilization": 0.02}
    spec = field.spec(field.args.port + 1, **flags)
    field.commands.append(spec.command())
    start = time.monotonic()
    try:
        with field.journal.step("risky_start", "a KV cache that cannot fit", spec=spec, host=field.host.name) as step, \
                tk.launch(field.host, spec) as server:
            step.record(server.wait_ready(timeout_s=600))
        field.keep("fail", "the server became ready: nothing failed")
    except tk.ToolkitError as exc:
        field.keep("fail", {"error": type(exc).__name__, "message": exc.message[:500],
                            "evidence": list(exc.evidence)[-6:], "reported_after_s": round(time.monotonic() - start, 1)})


def graphs(field: Field) -> None:
    spec = field.spec(field.args.port + 2)
    eager = spec.with_flags({"--enforce-eager": True})
    field.commands += [spec.command(), eager.command()]
    with field.timed("graphs"):
        result = tk.compare(field.host, spec, eager, launches="reused", kind="cuda_graphs",
                            title="CUDA graphs on vs --enforce-eager", labels=("cuda graphs", "eager"),
                            expect="a_faster",
                            plan=tk.Plan(repeats=field.args.rounds, journal=field.journal, progress=False,
                                         bench=tk.Load(num_prompts=field.args.prompts, max_concurrency=8,
                                                       input_len=256, output_len=128)))
    field.keep("graphs", str(result).splitlines()[:6])


def diagnose(field: Field) -> None:
    spec = field.spec(field.args.port + 3)
    eager = spec.with_flags({"--enforce-eager": True})
    field.commands += [spec.command(), eager.command()]
    with field.timed("diagnose"):
        diagnosis = tk.diagnose(field.host, fast=spec, slow=eager,
                                profile_bench=tk.Load(num_prompts=4, max_concurrency=4, input_len=64,
                                                      output_len=64),
                                plan=tk.Plan(repeats=2, journal=field.journal, progress=False,
                                             bench=tk.Load(num_prompts=16, max_concurrency=8, input_len=256,
                                                           output_len=128)))
    diagnosis.table().to_csv(field.work / "diagnosis.csv", index=False)
    (field.work / "diagnosis.txt").write_text(diagnosis.text() + "\n")
    field.keep("diagnosis", diagnosis.summary_text)
    field.keep("diagnosis_costs_s", dict(diagnosis.costs_s))


def notebook(field: Field) -> None:
    import papermill  # the notebook runner the project ships with (pyproject)

    folder = field.work / "notebook"
    folder.mkdir(exist_ok=True)
    parameters = {
        "simulate": field.args.simulate, "engine": "vllm", "python": field.args.python or sys.executable,
        "model_path": field.args.model, "tp": 1, "port": field.args.port + 10, "env": ENV,
        "flags": {} if field.args.simulate else {"--max-model-len": 2048, "--gpu-memory-utilization": 0.35},
        "change_title": "CUDA graphs off", "change_flags": {"--enforce-eager": True},
        "ab_flag": "--attention-backend", "ab_values": ["FLASH_ATTN", "TRITON_ATTN"],
        "ab_hypothesis": "the attention backend moves decode throughput",
        "risky_flags": {"--gpu-memory-utilization": 0.02}, "concurrency": 8, "input_len": 256, "output_len": 128,
        "num_prompts": 16, "repeats": 1, "journal_path": str(folder / "investigation.sqlite"),
        "out_dir": str(folder / "report"), "timeout_s": 600,
    }
    field.commands.append(f"papermill notebooks/02_investigation_template.ipynb -y '{json.dumps(parameters)}'")
    with field.timed("notebook"):
        papermill.execute_notebook(str(REPO / "notebooks" / "02_investigation_template.ipynb"),
                                   str(folder / "02_investigation_vllm.ipynb"), parameters=parameters,
                                   cwd=str(REPO), progress_bar=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", default="basics", help=f"comma-separated, of {', '.join(STAGES)}, or all")
    parser.add_argument("--simulate", action="store_true", help="the simulator imitating vLLM 0.25.0, not vLLM")
    parser.add_argument("--python", default=None, help="the engine's interpreter (the GPU machine: /tmp/vv/bin/python)")
    parser.add_argument("--model", default="/tmp/m")
    parser.add_argument("--work", default="/tmp/field", help="the journal and work files, kept between calls")
    parser.add_argument("--out", required=True, help="where this call's products are copied ($OUT)")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--vllm-bench", default=None, help="the vllm bench serve command (default: beside --python)")
    parser.add_argument("--tokenizer", default=None, help="--tokenizer for vllm bench serve (default: the model)")
    args = parser.parse_args(argv)
    stages = list(STAGES) if args.stage == "all" else [s.strip() for s in args.stage.split(",") if s.strip()]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        parser.error(f"unknown stage {', '.join(unknown)}; choose from {', '.join(STAGES)} or all")
    if not args.simulate and args.python is None:
        parser.error("--python is required without --simulate (the GPU machine: /tmp/vv/bin/python)")
    field = Field(args)
    field.commands.append(" ".join([sys.executable, *sys.argv]))
    try:
        served = [s for s in stages if s in SERVED]
        if served:
            spec = field.spec(args.port, **({"--profiler-config": json.dumps(
                {"profiler": "torch", "torch_profiler_dir": str(field.work / "traces")})} if "profile" in served else {}))
            field.commands.append(spec.command())
            if "basics" in served:
                flag_check(field, spec)
            with field.timed("launch_to_stop"), tk.launch(field.host, spec) as server:
                steps: dict[str, Callable[[Field, tk.Server], None]] = {"basics": basics, "bench": bench,
                                                                         "profile": profile}
                for stage in served:
                    with field.timed(stage + "_stage"):
                        steps[stage](field, server)
        for stage, run in (("fail", fail), ("graphs", graphs), ("diagnose", diagnose), ("notebook", notebook)):
            if stage in stages:
                with field.timed(stage + "_stage"):
                    run(field)
    finally:
        field.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
