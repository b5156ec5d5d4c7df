"""Does ``tk.bench`` measure what ``vllm bench serve`` (or SGLang's ``bench_serving``) measures? ABBA rounds.

On the first real vLLM run (issue 23) the two clients differed by 4.7 % on output tok/s with
``--temperature 0`` and by 19 % with their defaults, and nothing said which difference was real.
:func:`agreement` removes what is not the clients': both read one custom dataset file, send
``temperature=0`` and ``ignore_eos``, the prefix cache is flushed before every run, and the order
alternates by round (AB, BA, ...) so drift falls on both alike. Each figure's ratio gets a 95 %
t-interval over the rounds: one that holds 1.0 is agreement within the noise.

``vllm bench serve``'s defaults that move numbers: docs/real-gpu/vllm/README.md. SGLang's client (sglang
0.5.17 python/sglang/benchmark/serving.py) runs with ``--backend sglang-oai`` (``/v1/completions``, as
``tk.bench``), sends ``temperature=0`` and ``ignore_eos`` by default (:279-285, :2427-2437), shuffles its
file (same prompts, another order) and warms up with one request (``--warmup-requests 1``, :2575-2579).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from toolkit.benchmark import Load, bench
from toolkit.benchmark.custom_dataset import sglang_dataset_args, vllm_dataset_args
from toolkit.errors import ToolkitError
from toolkit.host.shell import join, quote_path
from toolkit.observe.cache import flush_prefix_cache
from toolkit.server.server import Server
from toolkit.stats import mean_interval

__all__ = ["AGREEMENT_FIGURES", "Agreement", "agreement", "vllm_bench_words", "sglang_bench_words"]

#: The figures compared: vLLM's result-file keys, which ``tk.bench`` summaries share (benchmark/metrics.py).
AGREEMENT_FIGURES = ("output_throughput", "request_throughput", "median_ttft_ms", "median_tpot_ms",
                     "median_itl_ms", "median_e2el_ms")
#: SGLang's result keys that differ from vLLM's (toolkit/engines/bench_names.py; sglang 0.5.17 serving.py:1798).
_SGLANG_KEYS = {"median_e2el_ms": "median_e2e_latency_ms"}


@dataclass(frozen=True)
class Agreement:
    """``runs``: one row per client run; ``ratios``: per figure, toolkit / reference and its interval."""

    runs: pd.DataFrame
    ratios: pd.DataFrame
    commands: tuple[str, ...]
    reference: str = "vllm"

    def summary(self) -> str:
        row = self.ratios.set_index("figure").loc["output_throughput"]
        client = "vllm bench serve" if self.reference == "vllm" else "sglang.bench_serving"
        return (f"toolkit / {client} over {int(row['rounds'])} ABBA rounds: output tok/s ratio "
                f"{row['ratio']:.3f} (95 % interval {row['low']:.3f}-{row['high']:.3f})")

    def __str__(self) -> str:
        return self.summary() + "\n" + self.ratios.to_string(index=False, float_format=lambda v: f"{v:.3f}")


def vllm_bench_words(vllm_bench: Sequence[str], server: Server, dataset: str, *, num_prompts: int,
                     max_concurrency: int, output_len: int, result_dir: str, result_name: str,
                     tokenizer: str | None = None) -> list[str]:
    """The ``vllm bench serve`` command (as words) that sends ``dataset``'s prompts greedily, as ``tk.bench`` does."""
    words = [*vllm_bench, "--backend", "vllm", "--endpoint", "/v1/completions", "--base-url",
             server.url.rstrip("/"), "--model", server.spec.model or "default",
             *vllm_dataset_args(dataset, output_len), "--num-prompts", str(num_prompts),
             "--max-concurrency", str(max_concurrency), "--temperature", "0", "--ignore-eos", "--disable-tqdm",
             "--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result", "--result-dir", result_dir,
             "--result-filename", result_name]
    return words + (["--tokenizer", tokenizer] if tokenizer else [])


def sglang_bench_words(sglang_bench: Sequence[str], server: Server, dataset: str, *, num_prompts: int,
                       max_concurrency: int, output_len: int, output_file: str, tokenizer: str | None = None) -> list[str]:
    """The ``sglang.bench_serving`` command (as words) that sends ``dataset``'s prompts greedily to ``/v1/completions``."""
    words = [*sglang_bench, "--backend", "sglang-oai", "--base-url", server.url.rstrip("/"), "--model",
             server.spec.model or "default", *sglang_dataset_args(dataset, output_len), "--num-prompts",
             str(num_prompts), "--max-concurrency", str(max_concurrency), "--temperature", "0", "--seed", "0",
             "--disable-tqdm", "--output-file", output_file]
    return words + (["--tokenizer", tokenizer] if tokenizer else [])


def agreement(server: Server, dataset: str, *, vllm_bench: Sequence[str] | None = None,
              sglang_bench: Sequence[str] | None = None, rounds: int = 3, num_prompts: int = 64,
              max_concurrency: int = 8, output_len: int = 128, tokenizer: str | None = None,
              flush_cache: bool = True, before_run: Callable[[], object] | None = None,
              timeout_s: float = 600.0) -> Agreement:
    """Run ``rounds`` rounds of both clients against ``server`` (AB, then BA, ...) on one dataset file.

    ``dataset`` is a custom ``.jsonl`` on the server's host *and* readable here. Give one reference
    client, as the command that runs it there: ``vllm_bench`` or ``sglang_bench``. ``runs["cache"]``
    holds the flush's outcome (vLLM flushes only with ``VLLM_SERVER_DEV_MODE=1``, else ``unknown``).

    >>> result = agreement(server, "/tmp/field/prompts.jsonl", vllm_bench=["vllm", "bench", "serve"])  # doctest: +SKIP
    >>> print(result)  # doctest: +SKIP
    """
    if rounds < 2:
        raise ValueError(f"rounds must be at least 2 for an interval, got {rounds}")
    if (vllm_bench is None) == (sglang_bench is None):
        raise ValueError("give one reference client: vllm_bench=[...] (vllm bench serve) or sglang_bench=[...] "
                         "(python -m sglang.bench_serving)")
    reference, command = ("vllm", list(vllm_bench)) if vllm_bench is not None else ("sglang", list(sglang_bench or ()))
    result_dir = f"/tmp/toolkit-agreement-{uuid.uuid4().hex[:10]}"
    server.host.run(f"mkdir -p {quote_path(result_dir)}", timeout_s=30)
    records, commands = [], []
    for k in range(rounds):
        order = ("toolkit", reference) if k % 2 == 0 else (reference, "toolkit")
        for position, client in enumerate(order):
            cache = flush_prefix_cache(server, server.release().profile).state if flush_cache else "kept"
            if before_run is not None:
                before_run()
            if client == "toolkit":
                load = Load(num_prompts=num_prompts, max_concurrency=max_concurrency, input_len=None,
                            output_len=output_len, dataset=dataset, temperature=0.0, ignore_eos=True)
                summary = dict(bench(server, load, progress=False, tokenizer=None).summary)
            else:
                name = f"round{k}.json"
                if reference == "vllm":
                    words = vllm_bench_words(command, server, dataset, num_prompts=num_prompts,
                                             max_concurrency=max_concurrency, output_len=output_len,
                                             result_dir=result_dir, result_name=name, tokenizer=tokenizer)
                else:
                    words = sglang_bench_words(command, server, dataset, num_prompts=num_prompts,
                                               max_concurrency=max_concurrency, output_len=output_len,
                                               output_file=f"{result_dir}/{name}l", tokenizer=tokenizer)
                commands.append(join(words))
                summary = _reference_run(server, words, f"{result_dir}/{name}", reference, timeout_s)
            records.append({"round": k, "position": position, "client": client, "cache": cache,
                            **{f: _number(summary.get(f)) for f in AGREEMENT_FIGURES}})
    runs = pd.DataFrame(records)
    return Agreement(runs, _ratios(runs, reference), tuple(commands), reference)


def _reference_run(server: Server, words: list[str], result: str, reference: str, timeout_s: float) -> dict[str, object]:
    """One run of the reference client; its figures under vLLM's keys (SGLang appends a JSON line per run)."""
    ran = server.host.run(join(words) + " 2>&1", check=False, timeout_s=timeout_s)
    client = "vllm bench serve" if reference == "vllm" else "sglang.bench_serving"
    if not ran.ok:
        raise ToolkitError(f"{client} failed on {server.host.name} (exit {ran.exit_code})",
                           evidence=ran.stdout.splitlines()[-12:], hint=_failure_hint(ran.stdout, reference))
    if reference == "vllm":
        return dict(json.loads(server.host.read_file(result)))
    lines = [line for line in server.host.read_file(result + "l").splitlines() if line.strip()]
    found = dict(json.loads(lines[-1]))
    return {key: found.get(_SGLANG_KEYS.get(key, key)) for key in AGREEMENT_FIGURES}


def _failure_hint(output: str, reference: str) -> str:
    if "install vllm[bench]" in output:
        # vllm 0.33.0 reads a custom dataset with pandas (vllm/benchmarks/datasets/datasets.py:2454), which a plain
        # `pip install vllm` does not bring; its lazy import says so (vllm/utils/import_utils.py:321)
        return ("vLLM's client reads the dataset file with pandas, which `pip install vllm` does not install: "
                "install `vllm[bench]` (or pandas) into the environment that runs it")
    return f"run the command by hand there; is {reference}_bench the right program?"


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def _ratios(runs: pd.DataFrame, reference: str = "vllm") -> pd.DataFrame:
    rows = []
    for figure in AGREEMENT_FIGURES:
        by_round = runs.pivot(index="round", columns="client", values=figure)
        ratios = (by_round["toolkit"] / by_round[reference]).tolist()
        ratio, low, high = mean_interval(ratios)
        rows.append({"figure": figure, "toolkit": float(by_round["toolkit"].mean()),
                     reference: float(by_round[reference].mean()), "ratio": ratio, "low": low, "high": high,
                     "rounds": len(ratios)})
    return pd.DataFrame(rows)
