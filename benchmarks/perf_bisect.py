"""How many probes, and how long, does perf_bisect take on a simulated 64-commit history?

Writes a make-repo history (``--commits`` commits, the 20 % regression at
``--regression-at``, optionally a commit that fails to start), then bisects it with
:func:`toolkit.moves.bisect.perf_bisect` over a loopback sshd (or on localhost), and prints
the probe count against ⌈log2 N⌉, the wall time, the time per probe, and whether the
planted commit was found. The checkout is checked afterwards: same branch, same HEAD,
no bisection left.

    .venv/bin/python benchmarks/perf_bisect.py [--commits 64] [--regression-at 41] [--broken-at J]
                                          [--transport ssh|local] [--repeats 2]
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

from system.sshd import LoopbackSshd, find_sshd  # noqa: E402

from toolkit.host.host import Host  # noqa: E402
from toolkit.moves.bisect import expected_probes, perf_bisect  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402
from toolkit.sim.testing import free_port  # noqa: E402

BENCH = {"num_prompts": 3, "max_concurrency": 1, "input_len": 8, "output_len": 16, "warmup": 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=64)
    parser.add_argument("--regression-at", type=int, default=41)
    parser.add_argument("--broken-at", type=int, default=None)
    parser.add_argument("--transport", choices=["ssh", "local"], default="ssh")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bisect-bench-") as tmp:
        work = Path(tmp)
        repo = work / "repo"
        extra = ["--broken-at", str(args.broken_at)] if args.broken_at else []
        made = subprocess.run(
            [sys.executable, "-m", "toolkit.sim", "make-repo", str(repo), "--commits", str(args.commits),
             "--regression-at", str(args.regression_at), *extra, "--json"],
            check=True, capture_output=True, text=True,
        )
        commits = json.loads(made.stdout)
        sshd = None
        if args.transport == "ssh":
            path = find_sshd()
            if path is None:
                print("sshd is not installed: use --transport local")
                return 2
            sshd = LoopbackSshd.start(work / "sshd", path)
            host = Host("127.0.0.1", user=sshd.user, port=sshd.port, key_filename=str(sshd.client_key),
                        known_hosts=str(sshd.known_hosts), ssh_config=str(sshd.ssh_config))
        else:
            host = Host.local()
        spec = ServerSpec.simulator(tp=1, port=free_port(), host="127.0.0.1", sim_startup_s=0.3, source_dir=str(repo))
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
        try:
            started = time.monotonic()
            result = perf_bisect(host, str(repo), good=commits[0]["sha"], bad="main", spec=spec, bench=BENCH,
                                 repeats=args.repeats, log_dir=str(work / "logs"), progress=True, timeout_s=60)
            wall_s = time.monotonic() - started
        finally:
            host.close()
            if sshd is not None:
                sshd.stop()
        after = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
        candidates = args.commits - 1
        planted = commits[args.regression_at - 1]["sha"]
        launches = len(result.probes)
        print(result)
        print()
        print(f"commits:            {args.commits} ({candidates} candidates after the good end)")
        print(f"transport:          {args.transport}, repeats {args.repeats}, bench {BENCH}")
        print(f"probes:             {result.probe_count} (ceil(log2 {candidates}) = {expected_probes(candidates)}, "
              f"{len(result.skipped)} skipped) + 2 reference ends = {launches} launches")
        print(f"wall time:          {wall_s:.1f} s ({wall_s / launches:.1f} s per launch)")
        print(f"found the planted:  {result.first_bad == planted} ({(result.first_bad or '-')[:12]})")
        print(f"checkout restored:  {after == head}")
    return 0 if result.first_bad == planted and after == head else 1


if __name__ == "__main__":
    raise SystemExit(main())
