"""Helpers for tests that run the simulator as a real subprocess and talk to it over real HTTP.

Stdlib only (subprocess, http.client), so a test needs no event loop:

>>> with SimProcess(["--model-path", "m", "--sim-startup-s", "0.5"]) as sim:  # doctest: +SKIP
...     sim.wait_for("The server is fired up and ready to roll!")
...     rate = stream_completion(sim.port, max_tokens=80).decode_tok_s
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "EAGLE3_ARGS", "READY_LINE", "SimProcess", "StreamResult", "child_pids", "free_port", "get_json", "is_alive", "measure_rate", "proc_cmdline",
    "proc_environ", "stream_completion",
]


#: SGLang's ready line, which the simulator prints once warm-up has gone through.
READY_LINE = "The server is fired up and ready to roll!"
#: The seed's EAGLE-3 configuration: 2 draft steps, top-1, 3 tokens per verify.
EAGLE3_ARGS = (
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d", "--speculative-num-steps", "2",
    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3",
)


def terminal_signals() -> None:
    """``preexec_fn`` for a child started as a terminal starts it: SIGHUP, SIGINT and SIGTERM at their defaults.

    Under nohup, or in a script's background, pytest runs with SIGHUP or SIGINT ignored, every child inherits
    that, and a CLI or driver rightly keeps ignoring them; a test that sends one must undo that first.
    """
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def free_port() -> int:
    """An ephemeral loopback port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def quiet_port() -> int:
    """A free port below the kernel's ephemeral range, for a server that binds it long after it is chosen.

    :func:`free_port` hands out an ephemeral port, and the kernel may give it again to any socket bound to
    port 0 before the server takes it: a notebook's Jupyter kernel binds five such ports as it starts, and
    once took the port a test had chosen for the notebook's server (PortInUse naming ``ipykernel_launcher``).
    Nothing binds below ``ip_local_port_range`` unless it names the port, so a port free there stays free.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10000, max(low, 10001))
        with socket.socket() as sock:
            try:
                sock.bind(("", port))  # every interface: a server on 0.0.0.0 or 127.0.0.1 would clash with a holder
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between 10000 and {low} in 200 tries")


LISTENER = (
    "import socket, sys, time; s = socket.socket(); s.bind(('0.0.0.0', 0)); s.listen(); "
    "print(s.getsockname()[1], flush=True); sys.stdin.read()"
)


@contextlib.contextmanager
def listening_process() -> Iterator[tuple[int, int]]:
    """(pid, port) of a separate plain ``python -c`` holding a listening TCP port until the block ends.

    A port held by the test process itself names the pytest-xdist worker, which renames itself
    ("[pytest-xdist running] tests/...") when setproctitle is installed; a child keeps its argv.
    """
    proc = subprocess.Popen([sys.executable, "-c", LISTENER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.strip():
            raise RuntimeError(f"the listener exited before it listened (status {proc.wait(5)})")
        yield proc.pid, int(line)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # the listener's stdin ends: it exits
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


class SimProcess:
    """`python -m toolkit.sim ARGS` with its log in a temporary file; a context manager that stops it.

    `--port` (a free one) and `--host 127.0.0.1` are added unless ARGS set them.
    """

    def __init__(self, args: list[str], env: dict[str, str] | None = None, port: int | None = None) -> None:
        self.port = port or free_port()
        self.args = list(args)
        if "--port" not in self.args:
            self.args += ["--port", str(self.port)]
        if "--host" not in self.args:
            self.args += ["--host", "127.0.0.1"]
        self._log = tempfile.NamedTemporaryFile(prefix="sim-", suffix=".log", delete=False)  # noqa: SIM115
        self.log_path = Path(self._log.name)
        self.proc = subprocess.Popen([sys.executable, "-m", "toolkit.sim", *self.args], stdout=self._log,
                                     stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, text: str, timeout_s: float = 45.0) -> str:
        """Wait until `text` appears in the log; raise with the log tail if the process exits first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            log = self.log_text()
            if text in log:
                return log
            if self.proc.poll() is not None:
                log = self.log_text()
                if text in log:
                    return log
                raise AssertionError(f"simulator exited ({self.proc.returncode}) before {text!r}:\n{log[-3000:]}")
            time.sleep(0.02)
        raise AssertionError(f"{text!r} not in the simulator log after {timeout_s} s:\n{self.log_text()[-3000:]}")

    def wait_exit(self, timeout_s: float = 45.0) -> int:
        return self.proc.wait(timeout=timeout_s)

    def stop(self) -> int:
        """SIGTERM, then SIGKILL after 5 s; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._log.close()
        os.unlink(self.log_path)


@dataclass(frozen=True)
class StreamResult:
    """What a streaming client saw: per content chunk (arrival time, tokens), the usage block, all events."""

    chunk_times: tuple[float, ...]
    chunk_tokens: tuple[int, ...]
    usage: dict[str, int] | None
    events: tuple[dict[str, object], ...]

    @property
    def tokens(self) -> int:
        return sum(self.chunk_tokens)

    @property
    def decode_tok_s(self) -> float:
        """Tokens after the first chunk divided by the time from the first to the last chunk."""
        span = self.chunk_times[-1] - self.chunk_times[0]
        return (self.tokens - self.chunk_tokens[0]) / span

    @property
    def fitted_tok_s(self) -> float:
        """Least-squares slope of cumulative tokens over arrival time after the first chunk.

        Unlike `decode_tok_s` it barely moves when one read is late (a busy CI machine can stall a
        process for tens of milliseconds), so tests compare it with the latency model.
        """
        xs = self.chunk_times[1:]
        ys = [sum(self.chunk_tokens[1:i + 1]) for i in range(1, len(self.chunk_tokens))]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        var = sum((x - mean_x) ** 2 for x in xs)
        return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var


def stream_completion(port: int, max_tokens: int, model: str = "m", chat: bool = False, include_usage: bool = True,
                      timeout_s: float = 30.0) -> StreamResult:
    """One streaming request; token counts per chunk are its words (every simulated token is one word)."""
    body: dict[str, object] = {"model": model, "max_tokens": max_tokens, "stream": True, "ignore_eos": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    if chat:
        body["messages"] = [{"role": "user", "content": "measure the decode rate"}]
    else:
        body["prompt"] = "measure the decode rate"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("POST", "/v1/chat/completions" if chat else "/v1/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            raise AssertionError(f"HTTP {response.status}: {response.read()!r}")
        times, tokens, events, usage = [], [], [], None
        while line := response.readline():
            now = time.perf_counter()
            if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                continue
            event = json.loads(line[6:])
            events.append(event)
            usage = event.get("usage") or usage
            for choice in event["choices"]:
                text = choice.get("text") or (choice.get("delta") or {}).get("content") or ""
                if text:
                    times.append(now)
                    tokens.append(len(text.split()))
        return StreamResult(tuple(times), tuple(tokens), usage, tuple(events))
    finally:
        conn.close()


def measure_rate(port: int, expected_tok_s: float, max_tokens: int = 80, rel: float = 0.05, attempts: int = 2,
                 **kwargs: object) -> list[float]:
    """Single-stream fitted rates, measuring again (up to `attempts`) while off by more than `rel`.

    Returns every measurement; the last one is within tolerance unless all attempts missed.
    """
    rates: list[float] = []
    for _ in range(attempts):
        rates.append(stream_completion(port, max_tokens, **kwargs).fitted_tok_s)  # type: ignore[arg-type]
        if abs(rates[-1] - expected_tok_s) <= rel * expected_tok_s:
            break
    return rates


def get_json(port: int, path: str, method: str = "GET", body: object = None) -> tuple[int, object]:
    """(status, decoded JSON or text) of one request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, None if body is None else json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        raw = response.read()
        try:
            return response.status, json.loads(raw)
        except json.JSONDecodeError:
            return response.status, raw.decode(errors="replace")
    finally:
        conn.close()


def child_pids(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc (Linux)."""
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry.name))
    return sorted(kids)


def proc_environ(pid: int) -> dict[str, str]:
    """The environment `pid` was started with (/proc/PID/environ)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def proc_cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").rstrip("\0").split("\0")


def is_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
