"""benchmarks/fastserver_at_socket.py: the peers' fastserver, run as it is, with a TTFT truth from the socket.

The wrapper imports ``../shared/peers/fastserver.py`` from where it lies and stamps the time aiohttp's
protocol first holds each request's bytes. These tests run it for real on loopback (one step of 20 ms,
so a request always waits for the next step) and read ``/stats`` as bench_vs_vllm.py does.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FASTSERVER = REPO.parent / "shared" / "peers" / "fastserver.py"
pytestmark = pytest.mark.skipif(not FASTSERVER.exists(), reason=f"the peers' fastserver is not at {FASTSERVER}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _call(port: int, method: str, path: str, body: dict[str, object] | None = None) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers={"Content-Type": "application/json"})
        return conn.getresponse().read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "fastserver_at_socket.py"),
                             "--fastserver", str(FASTSERVER), "--", "--port", str(port), "--delay-ms", "20",
                             "--step"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                _call(port, "GET", "/v1/models")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.poll() is not None and proc.stderr else ""
                    pytest.fail(f"fastserver_at_socket.py did not answer on port {port}: {err[-2000:]}")
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_every_request_gets_a_socket_truth_no_later_than_its_handler(port: int) -> None:
    _call(port, "POST", "/stats/reset")
    body = {"model": "fake-model", "prompt": "hello", "max_tokens": 4, "stream": True}
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: _call(port, "POST", "/v1/completions", body), range(4)))
    assert all(a.rstrip().endswith(b"data: [DONE]") for a in answers), answers
    truth = json.loads(_call(port, "GET", "/stats"))
    assert truth["requests"] == 4 and truth["tokens"] == 16, truth
    # the server's own truth is still there, unchanged in meaning; the socket's starts earlier or at the same time
    assert truth["ttft_socket_p50_ms"] is not None, f"no request was stamped at the socket: {truth}"
    assert truth["ttft_socket_p50_ms"] >= truth["ttft_p50_ms"] >= 0, truth
    assert 0 <= truth["queue_p50_ms"] <= truth["queue_p99_ms"] < 1000, truth
    # the first token leaves at the next 20 ms step: the truth from the socket cannot exceed one step by much
    assert truth["ttft_socket_p50_ms"] < 20 + 15, truth


def test_a_plain_request_and_the_stats_route_still_answer(port: int) -> None:
    answer = json.loads(_call(port, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}))
    assert answer["usage"]["completion_tokens"] == 2, answer
    assert json.loads(_call(port, "GET", "/stats?last=1"))["requests"] == 1
