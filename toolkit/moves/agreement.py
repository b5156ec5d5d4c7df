"""Does ``tk.bench`` measure what ``vllm bench serve`` measures? Both clients, one dataset file, ABBA rounds.

On the first real vLLM run (issue 23) the two clients differed by 4.7 % on output tok/s with
``--temperature 0`` and by 19 % with each client's defaults, with different prompts, and nothing
said which difference was real. :func:`agreement` removes the differences that are not the
clients': both read one vLLM custom dataset file (``toolkit.benchmark.custom_dataset``: the same
prompts in the same order, the same ``max_tokens``), both send ``temperature=0`` and
``ignore_eos``, the prefix cache is flushed before every run (``before_run``), and the order
alternates by round (AB, BA, AB, ...) so a drift of the server over time falls on both clients
alike. Each figure's ratio (toolkit / vLLM) gets a 95 % t-interval over the rounds
(:func:`toolkit.stats.mean_interval`): an interval that holds 1.0 is agreement within the noise.

Defaults that differ between the clients and move numbers (docs/real-gpu/vllm/README.md):
``vllm bench serve`` sends no ``temperature`` unless ``--temperature`` is given (the server's
default sampling then applies), shuffles a custom dataset unless ``--disable-shuffle``, and wraps
each prompt in the chat template unless ``--skip-chat-template``; ``tk.bench`` sends
``temperature=0`` and ``ignore_eos=True`` and warms up with one batch first.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from toolkit.benchmark import Load, bench
from toolkit.benchmark.custom_dataset import vllm_dataset_args
from toolkit.errors import ToolkitError
from toolkit.host.shell import join, quote_path
from toolkit.moves.observe import flush_prefix_cache
from toolkit.server.server import Server
from toolkit.stats import mean_interval

__all__ = ["AGREEMENT_FIGURES", "Agreement", "agreement", "vllm_bench_words"]

#: The figures compared: vLLM's result-file keys, which ``tk.bench`` summaries share (benchmark/metrics.py).
AGREEMENT_FIGURES = ("output_throughput", "request_throughput", "median_ttft_ms", "median_tpot_ms",
                     "median_itl_ms", "median_e2el_ms")


@dataclass(frozen=True)
class Agreement:
    """``runs``: one row per client run (round, position, client, figures); ``ratios``: per figure, the mean
    ratio toolkit / vLLM over the rounds with its 95 % interval, and both clients' means."""

    runs: pd.DataFrame
    ratios: pd.DataFrame
    commands: tuple[str, ...]

    def summary(self) -> str:
        row = self.ratios.set_index("figure").loc["output_throughput"]
        return (f"toolkit / vllm bench serve over {int(row['rounds'])} ABBA rounds: output tok/s ratio "
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


def agreement(server: Server, dataset: str, *, vllm_bench: Sequence[str], rounds: int = 3, num_prompts: int = 64,
              max_concurrency: int = 8, output_len: int = 128, tokenizer: str | None = None,
              flush_cache: bool = True, before_run: Callable[[], object] | None = None,
              timeout_s: float = 600.0) -> Agreement:
    """Run ``rounds`` rounds of both clients against ``server`` (AB, then BA, ...) on one dataset file.

    ``dataset`` is a vLLM custom ``.jsonl`` on the server's host *and* readable here (the same path
    when the host is local; copy it otherwise). ``vllm_bench`` is the command that runs ``vllm bench
    serve`` there (``["/tmp/vv/bin/vllm", "bench", "serve"]``). ``flush_cache`` flushes the prefix
    cache before every run and keeps its state in ``runs["cache"]`` (vLLM: only with
    ``VLLM_SERVER_DEV_MODE=1``, else ``unknown``); ``before_run`` runs before every run too. Raises :class:`~toolkit.errors.ToolkitError` quoting vLLM's client when it fails.

    >>> result = agreement(server, "/tmp/field/prompts.jsonl", vllm_bench=["vllm", "bench", "serve"])  # doctest: +SKIP
    >>> print(result)  # doctest: +SKIP
    """
    if rounds < 2:
        raise ValueError(f"rounds must be at least 2 for an interval, got {rounds}")
    result_dir = f"/tmp/toolkit-agreement-{uuid.uuid4().hex[:10]}"
    server.host.run(f"mkdir -p {quote_path(result_dir)}", timeout_s=30)
    records, commands = [], []
    for k in range(rounds):
        order = ("toolkit", "vllm") if k % 2 == 0 else ("vllm", "toolkit")
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
                words = vllm_bench_words(vllm_bench, server, dataset, num_prompts=num_prompts,
                                         max_concurrency=max_concurrency, output_len=output_len,
                                         result_dir=result_dir, result_name=name, tokenizer=tokenizer)
                commands.append(join(words))
                ran = server.host.run(join(words) + " 2>&1", check=False, timeout_s=timeout_s)
                if not ran.ok:
                    raise ToolkitError(f"vllm bench serve failed on {server.host.name} (exit {ran.exit_code})",
                                       evidence=ran.stdout.splitlines()[-12:],
                                       hint="run the command by hand there; is vllm_bench the right program?")
                summary = json.loads(server.host.read_file(f"{result_dir}/{name}"))
            records.append({"round": k, "position": position, "client": client, "cache": cache,
                            **{f: _number(summary.get(f)) for f in AGREEMENT_FIGURES}})
    runs = pd.DataFrame(records)
    return Agreement(runs, _ratios(runs), tuple(commands))


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def _ratios(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for figure in AGREEMENT_FIGURES:
        by_round = runs.pivot(index="round", columns="client", values=figure)
        ratios = (by_round["toolkit"] / by_round["vllm"]).tolist()
        ratio, low, high = mean_interval(ratios)
        rows.append({"figure": figure, "toolkit": float(by_round["toolkit"].mean()),
                     "vllm": float(by_round["vllm"].mean()), "ratio": ratio, "low": low, "high": high,
                     "rounds": len(ratios)})
    return pd.DataFrame(rows)
