"""How many rounds, and how long, does perf_bisect take on 1, 2 and 3 hosts over 64- and 1,024-commit histories?

For each history size it writes a make-repo history (the 20 % regression planted at 64 % of
the way, unless ``--regression-at``), then bisects it with
:func:`toolkit.moves.bisect.perf_bisect` on 1, 2 and 3 loopback SSH hosts (127.0.0.1, .2, .3
of one test sshd; each server on its own port), and prints per run: rounds of probes against
⌈log_{H+1} N⌉, probes, wall time, the confidence of the answer and whether it is the planted
commit. The user's checkout is checked afterwards: same HEAD, no worktree left.

    .venv/bin/python benchmarks/perf_bisect.py [--commits 64 1024] [--hosts 1 2 3] [--repeats 2]
                                               [--noise-pct 0] [--broken-at J]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sim_process import free_port  # noqa: E402
from system.sshd import ADDRESSES, LoopbackSshd, find_sshd  # noqa: E402

from toolkit.benchmark import Load  # noqa: E402
from toolkit.host.host import Host  # noqa: E402
from toolkit.moves.bisect import expected_rounds, perf_bisect  # noqa: E402
from toolkit.moves.plan import Plan  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402

BENCH = Load(num_prompts=3, max_concurrency=1, input_len=8, output_len=16, warmup=0)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def bisect_once(hosts: list[Host], commits: int, regression_at: int, args: argparse.Namespace, work: Path) -> dict:
    repo = work / f"repo-{commits}-{len(hosts)}"
    extra = ["--broken-at", str(args.broken_at)] if args.broken_at else []
    made = subprocess.run([sys.executable, "-m", "toolkit.sim", "make-repo", str(repo), "--commits", str(commits),
                           "--regression-at", str(regression_at), *extra, "--json"],
                          check=True, capture_output=True, text=True)
    history = json.loads(made.stdout)
    ports: dict[str, int] = {}

    def adapt(host: Host, spec: ServerSpec) -> ServerSpec:
        return spec.with_flags({"--port": ports.setdefault(host.name, free_port()), "--host": host.address})

    spec = ServerSpec.simulator(tp=1, port=free_port(), host="127.0.0.1", sim_startup_s=0.3, source_dir=str(repo),
                                sim_noise_pct=args.noise_pct)
    head = git(repo, "rev-parse", "HEAD")
    started = time.monotonic()
    result = perf_bisect(hosts, str(repo), good=history[0]["sha"], bad="main", spec=spec,
                         plan=Plan(bench=BENCH, repeats=args.repeats, spec_for_host=adapt,
                                   log_dir=str(work / "logs"), progress=False, timeout_s=60))
    wall = time.monotonic() - started
    restored = git(repo, "rev-parse", "HEAD") == head and git(repo, "worktree", "list").count("\n") == 0
    return {"commits": commits, "hosts": len(hosts), "rounds": result.rounds,
            "expected": expected_rounds(commits - 1, len(hosts)), "probes": result.probe_count,
            "launches": len(result.probes), "wall_s": wall, "confidence": result.confidence,
            "found": result.first_bad == history[regression_at - 1]["sha"], "restored": restored}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--regression-at", type=int, default=None, help="default: 64 %% of the way")
    parser.add_argument("--broken-at", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--noise-pct", type=float, default=0.0, help="the simulator's --sim-noise-pct")
    args = parser.parse_args()
    if max(args.hosts) > len(ADDRESSES):
        raise SystemExit(f"at most {len(ADDRESSES)} loopback hosts")
    path = find_sshd()
    if path is None:
        print("sshd is not installed")
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="bisect-bench-") as tmp:
        work = Path(tmp)
        sshd = LoopbackSshd.start(work / "sshd", path)
        everyone = [Host(a, user=sshd.user, port=sshd.port, key_filename=str(sshd.client_key),
                         known_hosts=str(sshd.known_hosts), ssh_config=str(sshd.ssh_config)) for a in ADDRESSES]
        try:
            for commits in args.commits:
                at = args.regression_at or round(commits * 0.64)
                for count in args.hosts:
                    rows.append(bisect_once(everyone[:count], commits, at, args, work))
                    print(rows[-1], flush=True)
        finally:
            for host in everyone:
                host.close()
            sshd.stop()
    print(f"\nbench {BENCH}, repeats {args.repeats}, noise {args.noise_pct:g}% per request")
    print("commits  hosts  rounds (ceil log_{H+1} N)  probes  launches  wall (s)  s/round  confidence  found  restored")
    for r in rows:
        per_round = r["wall_s"] / max(r["rounds"] + 1, 1)  # the ends are a round too
        conf = f"{r['confidence']:.4f}" if r["confidence"] is not None else "-"
        print(f"{r['commits']:7d}  {r['hosts']:5d}  {r['rounds']:6d} ({r['expected']:2d})               "
              f"{r['probes']:6d}  {r['launches']:8d}  {r['wall_s']:8.1f}  {per_round:7.1f}  {conf:>10}  "
              f"{str(r['found']):5}  {r['restored']}")
    return 0 if all(r["found"] and r["restored"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
