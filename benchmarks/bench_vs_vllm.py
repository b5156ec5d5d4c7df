"""The benchmark client at the limit (issue 29): the toolkit's client and vLLM's, against the truth.

Three cases against ``fastserver.py --step`` (one decode step every D ms for all streams, and the
server's own record of every token it sent, ``/stats``), the server pinned to CPU 0 and each client,
with its whole process tree, to CPU 1; the two clients alternate in ABBA order (round 1 toolkit then
vLLM, round 2 vLLM then toolkit, ...). For every run: the error of what the client reported, as
client minus truth, for output tok/s (in %), ITL p99 and TTFT p50 (ms), and the client's CPU seconds
inside the measured window and over its whole process (imports and warm-up included). The table
gives the median over rounds and the spread (min..max).

    .venv/bin/python benchmarks/bench_vs_vllm.py                     # all three cases, ~25 min
    .venv/bin/python benchmarks/bench_vs_vllm.py --cases c32 --rounds 4
    .venv/bin/python benchmarks/bench_vs_vllm.py --from-jsonl rows.jsonl   # print saved rows again

The peers' set-up (``shared/peers/setup_all.sh``: the vLLM client venv, ``tok``) is read from
``--peers-dir`` (default ``$PEERS_DIR`` or ``/tmp/peers``); fastserver runs from there too unless
``--fastserver`` names it. vLLM 0.33.0's client runs through the peers' ``vllm_bench_serve.py``
(the same code path as ``vllm bench serve``). The truth's definitions (fastserver.py ``Truth``):
output tok/s = tokens / (first request's arrival -> last token sent); gaps = every interval between
two token writes of one stream; TTFT = handler entry -> first token write (it excludes TCP connect
and the HTTP parse, so part of any TTFT error is the server's queue, not the client). So fastserver
runs under ``fastserver_at_socket.py``, which adds a second TTFT truth, from the moment the server
process read the request's bytes, and the server's queue (read -> handler entry); the table gives
the TTFT error against both (``--handler-truth-only`` runs fastserver bare).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_client import FASTSERVER, TOOLKIT_TREES, FastServer, available_clients, run_case


@dataclass(frozen=True)
class Case:
    name: str
    conc: int
    step_ms: float
    num: int
    rounds: int


CASES = {
    "c256": Case("256 streams, 8 ms step, 2,048 prompts", 256, 8.0, 2048, 8),
    "c256long": Case("256 streams, 8 ms step, 5,120 prompts", 256, 8.0, 5120, 4),
    "c32": Case("32 streams, 10 ms step, 512 prompts", 32, 10.0, 512, 8),
}
FIGURES = (  # key in a row, header with its unit, format
    ("tps_err_pct", "output tok/s error %", "{:+.2f}"),
    ("itl_p99_err_ms", "ITL p99 error ms", "{:+.2f}"),
    ("ttft_p50_err_ms", "TTFT p50 error ms", "{:+.1f}"),
    ("ttft_socket_err_ms", "TTFT p50 error from the socket ms", "{:+.1f}"),
    ("queue_p50_ms", "server queue p50 ms", "{:.1f}"),
    ("cpu_window_s", "client CPU in window s", "{:.2f}"),
    ("cpu_process_s", "client CPU, whole process s", "{:.1f}"),
)


def errors(row: dict[str, Any]) -> dict[str, Any]:
    """Client minus truth for one run (None where the client failed)."""
    t = row.get("truth") or {}
    if "error" in row or not t.get("tokens_per_s"):
        return row
    row["tps_err_pct"] = (row["output_throughput"] - t["tokens_per_s"]) / t["tokens_per_s"] * 100
    row["itl_p99_err_ms"] = row["p99_itl_ms"] - t["gap_p99_ms"] if row.get("p99_itl_ms") is not None else None
    row["ttft_p50_err_ms"] = row["median_ttft_ms"] - t["ttft_p50_ms"]
    if t.get("ttft_socket_p50_ms") is not None:
        row["ttft_socket_err_ms"] = row["median_ttft_ms"] - t["ttft_socket_p50_ms"]
        row["queue_p50_ms"] = t["queue_p50_ms"]
    row["tokens_ok"] = row.get("total_output_tokens") == t.get("tokens")
    return row


def run_case_rounds(case: Case, key: str, clients: list[str], peers: Path, port: int, out_len: int,
                    rounds: int, fastserver: Path, python: str, tmp: Path, prefix: tuple[str, ...],
                    at_socket: bool) -> list[dict[str, Any]]:
    rows = []
    with FastServer(port, case.step_ms, step=True, script=fastserver, python=python, prefix=prefix,
                    at_socket=at_socket) as srv:
        for r in range(rounds):
            order = clients if r % 2 == 0 else clients[::-1]  # ABBA
            for c in order:
                row = errors(run_case(c, srv, peers, case.conc, case.num, out_len, "completions", tmp, prefix))
                row.update(case=key, round=r + 1, load1=os.getloadavg()[0])
                rows.append(row)
                shown = {k: row.get(k) for k, _, _ in FIGURES}
                print(f"  {key} round {r + 1} {c}: " + ", ".join(
                    f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items())
                    + (f" FAILED {row['error'][-200:]!r}" if "error" in row else ""), flush=True)
    return rows


def cell(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}..{fmt.format(max(values))})"


def print_table(rows: list[dict[str, Any]]) -> None:
    print("\n| case | client | runs | " + " | ".join(h for _, h, _ in FIGURES) + " | tokens exact | load (1 min) |")
    print("|---" * (len(FIGURES) + 5) + "|")
    for key, case in CASES.items():
        for client in ("toolkit-base", "toolkit", "vllm"):
            rs = [r for r in rows if r.get("case") == key and r["client"] == client and "error" not in r]
            failed = sum(1 for r in rows if r.get("case") == key and r["client"] == client and "error" in r)
            if not rs and not failed:
                continue
            cells = [cell([r[k] for r in rs if r.get(k) is not None], fmt) for k, _, fmt in FIGURES]
            exact = f"{sum(1 for r in rs if r.get('tokens_ok'))}/{len(rs)}"
            load = cell([r["load1"] for r in rs], "{:.1f}")
            print(f"| {case.name} | {client} | {len(rs)}{f' (+{failed} failed)' if failed else ''} | "
                  + " | ".join(cells) + f" | {exact} | {load} |")
    print("\nmedian over rounds (min..max); errors are client minus the server's truth")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers-dir", default=os.environ.get("PEERS_DIR", "/tmp/peers"))
    ap.add_argument("--fastserver", default=None, help="fastserver.py (default: shared/peers, else the peers dir)")
    ap.add_argument("--server-python", default=None, help="python for fastserver (default: the peers' venv-srv)")
    ap.add_argument("--clients", default="toolkit,vllm")
    ap.add_argument("--cases", default=",".join(CASES), help=f"any of {', '.join(CASES)}")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per case (default: 8, 4 for c256long)")
    ap.add_argument("--out-len", type=int, default=128, help="tokens per request")
    ap.add_argument("--port", type=int, default=18190)
    ap.add_argument("--run-under", default="",
                    help="a command prefix for server and clients, e.g. 'chrt -f 1' (real-time, needs root): on a "
                         "machine that others load, pinning alone leaves them both cores, and 'nice -n -20' still "
                         "let them delay a wake-up by several ms")
    ap.add_argument("--base-tree", default=None, metavar="DIR",
                    help="also run the toolkit client from this checkout, as client 'toolkit-base' (before/after)")
    ap.add_argument("--handler-truth-only", action="store_true",
                    help="run fastserver as it is, without the socket-arrival truth (fastserver_at_socket.py)")
    ap.add_argument("--out", default=None, help="append every row as a JSON line here")
    ap.add_argument("--from-jsonl", nargs="+", default=None, metavar="FILE", help="print saved rows")
    a = ap.parse_args()
    if a.from_jsonl:
        print_table([json.loads(line) for p in a.from_jsonl for line in Path(p).read_text().splitlines() if line])
        return 0
    unknown = [c for c in a.cases.split(",") if c not in CASES]
    if unknown:
        print(f"unknown case(s) {unknown}: choose from {', '.join(CASES)}", file=sys.stderr)
        return 2
    peers = Path(a.peers_dir)
    fastserver = Path(a.fastserver) if a.fastserver else FASTSERVER if FASTSERVER.exists() else peers / "fastserver.py"
    if not fastserver.exists():
        print(f"fastserver.py not found at {fastserver}: pass --fastserver or set up {peers}", file=sys.stderr)
        return 2
    python = a.server_python or str(peers / "venv-srv/bin/python")
    if not Path(python).exists():
        python = sys.executable
    if a.base_tree:
        TOOLKIT_TREES["toolkit-base"] = Path(a.base_tree).resolve()
    clients = available_clients(peers, a.clients.split(","))
    print(f"clients: {', '.join(clients)}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}; "
          f"server {fastserver} on CPU 0 ({python}); run under {a.run_under or '-'}", flush=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, key in enumerate(a.cases.split(",")):
            case = CASES[key]
            rows += run_case_rounds(case, key, clients, peers, a.port + i, a.out_len, a.rounds or case.rounds,
                                    fastserver, python, Path(tmp), tuple(a.run_under.split()),
                                    at_socket=not a.handler_truth_only)
            if a.out:
                with open(a.out, "a") as f:
                    for r in rows:
                        if r.get("case") == key:
                            f.write(json.dumps(r) + "\n")
    print_table(rows)
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (2 cores shared with other work: expect noise)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
