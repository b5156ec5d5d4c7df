"""How much faster is a sweep fanned out over hosts, where does each configuration's time go, and is it CPU-bound?

Runs one sweep of ``--configs`` simulator configurations (``--sim-seed`` 1..N, same speed)
with a journal, on 1, 2 and 3 loopback SSH hosts (127.0.0.1, .2, .3 of one test sshd, each
server on its own port), and prints side by side per host count:

- the wall time, its ratio to one host and the ideal (1/H);
- the CPU time the whole machine spent meanwhile (``/proc/stat``: every process, other
  sessions' included, so the background measured before the runs is printed too), how busy
  that kept the cores, and this driver process's own CPU time. Three loopback "hosts" share
  this machine's cores, unlike three GPU nodes: when the cores are busy nearly all the time
  the ratio is bounded by the CPU, not by the pool;
- the overhead per configuration beyond server start and benchmark, as the issue defines it
  (per host ``(wall - sum of (time to ready + bench)) / configurations it ran``, the worst
  host), and the mean time per launch of each phase (``SweepResult.phases``: launch, ready,
  bench, log, journal, stop; see :class:`toolkit.moves.trial.LaunchPhases`). Each host count
  starts with empty version and ``--help`` caches, as a fresh sweep does.

``--workload cpu`` (the default: 1 s simulated start-up, 4 x 48 tokens) is dominated by
fixed CPU costs (each server's Python start-up, SSH, the benchmark client). ``--workload
latency`` lengthens what a GPU node spends waiting (5 s of simulated weight loading,
4 x 192 tokens at the simulated per-token latency), as a real sweep does: the same code then
gets close to 1/H. Both are printed with the command; neither hides the other.

    .venv/bin/python benchmarks/sweep_fanout.py [--configs 6] [--hosts 1 2 3] [--workload cpu|latency]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sim_process import free_port  # noqa: E402
from system.sshd import ADDRESSES, LoopbackSshd, find_sshd  # noqa: E402

from toolkit.benchmark import BenchResult, Load, bench  # noqa: E402
from toolkit.host.host import Host  # noqa: E402
from toolkit.journal import Journal  # noqa: E402
from toolkit.moves import sweep  # noqa: E402
from toolkit.moves.plan import Plan  # noqa: E402
from toolkit.moves.trial import LaunchPhases  # noqa: E402
from toolkit.server.preflight import DEFAULT_CACHE  # noqa: E402
from toolkit.server.release import DEFAULT_RELEASES  # noqa: E402
from toolkit.server.server import Server  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402

WORKLOADS = {  # name: (simulator start-up s, what bench sends)
    "cpu": (1.0, Load(num_prompts=4, max_concurrency=1, input_len=16, output_len=48)),
    "latency": (5.0, Load(num_prompts=4, max_concurrency=1, input_len=16, output_len=192)),
}


def machine_busy_s() -> tuple[float, float]:
    """(busy CPU seconds summed over all cores, wall clock) from /proc/stat: every process on the machine."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK"), time.monotonic()


def driver_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


@dataclass
class Row:
    hosts: int
    wall_s: float
    machine_cpu_s: float
    driver_cpu_s: float
    overhead_s: float
    ready_s: float
    bench_s: float
    tok_s: float
    phases: dict[str, float]


def run(hosts: list[Host], configs: int, workload: str, spin_ms: float, work: Path) -> Row:
    ports: dict[str, int] = {}
    spent: dict[str, float] = defaultdict(float)
    lock = threading.Lock()
    startup_s, bench_args = WORKLOADS[workload]

    def adapt(host: Host, spec: ServerSpec) -> ServerSpec:
        return spec.with_flags({"--port": ports.setdefault(host.name, free_port()), "--host": host.address})

    def timed_bench(server: Server) -> BenchResult:
        started = time.monotonic()
        result = bench(server, bench_args, progress=False)
        with lock:
            spent[server.host.name] += time.monotonic() - started
        return result

    spec = ServerSpec.simulator(tp=1, port=free_port(), host="127.0.0.1", sim_startup_s=startup_s, sim_spin_ms=spin_ms)
    # Each host count starts as a fresh sweep would: every host asks the engine's version and --help
    # once (otherwise the hosts an earlier run used would skip it and flatter the larger counts).
    DEFAULT_CACHE.clear()
    DEFAULT_RELEASES.clear()
    with Journal(work / f"sweep-{workload}-{len(hosts)}.sqlite", investigation="fan-out benchmark") as journal:
        busy0, t0 = machine_busy_s()
        cpu0 = driver_cpu_s()
        result = sweep(hosts, spec, vary={"--sim-seed": list(range(1, configs + 1))},
                       plan=Plan(bench=timed_bench, journal=journal, spec_for_host=adapt,
                                 log_dir=str(work / f"logs-{workload}-{len(hosts)}"), progress=False))
        busy1, t1 = machine_busy_s()
        cpu1 = driver_cpu_s()
    frame, phases = result.frame, result.phases
    if result.failures or (frame["status"] != "ok").any() or phases is None:
        raise SystemExit(f"the sweep failed: {result!r}")
    wall = t1 - t0
    overhead = 0.0
    for host, runs in frame.groupby("host"):
        busy = float(runs["time_to_ready_s"].sum()) + spent[str(host)]
        overhead = max(overhead, (wall - busy) / len(runs))
    means = {name: float(phases[f"{name}_s"].mean()) for name in LaunchPhases.PHASES}
    means["other"] = float(phases["total_s"].mean()) - sum(means.values())
    return Row(len(hosts), wall, busy1 - busy0, cpu1 - cpu0, overhead, float(frame["time_to_ready_s"].mean()),
               sum(spent.values()) / configs, float(frame["output_throughput"].mean()), means)


def background(seconds: float = 3.0) -> float:
    """Cores kept busy by everything else on the machine, measured before the runs."""
    busy0, t0 = machine_busy_s()
    time.sleep(seconds)
    busy1, t1 = machine_busy_s()
    return (busy1 - busy0) / (t1 - t0)


def report(rows: list[Row], cores: int) -> list[str]:
    one = next((r.wall_s for r in rows if r.hosts == 1), None)
    lines = ["hosts  wall (s)  vs 1 host  ideal  machine CPU (s)  cores busy  driver CPU (s)  overhead/config (s)"
             "  ready (s)  bench (s)  tok/s"]
    for r in rows:
        ratio = f"{r.wall_s / one:8.2f}x" if one else "        -"
        cores_busy = r.machine_cpu_s / r.wall_s
        lines.append(f"{r.hosts:5d}  {r.wall_s:8.1f}  {ratio}  {1 / r.hosts:4.2f}x  {r.machine_cpu_s:15.1f}  "
                     f"{cores_busy:4.2f}/{cores:<5d}  {r.driver_cpu_s:14.1f}  {r.overhead_s:19.2f}  {r.ready_s:9.2f}  "
                     f"{r.bench_s:9.2f}  {r.tok_s:5.1f}")
    names = [*LaunchPhases.PHASES, "other"]
    lines += ["", "mean seconds per launch (SweepResult.phases); overhead = launch + log + journal + stop + other",
              "hosts  " + "  ".join(f"{n:>7s}" for n in names) + "  overhead"]
    for r in rows:
        extra = sum(v for k, v in r.phases.items() if k not in ("ready", "bench"))
        lines.append(f"{r.hosts:5d}  " + "  ".join(f"{r.phases[n]:7.2f}" for n in names) + f"  {extra:8.2f}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=6)
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), nargs="+", default=["cpu"],
                        help="cpu: short start-up and bench (fixed CPU costs dominate); latency: the time goes to "
                             "simulated loading and per-token latency, as on GPU nodes")
    parser.add_argument("--spin-ms", type=float, default=0.0,
                        help="the simulator's --sim-spin-ms (the last M ms before each step are a blocking sleep; "
                             "0: the loop's timers only, gaps quantised to whole ms)")
    args = parser.parse_args()
    if max(args.hosts) > len(ADDRESSES):
        raise SystemExit(f"at most {len(ADDRESSES)} loopback hosts")
    path = find_sshd()
    if path is None:
        print("sshd is not installed")
        return 2
    cores = os.cpu_count() or 1
    load = os.getloadavg()
    print(f"{cores} cores; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"background before the runs: {background():.2f} cores busy")
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        work = Path(tmp)
        sshd = LoopbackSshd.start(work / "sshd", path)
        everyone = [Host(a, user=sshd.user, port=sshd.port, key_filename=str(sshd.client_key),
                         known_hosts=str(sshd.known_hosts), ssh_config=str(sshd.ssh_config)) for a in ADDRESSES]
        try:
            for workload in args.workload:
                rows = [run(everyone[:count], args.configs, workload, args.spin_ms, work) for count in args.hosts]
                startup_s, bench_args = WORKLOADS[workload]
                print(f"\nworkload {workload}: {args.configs} configurations, simulator start-up {startup_s:g} s, "
                      f"spin {args.spin_ms:g} ms, bench {bench_args}")
                print("\n".join(report(rows, cores)))
        finally:
            for host in everyone:
                host.close()
            sshd.stop()
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
