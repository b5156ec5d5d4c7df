"""How many log lines per second the classifier takes, single-threaded, per log mix.

Live following needs the classifier to keep up with a busy server's log (a decode metric
line per scheduler interval per rank, an access line per request). Each mix is measured
in one run, side by side with two references:

- ``parse``: :func:`toolkit.logs.parse_line` alone (header and transport layers only);
- ``grep``: ``re.search("error|exception|traceback", line, re.I)`` over the same lines,
  the ceiling of a loop that only looks for trouble and decides nothing.

Mixes (deterministic, seeded):

- ``sglang_serving``: a real SGLang start-up (``030_sglang-dflash...``) then serving:
  70% ``[.. TP0] Decode batch. ...`` lines, 20% uvicorn access lines (bare, and inside
  SGLang's logger), 8% prefill lines, 2% a start-up line again;
- ``vllm_serving``: a real vLLM start-up (``058_vllm-eagle...``) then serving, all under
  ``(APIServer pid=..)``: 75% access lines, 13% ``Avg prompt throughput`` lines, 10%
  ``SpecDecoding metrics`` lines, 2% a start-up line again;
- ``corpus``: every real log in ``tests/data/logs`` and ``../shared/real-logs``, each
  through a fresh classifier (tracebacks, ANSI, prefixes: the slow paths).

Figures are the best of ``--repeat`` runs, the three figures of a mix measured in turn within
each run. The clock is this process's CPU time by default (``--clock cpu``): on a shared
machine, wall time also counts the time other processes held the core; ``--clock wall``
measures wall time instead.

    .venv/bin/python benchmarks/classify_speed.py
    .venv/bin/python benchmarks/classify_speed.py --lines 200000 --repeat 7
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from toolkit.logs import LogClassifier, parse_line

REPO = Path(__file__).resolve().parents[1]
CORPUS_DIRS = (REPO / "tests" / "data" / "logs", REPO / ".." / "shared" / "real-logs")
SGLANG_STARTUP = "030_sglang-dflash-spec-full-startup-fired-up.log"
VLLM_STARTUP = "058_vllm-eagle-spec-full-startup-metrics.log"


def _log(name: str) -> list[str]:
    for folder in CORPUS_DIRS:
        path = folder / name
        if path.exists():
            return path.read_text(encoding="utf-8", errors="replace").split("\n")
    raise FileNotFoundError(f"{name} is in neither of {[str(d) for d in CORPUS_DIRS]}; run from a checkout with ../shared")


def _clock(start_s: int, step_s: float, i: int, fmt: str) -> str:
    return time.strftime(fmt, time.gmtime(start_s + int(i * step_s)))


def sglang_serving(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    startup = [line for line in _log(SGLANG_STARTUP) if line]
    lines = list(startup)
    t0 = 1_785_000_000
    while len(lines) < n:
        i = len(lines)
        ts = _clock(t0, 0.2, i, "%Y-%m-%d %H:%M:%S")
        r = rng.random()
        if r < 0.70:
            running = rng.randint(1, 64)
            lines.append(f"[{ts} TP0] Decode batch. #running-req: {running}, #token: {rng.randint(100, 90000)}, "
                         f"token usage: {rng.random():.2f}, cuda graph: True, gen throughput (token/s): "
                         f"{rng.uniform(10, 4000):.2f}, #queue-req: {rng.randint(0, 9)}")
        elif r < 0.82:
            lines.append(f'INFO:     127.0.0.1:{rng.randint(30000, 65000)} - "POST /v1/completions HTTP/1.1" 200 OK')
        elif r < 0.90:
            lines.append(f'[{ts}] INFO:     127.0.0.1:{rng.randint(30000, 65000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK')
        elif r < 0.98:
            lines.append(f"[{ts} TP0] Prefill batch. #new-seq: 1, #new-token: {rng.randint(1, 8000)}, #cached-token: "
                         f"{rng.randint(0, 4000)}, token usage: {rng.random():.2f}, #running-req: {rng.randint(0, 64)}, "
                         f"#queue-req: {rng.randint(0, 9)}, input throughput (token/s): {rng.uniform(100, 40000):.2f}")
        else:
            lines.append(rng.choice(startup))
    return lines[:n]


def vllm_serving(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    startup = [line for line in _log(VLLM_STARTUP) if line]
    lines = list(startup)
    t0 = 1_785_000_000
    while len(lines) < n:
        i = len(lines)
        ts = _clock(t0, 0.05, i, "%m-%d %H:%M:%S")
        r = rng.random()
        if r < 0.75:
            lines.append(f'(APIServer pid=29938) INFO:     127.0.0.1:{rng.randint(30000, 65000)} - "POST /v1/completions HTTP/1.1" 200 OK')
        elif r < 0.88:
            lines.append(f"(APIServer pid=29938) INFO {ts} [loggers.py:273] Engine 000: Avg prompt throughput: "
                         f"{rng.uniform(0, 9000):.1f} tokens/s, Avg generation throughput: {rng.uniform(0, 5000):.1f} tokens/s, "
                         f"Running: {rng.randint(0, 256)} reqs, Waiting: {rng.randint(0, 20)} reqs, GPU KV cache usage: "
                         f"{rng.uniform(0, 100):.1f}%, Prefix cache hit rate: {rng.uniform(0, 100):.1f}%")
        elif r < 0.98:
            rates = ", ".join(f"{rng.random():.3f}" for _ in range(4))
            lines.append(f"(APIServer pid=29938) INFO {ts} [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
                         f"{rng.uniform(1, 4):.2f}, Accepted throughput: {rng.uniform(0, 900):.2f} tokens/s, Drafted throughput: "
                         f"{rng.uniform(0, 2000):.2f} tokens/s, Accepted: {rng.randint(0, 9000)} tokens, Drafted: "
                         f"{rng.randint(0, 20000)} tokens, Per-position acceptance rate: {rates}, Avg Draft acceptance rate: "
                         f"{rng.uniform(0, 100):.1f}%")
        else:
            lines.append(rng.choice(startup))
    return lines[:n]


def corpus(n: int, seed: int = 0) -> list[list[str]]:
    """Every real log, repeated until ``n`` lines; one list per log (each gets a fresh classifier)."""
    logs = []
    for folder in CORPUS_DIRS:
        for path in sorted(folder.glob("*.log")):
            text = path.read_text(encoding="utf-8", errors="replace").split("\n")
            logs.append(text[:-1] if text and text[-1] == "" else text)
    out: list[list[str]] = []
    total = 0
    while total < n:
        for log in logs:
            out.append(log)
            total += len(log)
    return out


def _classify(logs: Sequence[Sequence[str]]) -> int:
    events = 0
    for log in logs:
        classifier = LogClassifier()
        feed = classifier.feed
        for line in log:
            events += len(feed(line))
        events += len(classifier.finish())
    return events


def _parse(logs: Sequence[Sequence[str]]) -> int:
    for log in logs:
        for line in log:
            parse_line(line)
    return 0


def _grep(logs: Sequence[Sequence[str]]) -> int:
    hits = 0
    for log in logs:
        for line in log:
            if re.search("error|exception|traceback", line, re.I):
                hits += 1
    return hits


Measured = Callable[[Sequence[Sequence[str]]], int]


def best_rates(fns: Sequence[Measured], logs: Sequence[Sequence[str]], repeat: int,
               clock: Callable[[], float]) -> list[float]:
    """Lines per second of each of ``fns`` over ``logs``, best of ``repeat`` rounds (each round runs all in turn)."""
    n = sum(len(log) for log in logs)
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = clock()
            fn(logs)
            best[i] = min(best[i], clock() - start)
    return [n / seconds for seconds in best]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=100_000, help="lines per mix (default 100000)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per figure; the best counts (default 5)")
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu", help="process CPU time or wall time (default cpu)")
    ap.add_argument("--mix", action="append", choices=["sglang_serving", "vllm_serving", "corpus"], help="only these mixes")
    args = ap.parse_args(argv)
    mixes: dict[str, Callable[[], list[list[str]]]] = {
        "sglang_serving": lambda: [sglang_serving(args.lines)],
        "vllm_serving": lambda: [vllm_serving(args.lines)],
        "corpus": lambda: corpus(args.lines),
    }
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"lines per second ({args.clock} clock), best of {args.repeat}")
    print(f"{'mix':<16}{'lines':>9}{'classify/s':>13}{'parse/s':>11}{'grep/s':>11}{'classify:grep':>15}")
    for name, build in mixes.items():
        if args.mix and name not in args.mix:
            continue
        logs = build()
        n = sum(len(log) for log in logs)
        classify, parse, grep = best_rates((_classify, _parse, _grep), logs, args.repeat, clock)
        print(f"{name:<16}{n:>9,}{classify:>13,.0f}{parse:>11,.0f}{grep:>11,.0f}{classify / grep:>15.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
