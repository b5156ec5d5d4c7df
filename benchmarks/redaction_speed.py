"""How long redaction takes for one long line, per shape, and what recording it in a journal costs.

Issue 20: one 60 kB log line with no spaces (a logged prompt) took 33.6 s to record, with
the journal's lock held. Three patterns of :mod:`toolkit.redaction` restarted at every
position of a long run of name characters (dots, dashes, ``eyJ``) and scanned to its end
each time. The target is a 1 MB line in well under a second, whatever its shape.

Shapes (deterministic, seeded), each ``--kib`` KiB long and without spaces unless said:

- ``dotted``: ``ab.ab.ab...`` (the name-before-colon pattern restarted after every dot);
- ``dashed``: ``ab-ab-ab...`` (the URL user-info pattern restarted at every word);
- ``jwt-like``: ``-eyJ-eyJ...`` (the JWT pattern restarted at every ``eyJ``);
- ``prompt``: a chat request as JSON without spaces, the prompt random lower-case letters;
- ``base64``: random base64 (one huge high-entropy token: redacted whole);
- ``prose``: random words with spaces and a ``key: value`` pair now and then.

The journal figure records the ``dotted`` line with ``step.record_log_lines`` into a fresh
journal: redaction, then the committed write.

The follower figure is what the log follower now pays per line (every line of a server log is
redacted before a view, an error or the journal sees it): ``redact_text`` and a launch's
``Redactor`` (two literal secret values) over the labelled real SGLang/vLLM logs of
``../shared/real-logs`` when they are there.

    .venv/bin/python benchmarks/redaction_speed.py
    .venv/bin/python benchmarks/redaction_speed.py --kib 60 --repeat 1
"""

from __future__ import annotations

import argparse
import random
import string
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from toolkit.journal import Journal
from toolkit.redaction import Redactor, redact_text

REAL_LOGS = Path(__file__).resolve().parents[2] / "shared" / "real-logs"


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def shapes(size: int, seed: int = 0) -> dict[str, str]:
    rng = random.Random(seed)
    words = ["the", "model", "cache", "decode", "token", "batch", "graph", "rank", "prefill", "speculative"]
    prose_parts = [rng.choice(words) if rng.random() > 0.01 else "max_len: 4096" for _ in range(size // 4)]
    prompt = "".join(rng.choices(string.ascii_lowercase, k=max(0, size - 60)))
    return {
        "dotted": _repeat("ab.", size),
        "dashed": _repeat("ab-", size),
        "jwt-like": _repeat("-eyJ", size),
        "prompt": ('{"model":"m","messages":[{"role":"user","content":"' + prompt + '"}]}')[:size],
        "base64": "".join(rng.choices(string.ascii_letters + string.digits + "+/", k=size)),
        "prose": " ".join(prose_parts)[:size],
    }


def best_of(repeat: int, call: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kib", type=int, default=1024, help="line length in KiB (default 1024: 1 MiB)")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs (default 3)")
    args = parser.parse_args()
    size = args.kib * 1024
    print(f"redact_text of one {args.kib} KiB line, best of {args.repeat} (wall time)")
    for name, line in shapes(size).items():
        seconds = best_of(args.repeat, lambda line=line: redact_text(line))  # type: ignore[misc]
        print(f"  {name:9} {seconds:7.3f} s")
    with tempfile.TemporaryDirectory() as folder:
        journal = Journal(Path(folder) / "bench.sqlite", investigation="redaction speed")
        line = shapes(size)["dotted"]
        with journal.step("note", "one long line") as step:
            seconds = best_of(args.repeat, lambda: step.record_log_lines([line]))
        journal.close()
    print(f"journal: record_log_lines of the dotted line {seconds:7.3f} s (redaction runs before the lock is taken)")
    follower_cost(args.repeat)
    return 0


def follower_cost(repeat: int) -> None:
    lines = [line for path in sorted(REAL_LOGS.glob("*.log"))
             for line in path.read_text(errors="replace").splitlines()] if REAL_LOGS.is_dir() else []
    if not lines:
        print(f"follower: no real logs at {REAL_LOGS}; skipped")
        return
    redactor = Redactor.of({"Xk9s3cr3tpass", "hf_Zq8xP2mK9vL4tR7wY1nB5cD3fG6hJ0sAq"})
    for name, redact in (("redact_text", redact_text), ("Redactor", redactor.text)):
        seconds = best_of(repeat, lambda redact=redact: [redact(line) for line in lines])  # type: ignore[misc]
        print(f"follower: {name:11} {seconds / len(lines) * 1e6:6.1f} us/line over {len(lines)} real log lines "
              f"({len(lines) / seconds:,.0f} lines/s)")


if __name__ == "__main__":
    raise SystemExit(main())
