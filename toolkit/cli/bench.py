"""``python -m toolkit bench``: the notebook's ``bench()`` from a shell, vLLM-style output.

Exit status: 0 when a request completed; 1 when every request failed or no model could be found; 2 for
bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from toolkit.benchmark.load import Load
from toolkit.benchmark.runner import bench
from toolkit.errors import ToolkitError

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m toolkit bench", description=(
        "Benchmark an OpenAI-compatible server (TTFT, TPOT, ITL, E2EL, tok/s) with the "
        "definitions of vLLM's `vllm bench serve` and SGLang's bench_serving."))
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", default=None, help="model name (default: the first id of GET /v1/models)")
    p.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    p.add_argument("--num-prompts", type=int, default=100)
    p.add_argument("--max-concurrency", type=int, default=1, help="0 = unlimited")
    p.add_argument("--input-len", type=int, default=1024,
                   help="prompt length in tokens of --tokenizer (as `vllm bench serve` counts)")
    p.add_argument("--tokenizer", default="server",
                   help="how to count tokens: 'server' (its /tokenize; default), a tokenizer.json path, or 'words'")
    p.add_argument("--output-len", type=int, default=128, help="max_tokens per request (ignore_eos is set)")
    p.add_argument("--range-ratio", type=float, default=0.0,
                   help="vLLM's convention: lengths uniform in [N(1-r), N(1+r)]; 0 = fixed "
                   "(SGLang's --random-range-ratio 0 means uniform in [1, N] instead)")
    p.add_argument("--request-rate", type=float, default=math.inf,
                   help="requests/s (default inf: all at once)")
    p.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of arrival gaps; 1 = Poisson")
    p.add_argument("--warmup", type=int, default=None, help="warm-up requests (default: max concurrency)")
    p.add_argument("--dataset", default=None, help="prompt file (one per line) or ShareGPT .json")
    p.add_argument("--timeout", type=float, default=600.0, help="per-request timeout, seconds")
    p.add_argument("--deadline", type=float, default=None,
                   help="the whole run's limit, seconds (default: 4x what the warm-up predicts, plus 60)")
    p.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos")
    p.add_argument("--goodput", nargs="+", default=None, metavar="KEY:MS", help="SLOs, e.g. ttft:200 tpot:50")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--api-key", default=None, help="bearer token (default: $OPENAI_API_KEY if set)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--json", action="store_true", help="print one JSON object (vLLM result-file keys)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        load = Load(num_prompts=args.num_prompts, max_concurrency=args.max_concurrency or None,
                    input_len=args.input_len, output_len=args.output_len, range_ratio=args.range_ratio,
                    request_rate=args.request_rate, burstiness=args.burstiness, warmup=args.warmup,
                    ignore_eos=not args.no_ignore_eos, dataset=args.dataset, seed=args.seed,
                    endpoint=args.endpoint, goodput=args.goodput)
        api_key = args.api_key or os.environ.get("OPENAI_API_KEY")
        result = bench(args.url, load, model=args.model, timeout_s=args.timeout, repeats=args.repeats,
                       progress=not args.no_progress, api_key=api_key, deadline_s=args.deadline,
                       tokenizer=None if args.tokenizer == "words" else args.tokenizer)
    except KeyboardInterrupt:
        print("interrupted: the benchmark was stopped (Ctrl-C); no result", file=sys.stderr)
        return 130
    except ToolkitError as exc:  # one line: the cause, the first piece of evidence, what to do
        first = f" (first: {exc.evidence[0]})" if exc.evidence else ""
        hint = f"; what to do: {exc.hint}" if exc.hint else ""
        print(" ".join(f"error: {exc.message}{first}{hint}".split()), file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        print(" ".join(f"error: {exc}".split()), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result.to_dict(requests=False)["summary"]))
    else:
        print(result.vllm_style_table())
        if result.server_view.accept_length is not None:
            sv = result.server_view
            running = " (the server's running average)" if sv.cumulative else ""
            print(f"accept length {sv.accept_length:.3f} from {sv.accept_length_source}{running}")
    if not result.ok:
        print(f"error: all {result.summary['failed']} requests failed; first error: {result.first_error}",
              file=sys.stderr)
        return 1
    if result.summary["failed"]:
        print(f"warning: {result.summary['failed']} requests failed; errors: {result.errors}",
              file=sys.stderr)
    return 0
