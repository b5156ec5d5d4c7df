"""How fast does the toolkit know a server is ready, or dead? Side by side with the seed's bash loop.

Launches the simulator through the toolkit, on localhost and over a loopback sshd, many times
for each kind of start (healthy with the benign TP5 line, a long warm-up, each fatal fault, a
silent hang) and measures:

- ready latency: from the moment the simulator WROTE its ready line (it records the write time
  of every line when TOOLKIT_SIM_TIMING_FILE is set) to `wait_ready` returning;
- fatal latency: from the moment the decisive fatal line was written to the error being raised;
- false aborts: healthy starts that raised.

The seed's loop (poll /v1/models every 15 s, grep the log for error|exception|traceback every
5th attempt) is replayed on the same launches' recorded timelines, twice: with its real
intervals, and with its intervals scaled by --seed-scale, because the simulator starts in 2 s
where the seed's 8-GPU server took minutes (at real intervals it would never reach its first
grep). Then the log follower's throughput over SSH, with its peak memory, for two log lengths.

    .venv/bin/python benchmarks/readiness.py [--launches 5] [--transports local,ssh]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sim_process import free_port  # noqa: E402
from system.sshd import LoopbackSshd, find_sshd  # noqa: E402

from toolkit.errors import ToolkitError  # noqa: E402
from toolkit.host.host import Host  # noqa: E402
from toolkit.server.launch import launch  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402

SEED_GREP = re.compile(r"error|exception|traceback", re.IGNORECASE)
KINDS: dict[str, dict[str, object]] = {
    "healthy (benign TP5 line)": {},
    "healthy, long warm-up": {"--sim-warmup-s": 1.5},
    "fatal: CUDA OOM": {"--sim-fault": "oom"},
    "fatal: NCCL error": {"--sim-fault": "nccl"},
    "fatal: rank traceback + sigquit": {"--sim-fault": "scheduler-traceback"},
    "fatal: port in use": {"--sim-fault": "port-in-use"},
    "hang (no output)": {"--sim-fault": "hang"},
}
HANG_AFTER_S = 3.0


@dataclass
class Launch:
    kind: str
    transport: str
    outcome: str  # ready / ServerDied / ServerHung / ...
    latency_s: float | None  # ready or fatal: from the line's write time to wait_ready's answer
    false_abort: bool
    timeline: list[tuple[float, str]]  # (write time, line)
    launched_at: float


def _timeline(path: Path) -> list[tuple[float, str]]:
    """(write time, line) pairs; a text written in one call with several lines shares its time."""
    rows: list[tuple[float, str]] = []
    for raw in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        stamp, tab, line = raw.partition("\t")
        try:
            rows.append((float(stamp), line))
        except ValueError:
            if raw and rows:
                rows.append((rows[-1][0], raw))
    return rows


def _written_at(timeline: list[tuple[float, str]], needle: str) -> float | None:
    return next((t for t, line in timeline if needle and needle in line), None)


def one_launch(host: Host, transport: str, kind: str, flags: dict[str, object], work: Path) -> Launch:
    timing = work / f"timing-{time.time_ns()}.tsv"
    spec = ServerSpec.simulator(tp=8, port=free_port(), host="127.0.0.1",
                                **{"--sim-startup-s": 2.0, **flags}).with_env({"TOOLKIT_SIM_TIMING_FILE": str(timing)})
    healthy = kind.startswith("healthy")
    with launch(host, spec, log_dir=str(work)) as server:
        launched_at = server.started_at
        try:
            server.wait_ready(timeout_s=60, hang_after_s=HANG_AFTER_S)
            answered = time.time()
            outcome = "ready"
        except ToolkitError as exc:
            answered = time.time()
            outcome = type(exc).__name__
            error = exc
    timeline = _timeline(timing) if timing.exists() else []
    latency = None
    if outcome == "ready":
        written = _written_at(timeline, "The server is fired up and ready to roll!")
        latency = None if written is None else answered - written
    elif outcome == "ServerDied":
        report = getattr(error, "report", None)
        decisive = report.failure.decisive if report is not None and report.failure is not None else None
        written = _written_at(timeline, decisive.text.strip()) if decisive is not None else None
        latency = None if written is None else answered - written
    elif outcome == "ServerHung":
        last = timeline[-1][0] if timeline else launched_at
        latency = answered - last - HANG_AFTER_S  # beyond the hang bound itself
    return Launch(kind, transport, outcome, latency, healthy and outcome != "ready", timeline, launched_at)


def seed_loop(run: Launch, *, poll_s: float, attempts: int = 50) -> tuple[str, float | None]:
    """Replay the seed's bash loop on a recorded timeline: (verdict, seconds after the truth was known)."""
    up_at = _written_at(run.timeline, "Uvicorn running on") or _written_at(run.timeline, "Application startup complete")
    died = run.outcome == "ServerDied"
    fatal_lines = [t for t, line in run.timeline if SEED_GREP.search(line)]
    ready_at = _written_at(run.timeline, "The server is fired up and ready to roll!")
    for i in range(1, attempts + 1):
        at = run.launched_at + (i - 1) * poll_s
        # the seed grepped `curl /v1/models` for the model name: answers once uvicorn is up, if alive
        if up_at is not None and at >= up_at and not died:
            truth = ready_at if ready_at is not None else up_at
            return "ready", max(0.0, at - truth)
        if i % 5 == 0:
            seen = [t for t in fatal_lines if t <= at]
            if seen:
                verdict = "false abort" if run.kind.startswith("healthy") else "abort"
                first_fatal = run.timeline[-1][0] if died else None
                return verdict, None if first_fatal is None else max(0.0, at - first_fatal)
    return "gave up", None


def follow_throughput(host_args: dict[str, object] | None, lines: int) -> str:
    """Follow a `lines`-line serving log in a fresh process; print lines/s and peak RSS."""
    code = f"""
import os, sys, time, tempfile, resource
sys.path[:0] = {[str(REPO)]!r}
from toolkit.host.host import Host
from toolkit.server.follow import LogFollower
path = tempfile.mktemp(suffix='.log')
line = '[2026-02-26 20:31:{{:02d}} TP0] Decode batch. #running-req: 8, #token: 5230, token usage: 0.01, accept len: 1.92, cuda graph: True, gen throughput (token/s): 480.12, #queue-req: 0\\n'
with open(path, 'w') as f:
    for i in range({lines}):
        f.write(line.format(i % 60) if i % 7 else 'INFO:     127.0.0.1:53422 - "POST /v1/completions HTTP/1.1" 200 OK\\n')
host = Host.local() if {host_args!r} is None else Host(**{host_args!r})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
follower = LogFollower(host, path, engine='sglang')
start = time.perf_counter()
follower.start()
while follower.stats.lines < {lines}:
    time.sleep(0.01)
    if follower.error: raise follower.error
elapsed = time.perf_counter() - start
follower.stop(); os.unlink(path)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{{{lines}/elapsed:,.0f}} lines/s, {{elapsed:.2f}} s, ring buffer {{len(follower.events())}} events, peak RSS {{peak/1024:.0f}} MiB (+{{(peak-before)/1024:.0f}} MiB while following)")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    return (result.stdout.strip() or result.stderr.strip().splitlines()[-1])


def _median(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:,.0f} ms" if values else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5, help="launches per kind and transport")
    parser.add_argument("--transports", default="local,ssh")
    parser.add_argument("--seed-scale", type=float, default=0.01,
                        help="scale of the seed loop's 15 s / 75 s intervals for the replay (default 0.01)")
    parser.add_argument("--follow-lines", type=int, default=500_000)
    args = parser.parse_args()
    transports = args.transports.split(",")
    work = Path(tempfile.mkdtemp(prefix="readiness-bench-"))
    sshd = None
    hosts: dict[str, Host] = {}
    if "local" in transports:
        hosts["local"] = Host.local()
    ssh_args = None
    if "ssh" in transports:
        path = find_sshd()
        if path is None:
            print("sshd not installed: skipping the SSH transport")
        else:
            sshd = LoopbackSshd.start(work / "sshd", path)
            ssh_args = {"hostname": "127.0.0.1", "user": sshd.user, "port": sshd.port,
                        "key_filename": str(sshd.client_key), "known_hosts": str(sshd.known_hosts),
                        "ssh_config": str(sshd.ssh_config)}
            hosts["ssh"] = Host(**ssh_args)  # type: ignore[arg-type]
    runs: list[Launch] = []
    try:
        total = len(KINDS) * len(hosts) * args.launches
        done = 0
        for _ in range(args.launches):
            for transport, host in hosts.items():
                for kind, flags in KINDS.items():
                    runs.append(one_launch(host, transport, kind, flags, work))
                    done += 1
                    print(f"\r{done}/{total} launches", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        poll_real, poll_scaled = 15.0, 15.0 * args.seed_scale
        header = (f"{'kind':34} {'via':5} {'toolkit: outcome':22} {'median latency':>15} {'max':>8}  "
                  f"{'seed loop @15s/75s':24} {f'seed loop @{poll_scaled:g}s/{poll_scaled * 5:g}s':26}")
        print(header)
        print("-" * len(header))
        false_aborts = seed_false_real = seed_false_scaled = 0
        ready_lat: list[float] = []
        fatal_lat: list[float] = []
        for kind in KINDS:
            for transport in hosts:
                group = [r for r in runs if r.kind == kind and r.transport == transport]
                outcomes = sorted({r.outcome for r in group})
                lats = [r.latency_s for r in group if r.latency_s is not None]
                false_aborts += sum(r.false_abort for r in group)
                (ready_lat if kind.startswith("healthy") else fatal_lat if kind.startswith("fatal") else []).extend(lats)
                seeds = []
                for poll in (poll_real, poll_scaled):
                    verdicts = [seed_loop(r, poll_s=poll) for r in group]
                    names = sorted({v for v, _ in verdicts})
                    delays = [d for _, d in verdicts if d is not None]
                    fa = sum(v == "false abort" for v, _ in verdicts)
                    if poll == poll_real:
                        seed_false_real += fa
                    else:
                        seed_false_scaled += fa
                    seeds.append(f"{'/'.join(names)} {_median(delays) if delays else ''}".strip())
                print(f"{kind:34} {transport:5} {'/'.join(outcomes) + f' ({len(group)})':22} {_median(lats):>15} "
                      f"{(max(lats) * 1000 if lats else 0):>6,.0f}ms  {seeds[0]:24} {seeds[1]:26}")
        print()
        print(f"toolkit: ready known {_median(ready_lat)} (median) after the ready line was written (target 300 ms); "
              f"fatal known {_median(fatal_lat)} (median) after the fatal line (target 500 ms); "
              f"false aborts {false_aborts} of {sum(r.kind.startswith('healthy') for r in runs)} healthy starts")
        print(f"seed loop: false aborts {seed_false_real} at real intervals, {seed_false_scaled} at scaled intervals")
        print()
        for label, host_args in (("local", None), ("ssh", ssh_args)):
            if label == "ssh" and host_args is None:
                continue
            for lines in (args.follow_lines // 5, args.follow_lines):
                print(f"log follow via {label:5} {lines:>9,} lines: {follow_throughput(host_args, lines)}")
    finally:
        for host in hosts.values():
            host.close()
        if sshd is not None:
            sshd.stop()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
