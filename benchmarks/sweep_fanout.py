"""How much faster is a sweep fanned out over hosts, and what does each configuration cost beyond its server?

Runs one sweep of ``--configs`` simulator configurations (``--sim-seed`` 1..N, same speed)
with a journal, on 1, 2 and 3 loopback SSH hosts (127.0.0.1, .2, .3 of one test sshd, each
server on its own port), and prints per host count: the wall time, the speed-up over one
host, and the overhead per configuration beyond server start and benchmark. That overhead
is, per host, ``(wall time - sum of (time to ready + benchmark call)) / configurations it ran``,
the worst host shown: port check, flag preflight, launch, log following, metric lines,
journal writes and the verified stop (the target is 1 s or less).

    .venv/bin/python benchmarks/sweep_fanout.py [--configs 6] [--hosts 1 2 3] [--startup-s 1.0] [--spin-ms 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from system.sshd import ADDRESSES, LoopbackSshd, find_sshd  # noqa: E402

from toolkit.benchmark import BenchResult, bench  # noqa: E402
from toolkit.host.host import Host  # noqa: E402
from toolkit.journal import Journal  # noqa: E402
from toolkit.moves import sweep  # noqa: E402
from toolkit.server.server import Server  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402
from toolkit.sim.testing import free_port  # noqa: E402

BENCH = {"num_prompts": 4, "max_concurrency": 1, "input_len": 16, "output_len": 48, "progress": False}


def run(hosts: list[Host], configs: int, startup_s: float, spin_ms: float, work: Path) -> dict[str, float]:
    ports: dict[str, int] = {}
    spent: dict[str, float] = defaultdict(float)
    lock = threading.Lock()

    def adapt(host: Host, spec: ServerSpec) -> ServerSpec:
        return spec.with_flags({"--port": ports.setdefault(host.name, free_port()), "--host": host.address})

    def timed_bench(server: Server) -> BenchResult:
        started = time.monotonic()
        result = bench(server, **BENCH)
        with lock:
            spent[server.host.name] += time.monotonic() - started
        return result

    spec = ServerSpec.simulator(tp=1, port=free_port(), host="127.0.0.1", sim_startup_s=startup_s, sim_spin_ms=spin_ms)
    with Journal(work / f"sweep-{len(hosts)}.sqlite", investigation="fan-out benchmark") as journal:
        started = time.monotonic()
        result = sweep(hosts, spec, vary={"--sim-seed": list(range(1, configs + 1))}, bench=timed_bench,
                       journal=journal, spec_for_host=adapt, log_dir=str(work / f"logs-{len(hosts)}"), progress=False)
        wall = time.monotonic() - started
    frame = result.frame
    if result.failures or (frame["status"] != "ok").any():
        raise SystemExit(f"the sweep failed: {result!r}")
    overhead = 0.0
    for host, runs in frame.groupby("host"):
        busy = float(runs["time_to_ready_s"].sum()) + spent[str(host)]
        overhead = max(overhead, (wall - busy) / len(runs))
    return {"wall_s": wall, "overhead_s": overhead, "ready_s": float(frame["time_to_ready_s"].mean()),
            "bench_s": sum(spent.values()) / configs, "tok_s": float(frame["output_throughput"].mean())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=6)
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--startup-s", type=float, default=1.0, help="the simulator's start-up time")
    parser.add_argument("--spin-ms", type=float, default=0.0,
                        help="the simulator's --sim-spin-ms (0: it sleeps between steps, so three servers on two "
                             "cores do not compete for the CPU the way three GPU nodes never would)")
    args = parser.parse_args()
    if max(args.hosts) > len(ADDRESSES):
        raise SystemExit(f"at most {len(ADDRESSES)} loopback hosts")
    path = find_sshd()
    if path is None:
        print("sshd is not installed")
        return 2
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        work = Path(tmp)
        sshd = LoopbackSshd.start(work / "sshd", path)
        everyone = [Host(a, user=sshd.user, port=sshd.port, key_filename=str(sshd.client_key),
                         known_hosts=str(sshd.known_hosts), ssh_config=str(sshd.ssh_config)) for a in ADDRESSES]
        rows = []
        try:
            for count in args.hosts:
                rows.append((count, run(everyone[:count], args.configs, args.startup_s, args.spin_ms, work)))
        finally:
            for host in everyone:
                host.close()
            sshd.stop()
    one = next((r["wall_s"] for n, r in rows if n == 1), None)
    print(f"{args.configs} configurations, simulator start-up {args.startup_s:g} s, spin {args.spin_ms:g} ms, "
          f"bench {BENCH}")
    print("hosts  wall (s)  vs 1 host  ready (s)  bench (s)  overhead/config (s)  tok/s")
    for count, r in rows:
        ratio = f"{r['wall_s'] / one:8.2f}x" if one else "        -"
        print(f"{count:5d}  {r['wall_s']:8.1f}  {ratio}  {r['ready_s']:9.2f}  {r['bench_s']:9.2f}  "
              f"{r['overhead_s']:19.2f}  {r['tok_s']:5.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
