"""What a diagnosis costs beyond the two sides' runs: tk.diagnose against the plain A/B test it is built on.

Why: a diagnosis is worth running first only if it costs little more than the A/B test a user
would run anyway. Both are timed on the same pair of configurations (the simulator's baseline
and EAGLE-3, the seed), each with the same observed benchmark (cache flushed, GPUs and
``/metrics`` sampled); the plain A/B test and the diagnosis alternate (``--rounds``, ABBA) so
that drift of a shared machine falls on both. The diagnosis's own breakdown says where the rest
goes: gathering during the measured runs (resolved config, env on every rank, metric rows),
profiling one launch per side, ranking, and the journal record.

    .venv/bin/python benchmarks/diagnose_cost.py                 # 2 rounds, repeats=2, TP 2
    .venv/bin/python benchmarks/diagnose_cost.py --rounds 4 --repeats 3 --json out/diagnose_cost.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sim_process import free_port  # noqa: E402

from toolkit.benchmark import Load  # noqa: E402
from toolkit.host.host import Host  # noqa: E402
from toolkit.journal import Journal  # noqa: E402
from toolkit.moves import compare  # noqa: E402
from toolkit.moves.diagnose import diagnose  # noqa: E402
from toolkit.moves.observed import observed  # noqa: E402
from toolkit.moves.plan import Plan  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402

BENCH = Load(num_prompts=3, input_len=16, output_len=32, max_concurrency=1)
EAGLE = {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2, "--speculative-eagle-topk": 1,
         "--speculative-num-draft-tokens": 3}


def one_round(host: Host, base: ServerSpec, eagle: ServerSpec, repeats: int, folder: Path, order: tuple[str, str]
              ) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for what in order:
        started = time.monotonic()
        if what == "ab":
            compare(host, base, eagle, expect=None,
                    plan=Plan(repeats=repeats, bench=observed(BENCH, cache="flush"), progress=False))
            row["ab_s"] = time.monotonic() - started
        else:
            journal = Journal(folder / f"diagnose-{time.time_ns()}.sqlite", investigation="cost")
            diagnosis = diagnose(host, base, eagle,
                                 plan=Plan(repeats=repeats, bench=BENCH, journal=journal, progress=False))
            row["diagnose_s"] = time.monotonic() - started
            row.update({f"{k}_s": v for k, v in diagnosis.costs_s.items()})
            row["top"] = diagnosis.top.topic if diagnosis.top else None
            journal.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    host = Host.local()
    base = ServerSpec.simulator(tp=args.tp, port=free_port(), host="127.0.0.1", python=sys.executable,
                                sim_startup_s=0.3, sim_warmup_s=0.05)
    eagle = base.with_flags(EAGLE)
    rows = []
    with tempfile.TemporaryDirectory(prefix="diagnose-cost-") as folder:
        for r in range(args.rounds):
            order = ("ab", "diagnose") if r % 2 == 0 else ("diagnose", "ab")
            rows.append(one_round(host, base, eagle, args.repeats, Path(folder), order))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                                                for k, v in rows[-1].items()), flush=True)

    def mean(key: str) -> float:
        return statistics.fmean(row.get(key, 0.0) for row in rows)

    beyond = mean("diagnose_s") - mean("ab_s")
    print(f"\nsimulator SGLang TP {args.tp}, baseline vs EAGLE-3, repeats={args.repeats} per side, "
          f"{args.rounds} rounds (means):")
    print(f"  plain A/B test (compare + observed, cache flushed):  {mean('ab_s'):6.1f} s")
    print(f"  tk.diagnose, total:                                   {mean('diagnose_s'):6.1f} s")
    print(f"    measuring (the same A/B + gathering on the way):    {mean('measure_s'):6.1f} s "
          f"(gathering: {mean('measure_s') - mean('ab_s'):+.1f} s against the plain A/B)")
    print(f"    profiling one launch per side:                      {mean('profile_s'):6.1f} s")
    print(f"    ranking and proposals:                              {mean('rank_s'):6.2f} s")
    print(f"    journal record (runs, notes, JSON):                 {mean('record_s'):6.2f} s")
    print(f"  cost beyond the two sides' runs:                      {beyond:+6.1f} s "
          f"({beyond / mean('ab_s'):+.0%} of the plain A/B)")
    print(f"  top reason in every round: {sorted({row['top'] for row in rows})}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rounds": rows, "beyond_s": beyond}, indent=1))


if __name__ == "__main__":
    main()
