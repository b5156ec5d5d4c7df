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
  concurrency 8 (``--concurrency 8,64``: each in turn), greedy, ``ignore_eos``, the prefix cache flushed
  before each run;
- ``profile``: a torch profile of a short run, and its kernel table;
- ``fail``: a start that cannot fit its KV cache (``--gpu-memory-utilization 0.02``), timed to the error;
- ``graphs``: CUDA graphs on vs ``--enforce-eager``, a recorded ``tk.compare``;
- ``diagnose``: the same pair through ``tk.diagnose`` (issue 27): A B B A launches, a profile of each side,
  the differences ranked (the comparison is recorded as the diagnosis step; it replaces ``graphs`` on the GPU);
- ``notebook``: notebook 02 executed by papermill with vLLM parameters only.

The engine's particulars (launch flags, environment, typo, failing start, CUDA graphs off, reference client)
are one ``Engine`` value: ``VLLM`` here; ``benchmarks/field_sglang.py`` runs the same stages on SGLang 0.5.17
with its own (and ``keep_going``: a failed stage is kept in ``figures.json`` and the next one runs).

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
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
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


@dataclass(frozen=True)
class Engine:
    """What the battery needs to know of one engine release; the stages are the same for every engine."""

    name: str  # "vllm" or "sglang": the ServerSpec constructor and the simulator's engine
    release: str  # the release on the GPU machine, and the one the simulator imitates
    env: Mapping[str, str]  # every launch's environment (NCCL_ALGO and the marker included)
    flags: Mapping[str, object]  # every real launch's flags
    typo: Mapping[str, object]  # a misspelled flag the flag check must catch
    fail_flags: Mapping[str, object]  # a start that cannot fit its KV cache
    sim_fail_flags: Mapping[str, object]  # the same start, as the simulator is told it
    eager_flags: Mapping[str, object]  # CUDA graphs off
    python_hint: str  # the engine's interpreter on the GPU machine
    stages: tuple[str, ...] = STAGES
    profile_at_launch: bool = False  # vLLM: the trace folder is a launch flag (--profiler-config)
    keep_going: bool = False  # a failed stage is kept in the figures and the next stage runs
    sim_takes_flags: bool = False  # the simulator is launched with the real flags too (its parser checks them)
    # the engine's own bench client as words and its tokenizer, when not vLLM's (the Field is given)
    reference_client: Callable[[Any], tuple[list[str], str | None]] | None = None

    @property
    def title(self) -> str:
        return f"{'vLLM' if self.name == 'vllm' else 'SGLang'} {self.release}"


VLLM = Engine("vllm", "0.25.0", {**ENV, "VLLM_LOG_STATS_INTERVAL": "1"},
              {"--max-model-len": 2048, "--gpu-memory-utilization": 0.35}, {"--max-modle-len": 2048},
              {"--gpu-memory-utilization": 0.02}, {"--sim-fault": "oom"}, {"--enforce-eager": True},
              "/tmp/vv/bin/python", profile_at_launch=True)


class Field:
    """The run's shared state: where things go, the journal, the timings and commands of this call."""

    def __init__(self, args: argparse.Namespace, engine: Engine = VLLM) -> None:
        self.args = args
        self.engine = engine
        self.work = Path(args.work)
        self.out = Path(args.out)
        self.work.mkdir(parents=True, exist_ok=True)
        self.out.mkdir(parents=True, exist_ok=True)
        self.journal = tk.Journal(self.work / "field.sqlite", investigation=f"{engine.title} field test", resume=True)
        self.host = tk.Host.local()
        self.timings: dict[str, Any] = _load(self.work / "timings.json")
        self.commands: list[str] = []
        self.figures: dict[str, Any] = _load(self.work / "figures.json")

    def spec(self, port: int, **flags: object) -> tk.ServerSpec:
        engine, extra = self.engine, dict(self.args.flags)
        if self.args.simulate:
            real = dict(engine.flags) if engine.sim_takes_flags else {}
            spec = tk.ServerSpec.simulator(engine.name, tp=1, port=port, host="127.0.0.1",
                                           sim_engine_version=engine.release, sim_startup_s=2.0, sim_warmup_s=0.5,
                                           **{**real, **extra, **flags})
            return spec.with_env(dict(engine.env))
        make = tk.ServerSpec.vllm if engine.name == "vllm" else tk.ServerSpec.sglang
        spec = make(self.args.model, python=self.args.python, port=port, host="127.0.0.1",
                    **{**engine.flags, **extra, **flags})
        return spec.with_env(dict(engine.env))

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
        for path in sorted(self.work.glob("agreement*.csv")):
            shutil.copy2(path, self.out / path.name)
        for name in ("field.sqlite", "timings.json", "figures.json", "commands.txt", "kernels.csv",
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
                tk.validate_spec(field.host, spec.with_flags(dict(field.engine.typo)))
                caught = "NOT caught"
            except tk.errors.InvalidFlag as exc:
                caught = exc.message
        field.keep("typo", caught)
        step.note(f"typo {' '.join(field.engine.typo)}: {caught}")
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
def reference_command(field: Field) -> tuple[list[str], str | None]:
    """The engine's own benchmark client as words, and the tokenizer to give it (None: the model's)."""
    args = field.args
    if field.engine.reference_client is not None:
        return field.engine.reference_client(field)
    if args.reference_bench:
        return args.reference_bench.split(), args.tokenizer
    if args.simulate:
        return [str(PEERS / "venv-vllm" / "bin" / "python"), str(REPO.parent / "shared" / "peers" /
                                                                "vllm_bench_serve.py")], str(PEERS / "tok")
    return [str(Path(args.python).parent / "vllm"), "bench", "serve"], None


def bench(field: Field, server: tk.Server) -> None:
    args = field.args
    client = "vllm bench serve" if field.engine.name == "vllm" else "sglang.bench_serving"
    with field.journal.step("agreement", f"tk.bench vs {client} on one dataset file, AB/BA rounds",
                            spec=server.spec, host=field.host.name) as step:
        server.wait_ready(timeout_s=600)
        command, tokenizer = reference_command(field)  # first: a client that cannot start fails the stage at once
        fitted = tk.bench(server,
                          tk.Load(num_prompts=args.prompts, input_len=256, output_len=128, max_concurrency=8),
                          progress=False)  # prompts fitted to 256 tokens by the server's tokenizer
        dataset = field.work / "prompts.jsonl"
        lines = ({"prompt": r.prompt, "output_tokens": r.output_len} if field.engine.name == "vllm" else
                 {"conversations": [{"role": "user", "content": r.prompt}, {"role": "assistant", "content": "ok"}]}
                 for r in fitted.workload.requests)  # each client's custom shape; tk.bench reads both
        dataset.write_text("".join(json.dumps(line) + "\n" for line in lines))
        reference = {"vllm_bench" if field.engine.name == "vllm" else "sglang_bench": command}
        for conc in args.concurrency:  # agreement.csv at 8 (as before), agreement-c64.csv beside it
            suffix = "" if conc == 8 else f"_c{conc}"
            with field.timed("agreement" + suffix):
                result = tk.agreement(server, str(dataset), rounds=args.rounds, num_prompts=args.prompts,
                                      max_concurrency=conc, output_len=128, tokenizer=tokenizer, **reference)
            field.commands += list(result.commands)
            result.ratios.to_csv(field.work / f"agreement{suffix.replace('_', '-')}.csv", index=False)
            field.keep("agreement" + suffix, result.ratios.to_dict("records"))
            field.keep("agreement_runs" + suffix, result.runs.to_dict("records"))
            step.note(f"concurrency {conc}: {result}\n\n" + result.runs.to_string(index=False))


# ---- profile ------------------------------------------------------------------------------------
def profile(field: Field, server: tk.Server) -> None:
    with field.journal.step("profile", "a torch profile of a short run, and its kernel table", spec=server.spec,
                            host=field.host.name) as step:
        server.wait_ready(timeout_s=600)
        label = f"{field.engine.name} {field.engine.release} decode"
        with field.timed("profile"), tk.profile(server, label=label, journal=field.journal, step=step,
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
    engine = field.engine
    spec = field.spec(field.args.port + 1, **(engine.sim_fail_flags if field.args.simulate else engine.fail_flags))
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
    eager = spec.with_flags(dict(field.engine.eager_flags))
    off = " ".join(field.engine.eager_flags)
    field.commands += [spec.command(), eager.command()]
    with field.timed("graphs"):
        result = tk.compare(field.host, spec, eager, launches="reused", kind="cuda_graphs",
                            title=f"CUDA graphs on vs {off}", labels=("cuda graphs", "eager"),
                            expect="a_faster",
                            plan=tk.Plan(repeats=field.args.rounds, journal=field.journal, progress=False,
                                         bench=tk.Load(num_prompts=field.args.prompts, max_concurrency=8,
                                                       input_len=256, output_len=128)))
    field.keep("graphs", str(result).splitlines()[:6])


def diagnose(field: Field) -> None:
    spec = field.spec(field.args.port + 3)
    eager = spec.with_flags(dict(field.engine.eager_flags))
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


def preflight(field: Field) -> None:
    """What the machine lacks, said before minutes are spent: the engine's interpreter, a C compiler (Triton
    builds its launcher stubs with one at the first kernel), nvcc (SGLang's JIT KV-store kernel; it falls back)."""
    python = Path(field.args.python)
    if not python.exists():
        raise SystemExit(f"[field] {python} does not exist: run the engine's setup script first "
                         f"(docs/real-gpu/{field.engine.name}/README.md)")
    tools = {name: shutil.which(name) for name in ("gcc", "cc", "nvcc", "nvidia-smi")}
    field.keep("machine_tools", tools)
    if not (tools["gcc"] or tools["cc"]):
        print("[field] WARNING: no gcc or cc on PATH: Triton cannot build its launcher; expect the engine to die at "
              "its first kernel (set CC to a compiler)", flush=True)


def run_stage(field: Field, stage: str, run: Callable[[], None]) -> bool:
    """One stage, timed; with ``keep_going`` a failure is kept in the figures (its last lines) and the next stage
    runs. True when it succeeded."""
    with field.timed(stage + "_stage"):
        if not field.engine.keep_going:
            run()
            return True
        try:
            run()
            return True
        except Exception as exc:  # noqa: BLE001 - a stage's failure is a finding; the later stages still run
            message = exc.message if isinstance(exc, tk.ToolkitError) else str(exc)
            evidence = list(exc.evidence)[-8:] if isinstance(exc, tk.ToolkitError) else []
            field.keep(f"{stage}_failed", {"error": type(exc).__name__, "message": message[:800],
                                           "evidence": evidence, "where": traceback.format_exc().splitlines()[-6:]})
            print(f"[field] STAGE {stage} FAILED: {type(exc).__name__}: {message[:300]}", flush=True)
            return False


def main(argv: list[str] | None = None, engine: Engine = VLLM, description: str | None = None) -> int:
    parser = argparse.ArgumentParser(description=description or __doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", default="basics", help=f"comma-separated, of {', '.join(engine.stages)}, or all")
    parser.add_argument("--simulate", action="store_true", help=f"the simulator imitating {engine.title}, not it")
    parser.add_argument("--python", default=None, help=f"the engine's interpreter (the GPU machine: {engine.python_hint})")
    parser.add_argument("--model", default="/tmp/m")
    parser.add_argument("--work", default=f"/tmp/field{'' if engine.name == 'vllm' else '-' + engine.name}",
                        help="the journal and work files, kept between calls")
    parser.add_argument("--out", required=True, help="where this call's products are copied ($OUT)")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--concurrency", type=lambda v: [int(c) for c in v.split(",")], default=[8],
                        help="bench stage: the agreement's concurrencies, comma-separated (default 8)")
    parser.add_argument("--flags", type=json.loads, default={},
                        help='JSON of launch flags added to every launch, e.g. \'{"--disable-cuda-graph": true}\'')
    parser.add_argument("--reference-bench", "--vllm-bench", default=None,
                        help="the engine's own bench client command (default: beside --python)")
    parser.add_argument("--tokenizer", default=None, help="--tokenizer for that client (default: the model)")
    args = parser.parse_args(argv)
    stages = list(engine.stages) if args.stage == "all" else [s.strip() for s in args.stage.split(",") if s.strip()]
    unknown = [s for s in stages if s not in engine.stages]
    if unknown:
        parser.error(f"unknown stage {', '.join(unknown)}; choose from {', '.join(engine.stages)} or all")
    if not args.simulate and args.python is None:
        parser.error(f"--python is required without --simulate (the GPU machine: {engine.python_hint})")
    field = Field(args, engine)
    field.commands.append(" ".join([sys.executable, *sys.argv]))
    failed: list[str] = []
    try:
        if engine.keep_going and not args.simulate:
            preflight(field)
        served = [s for s in stages if s in SERVED]
        if served:
            spec = field.spec(args.port, **({"--profiler-config": json.dumps(
                {"profiler": "torch", "torch_profiler_dir": str(field.work / "traces")})}
                if "profile" in served and engine.profile_at_launch else {}))
            field.commands.append(spec.command())
            if "basics" in served and not run_stage(field, "flag_check", lambda: flag_check(field, spec)):
                failed.append("flag_check")
            with field.timed("launch_to_stop"), tk.launch(field.host, spec) as server:
                steps: dict[str, Callable[[Field, tk.Server], None]] = {"basics": basics, "bench": bench,
                                                                         "profile": profile}
                for stage in served:
                    if not run_stage(field, stage, partial(steps[stage], field, server)):
                        failed.append(stage)
        for stage, run in (("fail", fail), ("graphs", graphs), ("diagnose", diagnose), ("notebook", notebook)):
            if stage in stages and not run_stage(field, stage, partial(run, field)):
                failed.append(stage)
    finally:
        field.save()
    if failed:
        print(f"[field] failed stages: {', '.join(failed)} (figures.json says why)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
