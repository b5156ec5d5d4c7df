"""Benchmark the benchmark client: accuracy against known delays, and its ingest ceiling.

Against ``fastserver.py`` (``../shared/peers/``, run from its place), pinned to CPU 0, with
every client pinned to CPU 1 and run the same way (a subprocess whose process tree's CPU
is sampled every 10 ms; the figures come from each client's own result file):

1. **accuracy** (``--delay-ms 10 --step``: exact 10 ms decode steps, truth at ``/stats``):
   median ITL, median TPOT and output tok/s against the server's truth, and ITL p99 against
   the true p99 gap, at concurrency 1, 8 and 32;
2. **ingest** (``--delay-ms 0``: tokens as fast as the server writes them): the output tok/s
   a client absorbs, and its CPU per 1,000 tokens inside the measured window (from the
   server's first arrival, for the client's reported duration).

SGLang's ``bench_serving`` and vLLM's ``vllm bench serve`` run side by side in the same run
when ``shared/peers/setup_all.sh`` has set them up (``--peers-dir``, or ``$PEERS_DIR``,
default ``/tmp/peers``); absent ones are skipped with a note.

    .venv/bin/python benchmarks/bench_client.py                  # everything, ~5 min
    .venv/bin/python benchmarks/bench_client.py --only ingest --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
FASTSERVER = REPO / ".." / "shared" / "peers" / "fastserver.py"
AT_SOCKET = Path(__file__).resolve().parent / "fastserver_at_socket.py"
SERVER_CPU, CLIENT_CPU = "0", "1"
#: where each toolkit client runs from: this checkout, plus any other tree a comparison adds
#: (bench_vs_vllm.py --base-tree: e.g. `git worktree add` of the commit before a change)
TOOLKIT_TREES: dict[str, Path] = {"toolkit": REPO}
ACCURACY_NUM = {1: 4, 8: 32, 32: 64}  # x 512 tokens at 10 ms: about 20, 20 and 10 s per client


def http(method: str, url: str) -> Any:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


class FastServer:
    """fastserver.py on CPU 0, started from its own place; stopped (and waited for) on exit."""

    def __init__(self, port: int, delay_ms: float, step: bool, script: Path = FASTSERVER,
                 python: str = sys.executable, prefix: tuple[str, ...] = (), at_socket: bool = False) -> None:
        self.port, self.url = port, f"http://127.0.0.1:{port}"
        server = [*prefix, "taskset", "-c", SERVER_CPU, python, str(script.resolve())]
        if at_socket:  # the same server, with the socket-arrival truth beside its own (fastserver_at_socket.py)
            server[-1:] = [str(AT_SOCKET), "--fastserver", str(script.resolve()), "--"]
        args = server + f"--port {port} --delay-ms {delay_ms}{' --step' if step else ''}".split()
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    def __enter__(self) -> FastServer:
        for _ in range(200):
            try:
                http("GET", self.url + "/v1/models")
                return self
            except OSError:
                time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError(f"fastserver did not come up on {self.url}")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


class CpuSampler(threading.Thread):
    """Cumulative CPU seconds of a process tree against time.perf_counter (the server's clock)."""

    TREE_REFRESH_S = (0.1, 10.0)  # first and longest pause between listings (doubling in between)

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.seen: dict[int, float] = {}

    def run(self) -> None:
        # Listing the tree (psutil scans every /proc entry: ~1.4 ms of CPU) is rare: at the start,
        # then with doubling pauses up to TREE_REFRESH_S[1] (a client forks, if ever, at start-up);
        # each 10 ms sample only reads the known processes' times (~20 us each). This thread is
        # unpinned, so it runs on the server's or the client's CPU: a 1.4 ms scan every 10 ms
        # delayed whichever it landed on and put ~+1.5 ms on the ITL p99 (the client's or the truth's).
        procs: list[psutil.Process] = []
        next_list, pause = 0.0, self.TREE_REFRESH_S[0]
        while not self.stop.is_set():
            now = time.perf_counter()
            if now >= next_list:
                next_list, pause = now + pause, min(2 * pause, self.TREE_REFRESH_S[1])
                try:
                    procs = [self.root, *self.root.children(recursive=True)]
                except psutil.Error:
                    procs = [p for p in procs if p.is_running()]
            for p in procs:
                try:
                    t = p.cpu_times()
                    self.seen[p.pid] = max(self.seen.get(p.pid, 0.0), t.user + t.system)
                except psutil.Error:
                    pass
            self.samples.append((time.perf_counter(), sum(self.seen.values())))
            self.stop.wait(0.01)

    def cpu_between(self, t0: float, t1: float) -> float | None:
        def at(t: float) -> float | None:
            prev = None
            for ts, c in self.samples:
                if ts >= t:
                    if prev is None:
                        return c
                    pt, pc = prev
                    return pc + (c - pc) * ((t - pt) / (ts - pt) if ts > pt else 0.0)
                prev = (ts, c)
            return self.samples[-1][1] if self.samples else None

        a, b = at(t0), at(t1)
        return None if a is None or b is None else b - a


def client_command(
    client: str, peers: Path, port: int, conc: int, num: int, out_len: int, res: Path, endpoint: str
) -> tuple[list[str], Path]:
    """The command line of one client run, and the folder to run it in."""
    common = f"--host 127.0.0.1 --port {port} --model fake-model --num-prompts {num} --max-concurrency {conc}"
    if client in TOOLKIT_TREES:
        flags = (
            f"--url http://127.0.0.1:{port} --model fake-model --endpoint {endpoint} --num-prompts {num} "
            f"--max-concurrency {conc} --input-len 32 --output-len {out_len} --no-progress --json"
        )
        return [sys.executable, "-m", "toolkit", "bench", *flags.split()], TOOLKIT_TREES[client]
    if client == "sglang":
        backend = "sglang-oai-chat" if endpoint == "chat" else "sglang-oai"
        flags = (
            f"--backend {backend} {common} --dataset-name random-ids --random-input-len 32 "
            f"--random-output-len {out_len} --random-range-ratio 1.0 --disable-tqdm"
        )
        python = str(peers / "venv-sgl/bin/python")
        argv = [python, "-m", "sglang.benchmark.serving", *flags.split(), "--tokenizer", str(peers / "tok")]
        return [*argv, "--output-file", str(res)], peers / "sgl"
    backend, path = (
        ("openai-chat", "/v1/chat/completions") if endpoint == "chat" else ("vllm", "/v1/completions")
    )
    flags = (
        f"--backend {backend} --endpoint {path} {common} --dataset-name random --random-input-len 32 "
        f"--random-output-len {out_len} --ignore-eos --disable-tqdm --percentile-metrics ttft,tpot,itl,e2el "
        "--metric-percentiles 50,99 --save-result"
    )
    argv = [str(peers / "venv-vllm/bin/python"), str(peers / "vllm_bench_serve.py"), *flags.split()]
    argv += [
        "--tokenizer",
        str(peers / "tok"),
        "--result-dir",
        str(res.parent),
        "--result-filename",
        res.name,
    ]
    return argv, peers


def available_clients(peers: Path, wanted: list[str]) -> list[str]:
    out = []
    for c in wanted:
        need = {
            **{name: tree / "toolkit" for name, tree in TOOLKIT_TREES.items()},
            "sglang": peers / "sgl/sglang/benchmark/serving.py",
            "vllm": peers / "venv-vllm/bin/python",
        }[c]
        if need.exists():
            out.append(c)
        else:
            print(f"note: {c} skipped: {need} is absent (run ../shared/peers/setup_all.sh)", flush=True)
    return out


def run_case(
    client: str, server: FastServer, peers: Path, conc: int, num: int, out_len: int, endpoint: str, tmp: Path,
    prefix: tuple[str, ...] = (),
) -> dict[str, Any]:
    res = tmp / f"{client}-c{conc}-{time.monotonic_ns()}.json"
    argv, cwd = client_command(client, peers, server.port, conc, num, out_len, res, endpoint)
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=str(TOOLKIT_TREES.get(client, REPO)),
    )
    http("POST", server.url + "/stats/reset")
    proc = subprocess.Popen(
        [*prefix, "taskset", "-c", CLIENT_CPU, *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sampler = CpuSampler(proc.pid)
    sampler.start()
    out, err = proc.communicate(timeout=600)
    sampler.stop.set()
    sampler.join()
    truth = http("GET", server.url + f"/stats?last={num}")
    if proc.returncode != 0:
        return {
            "client": client,
            "conc": conc,
            "num": num,
            "suite": "accuracy" if truth.get("gap_count") else "ingest",
            "error": (err or out)[-600:],
        }
    if client in TOOLKIT_TREES:
        rep = json.loads(out.strip().splitlines()[-1])
    elif client == "sglang":
        rep = json.loads(res.read_text().strip().splitlines()[-1])
    else:
        rep = json.loads(res.read_text())
    row: dict[str, Any] = {
        "client": client,
        "conc": conc,
        "num": num,
        "out_len": out_len,
        "endpoint": endpoint,
        "suite": "accuracy" if truth.get("gap_count") else "ingest",
        "truth": truth,
    }
    reported = (
        "completed duration output_throughput total_output_tokens median_itl_ms p99_itl_ms median_tpot_ms"
    )
    for key in (*reported.split(), "p99_tpot_ms", "median_ttft_ms"):
        row[key] = rep.get(key)
    t0 = truth["t_first_arrival"]
    t1 = max(truth["t_last_send"], t0 + (row["duration"] or 0.0))
    cpu = sampler.cpu_between(t0, t1)
    row["window_s"], row["cpu_window_s"] = t1 - t0, cpu
    row["cpu_process_s"] = sampler.samples[-1][1] if sampler.samples else None
    row["cpu_per_1k_tokens_ms"] = None if cpu is None else cpu / truth["tokens"] * 1e6
    row["cpu_util"] = None if cpu is None else cpu / (t1 - t0)
    return row


def med(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def accuracy(clients: list[str], peers: Path, port: int, repeat: int, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    with FastServer(port, 10.0, step=True) as srv:
        for conc, num in ACCURACY_NUM.items():
            for _ in range(repeat):
                for c in clients:
                    rows.append(run_case(c, srv, peers, conc, num, 512, "completions", tmp))
                    print(f"  accuracy {c} c={conc}: done", flush=True)
    return rows


def ordered(values: list[str]) -> list[str]:
    return sorted(set(values), key=lambda c: (["toolkit", "vllm", "sglang"] + [c]).index(c))


def print_accuracy(rows: list[dict[str, Any]]) -> None:
    rows = [r for r in rows if r.get("suite") == "accuracy"]
    if not rows:
        return
    runs = max(
        sum(1 for r in rows if r["client"] == rows[0]["client"] and r["conc"] == c) for c in ACCURACY_NUM
    )
    print(
        "\n## Accuracy: fastserver --delay-ms 10 --step (true gap 10 ms); 512 tokens/request, "
        f"n = {ACCURACY_NUM}; medians of {runs} run(s)"
    )
    print(
        "| client | c | median ITL ms (true) | error | median TPOT ms (true) | error | output tok/s (true) | error "
        "| ITL p99 ms (true) | p99 - true ms | client CPU ms per 1k tokens | CPU util |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for conc in sorted({r["conc"] for r in rows}):
        for c in ordered([r["client"] for r in rows]):
            rs = [r for r in rows if r["client"] == c and r["conc"] == conc and "error" not in r]
            if not rs:
                print(f"| {c} | {conc} | failed: {[r.get('error') for r in rows if r['client'] == c][:1]} |")
                continue
            itl, tpot, tps, p99 = (
                med(rs, k) for k in ("median_itl_ms", "median_tpot_ms", "output_throughput", "p99_itl_ms")
            )
            t_itl, t_tpot, t_tps, t_p99 = (
                statistics.median(r["truth"][k] for r in rs)
                for k in ("gap_p50_ms", "tpot_p50_ms", "tokens_per_s", "gap_p99_ms")
            )
            # errors run by run (each against its own truth), then the median over runs
            e_itl, e_tpot, e_tps = (
                statistics.median((r[k] - r["truth"][t]) / r["truth"][t] * 100 for r in rs)
                for k, t in (
                    ("median_itl_ms", "gap_p50_ms"),
                    ("median_tpot_ms", "tpot_p50_ms"),
                    ("output_throughput", "tokens_per_s"),
                )
            )
            diff = statistics.median(r["p99_itl_ms"] - r["truth"]["gap_p99_ms"] for r in rs)
            print(
                f"| {c} | {conc} | {itl:.3f} ({t_itl:.3f}) | {e_itl:+.3f}% | {tpot:.3f} ({t_tpot:.3f}) | "
                f"{e_tpot:+.3f}% | {tps:,.1f} ({t_tps:,.1f}) | {e_tps:+.3f}% | {p99:.3f} ({t_p99:.3f}) | "
                f"{diff:+.3f} | {fmt_num(med(rs, 'cpu_per_1k_tokens_ms'))} | {fmt_pct(med(rs, 'cpu_util'))} |"
            )


def fmt_num(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.0f}%"


def ingest(
    clients: list[str],
    peers: Path,
    port: int,
    repeat: int,
    tmp: Path,
    sizes: list[tuple[int, int]],
    endpoint: str,
) -> list[dict[str, Any]]:
    rows = []
    with FastServer(port, 0.0, step=False) as srv:
        for num, out_len in sizes:
            for conc in (1, 8, 32):
                for _ in range(repeat):
                    for c in clients:
                        rows.append(run_case(c, srv, peers, conc, num, out_len, endpoint, tmp))
                        print(
                            f"  ingest {c} {num}x{out_len} c={conc}: {rows[-1].get('output_throughput')}",
                            flush=True,
                        )
    return rows


def print_ingest(rows: list[dict[str, Any]]) -> None:
    rows = [r for r in rows if r.get("suite") == "ingest"]
    if not rows:
        return
    print(
        f"\n## Ingest ceiling: fastserver --delay-ms 0 (16 events per write), {rows[0].get('endpoint', 'completions')}; "
        "server on CPU 0, client on CPU 1; medians over runs"
    )
    print(
        "| requests x tokens | c | client | runs | output tok/s (reported) | true tokens / client duration | "
        "client CPU ms per 1k tokens (window) | tok/s per CPU-second | CPU util | vs vLLM | vs SGLang |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for num, out_len in sorted({(r["num"], r.get("out_len")) for r in rows}):
        for conc in sorted({r["conc"] for r in rows}):
            group = {
                c: [
                    r
                    for r in rows
                    if r["client"] == c and r["conc"] == conc and r["num"] == num and "error" not in r
                ]
                for c in ordered([r["client"] for r in rows])
            }
            tput = {c: med(rs, "output_throughput") for c, rs in group.items()}
            for c, rs in group.items():
                if not rs:
                    print(f"| {num} x {out_len} | {conc} | {c} | 0 | failed |")
                    continue
                true_rate = statistics.median(r["truth"]["tokens"] / r["duration"] for r in rs)
                mine = tput[c] or 0.0
                ratio = {
                    p: (f"{mine / t:.2f}x" if (t := tput.get(p)) and c != p else "-")
                    for p in ("vllm", "sglang")
                }
                cpu = med(rs, "cpu_per_1k_tokens_ms")
                per_core = f"{1e6 / cpu:,.0f}" if cpu else "-"
                print(
                    f"| {num} x {out_len} | {conc} | {c} | {len(rs)} | {tput[c]:,.0f} | {true_rate:,.0f} | "
                    f"{fmt_num(cpu, 2)} | {per_core} | {fmt_pct(med(rs, 'cpu_util'))} | {ratio['vllm']} | "
                    f"{ratio['sglang']} |"
                )


def load_rows(paths: list[str]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                row.setdefault("suite", "accuracy" if (row.get("truth") or {}).get("gap_count") else "ingest")
                rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers-dir", default=os.environ.get("PEERS_DIR", "/tmp/peers"))
    ap.add_argument("--clients", default="toolkit,vllm,sglang")
    ap.add_argument("--only", choices=("accuracy", "ingest"), default=None)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--port", type=int, default=18090)
    ap.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    ap.add_argument("--sizes", default="64x512,256x2048", help="ingest workloads, requests x tokens")
    ap.add_argument("--out", default=None, help="also write every row as JSON lines here")
    ap.add_argument(
        "--from-jsonl",
        nargs="+",
        default=None,
        metavar="FILE",
        help="print the tables from rows saved with --out (several runs are pooled)",
    )
    a = ap.parse_args()
    if a.from_jsonl:
        saved = load_rows(a.from_jsonl)
        print_accuracy(saved)
        print_ingest(saved)
        return 0
    if not FASTSERVER.exists():
        print(
            f"fastserver.py not found at {FASTSERVER}; run from the repository next to shared/",
            file=sys.stderr,
        )
        return 2
    peers = Path(a.peers_dir)
    clients = available_clients(peers, a.clients.split(","))
    sizes = [(int(x.split("x")[0]), int(x.split("x")[1])) for x in a.sizes.split(",")]
    rows: list[dict[str, Any]] = []
    print(
        f"clients: {', '.join(clients)}; {psutil.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}", flush=True
    )
    with tempfile.TemporaryDirectory() as tmp:
        if a.only in (None, "accuracy"):
            rows += accuracy(clients, peers, a.port, a.repeat, Path(tmp))
        if a.only in (None, "ingest"):
            rows += ingest(clients, peers, a.port + 1, a.repeat, Path(tmp), sizes, a.endpoint)
    print_accuracy(rows)
    print_ingest(rows)
    print(
        f"\nload average at the end: {os.getloadavg()[0]:.2f} (2 cores shared with other work: expect noise)"
    )
    if a.out:
        with open(a.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
