"""Log line formats of SGLang, uvicorn and vLLM, copied from real logs (../shared/real-logs).

`LogWriter` writes each line with one `os.write`, so processes sharing stdout never interleave mid-line.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.engines.release_profile import ENGINE_NAMES

__all__ = ["DecodeStats", "LogWriter", "PrefillStats", "SIMULATOR_BANNER", "banner", "record",
           "sglang_decode_batch", "sglang_line", "sglang_prefill_batch", "uvicorn_line", "vllm_label",
           "vllm_line", "vllm_plain", "vllm_spec_metrics", "vllm_throughput", "vllm_uvicorn", "plain_uvicorn"]

SIMULATOR_BANNER = ("toolkit.sim: this is a SIMULATED {engine} server (no GPU, no model weights); "
                    "the lines below imitate the real log formats. See docs/simulator.md.")
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50, "sim": 100}


def banner(engine: str, now: float, pid: int, details: str) -> str:
    """The first line of every simulated log, in the engine's own line format."""
    text = SIMULATOR_BANNER.format(engine=ENGINE_NAMES.get(engine, engine)) + f" [{details}]"
    return record(engine, now, text, f"APIServer pid={pid}", "info", "simulator")


def record(engine: str, now: float, message: str, process: str, level: str, source: str,
           rank: int | None = None) -> str:
    """One logged record as the engine formats it; vLLM prefixes every line of a multi-line message."""
    if engine == "sglang":
        return sglang_line(now, message, rank)
    if engine == "transformers":
        return message  # transformers' logger prints the message alone (no formatter on its handler)
    return "\n".join(vllm_line(now, process, level, source, part) for part in message.split("\n"))


def _sglang_time(now: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))


def sglang_line(now: float, message: str, rank: int | None = None) -> str:
    """`[2026-02-26 20:26:06 TP5] message`; rank is None for the main process or when tp == 1."""
    return f"[{_sglang_time(now)}{f' TP{rank}' if rank is not None else ''}] {message}"


def _levelprefix(level: str) -> str:
    """uvicorn's: levelname + ":" left-justified to 9."""
    return (level.upper() + ":").ljust(9)


def uvicorn_line(now: float, level: str, message: str) -> str:
    """SGLang's uvicorn format: `[2026-02-09 14:38:44] INFO:     Started server process [24440]`."""
    return f"[{_sglang_time(now)}] {_levelprefix(level)} {message}"


def vllm_line(now: float, process: str, level: str, source: str, message: str) -> str:
    """`(APIServer pid=29938) INFO 08-01 23:25:19 [api_server.py:616] message`."""
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(now))
    return f"({process}) {level.upper()} {stamp} [{source}] {message}"


def vllm_label(role: str, rank: int, pid: int) -> str:
    """The process prefix vLLM prints for a child, e.g. `Worker_TP3 pid=4242`."""
    return f"{'EngineCore' if role == 'engine-core' else f'Worker_TP{rank}'} pid={pid}"


def vllm_plain(process: str, message: str) -> str:
    """A line printed (not logged) by a vLLM process: only the process prefix."""
    return f"({process}) {message}"


def plain_uvicorn(level: str, message: str) -> str:
    """uvicorn's own format, as ``transformers serve`` leaves it: ``INFO:     Application startup complete.``"""
    return f"{_levelprefix(level)} {message}"


def vllm_uvicorn(process: str, level: str, message: str) -> str:
    """`(APIServer pid=29938) INFO:     Application startup complete.`"""
    return f"({process}) {_levelprefix(level)} {message}"


@dataclass(frozen=True)
class DecodeStats:
    """One SGLang `Decode batch` line (scheduler_metrics_mixin.log_decode_stats)."""

    running_req: int
    num_tokens: int
    token_usage: float
    cuda_graph: bool
    gen_throughput: float
    queue_req: int
    accept_len: float | None = None  # present with speculative decoding
    accept_rate: float | None = None


@dataclass(frozen=True)
class PrefillStats:
    """One SGLang `Prefill batch` line (scheduler_metrics_mixin.log_prefill_stats)."""

    new_seq: int
    new_token: int
    cached_token: int
    token_usage: float
    running_req: int
    queue_req: int
    input_throughput: float


def sglang_decode_batch(s: DecodeStats) -> str:
    """`Decode batch, #running-req: 1, #token: 181, token usage: 0.00, accept len: 2.75, ...`."""
    parts = [f"Decode batch, #running-req: {s.running_req}", f"#token: {s.num_tokens}",
             f"token usage: {s.token_usage:.2f}"]
    if s.accept_len is not None:
        parts += [f"accept len: {s.accept_len:.2f}", f"accept rate: {s.accept_rate or 0.0:.2f}"]
    parts += [f"cuda graph: {s.cuda_graph}", f"gen throughput (token/s): {s.gen_throughput:.2f}",
              f"#queue-req: {s.queue_req}"]
    return ", ".join(parts)


def sglang_prefill_batch(s: PrefillStats) -> str:
    """`Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, ...`."""
    return (f"Prefill batch, #new-seq: {s.new_seq}, #new-token: {s.new_token}, #cached-token: {s.cached_token}, "
            f"token usage: {s.token_usage:.2f}, #running-req: {s.running_req}, #queue-req: {s.queue_req}, "
            f"#pending-token: 0, cuda graph: False, input throughput (token/s): {s.input_throughput:.2f}")


def vllm_throughput(prompt_tps: float, gen_tps: float, running: int, waiting: int, kv_usage: float,
                    prefix_hit: float) -> str:
    """vLLM loggers.py: `Engine 000: Avg prompt throughput: ... Prefix cache hit rate: 13.2%`."""
    return (f"Engine 000: Avg prompt throughput: {prompt_tps:.1f} tokens/s, Avg generation throughput: "
            f"{gen_tps:.1f} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: "
            f"{kv_usage * 100:.1f}%, Prefix cache hit rate: {prefix_hit * 100:.1f}%")


def vllm_spec_metrics(num_drafts: int, accepted: int, drafted: int, per_position: Sequence[int],
                      interval_s: float) -> str:
    """vLLM spec_decode metrics.py: `SpecDecoding metrics: Mean acceptance length: 2.58, ...`."""
    mean_len = 1.0 + accepted / num_drafts if num_drafts else 0.0
    rates = ", ".join(f"{n / num_drafts:.3f}" if num_drafts else "0.000" for n in per_position)
    draft_rate = accepted / drafted * 100 if drafted else 0.0
    span = max(interval_s, 1e-9)
    return (f"SpecDecoding metrics: Mean acceptance length: {mean_len:.2f}, Accepted throughput: "
            f"{accepted / span:.2f} tokens/s, Drafted throughput: {drafted / span:.2f} tokens/s, Accepted: "
            f"{accepted} tokens, Drafted: {drafted} tokens, Per-position acceptance rate: {rates}, "
            f"Avg Draft acceptance rate: {draft_rate:.1f}%")


class LogWriter:
    """Writes whole lines to a file descriptor (stdout by default), dropping those below the log level."""

    def __init__(self, fd: int = 1, level: str = "info") -> None:
        self.fd = fd
        self.min_level = _LEVELS.get(level.lower(), 20)
        # Benchmarks only (benchmarks/readiness.py): `TOOLKIT_SIM_TIMING_FILE` gets "EPOCH_SECONDS<TAB>line"
        # after each line, finer than the log's stamps; a variable, as every TP worker writes lines too.
        timing = os.environ.get("TOOLKIT_SIM_TIMING_FILE")
        self._timing_fd = os.open(timing, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if timing else None

    def enabled(self, level: str) -> bool:
        return _LEVELS.get(level.lower(), 20) >= self.min_level

    def write(self, text: str, level: str = "info") -> None:
        """Write `text` plus a newline in one system call (a line may start with '\\r', like tqdm bars)."""
        if not self.enabled(level):
            return
        data = (text + "\n").encode("utf-8", "replace")
        while data:
            try:
                written = os.write(self.fd, data)
            except BrokenPipeError:
                return  # the reader went away; the server keeps its own state
            except InterruptedError:
                continue
            data = data[written:]
        if self._timing_fd is not None:
            os.write(self._timing_fd, f"{time.time():.6f}\t{text}\n".encode("utf-8", "replace"))
