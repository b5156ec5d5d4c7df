"""The client against real HTTP servers on loopback: good streams, and every way a stream goes bad."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import select
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

import pytest
from aiohttp import web
from sim_process import terminal_signals

from toolkit.benchmark import BenchResult, Load
from toolkit.benchmark.runner import bench
from toolkit.cli.bench import main as cli_main
from toolkit.errors import BenchmarkFailed, ToolkitError


def chunk(
    text: str | None,
    *,
    chat: bool,
    finish: str | None = None,
    usage: dict | None = None,
    extra: dict | None = None,
    role: bool = False,
) -> bytes:
    if chat:
        delta: dict[str, Any] = {"role": "assistant"} if role else {}
        if text is not None:
            delta["content"] = text
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    body: dict[str, Any] = {"id": "cmpl-1", "object": "x", "created": 1, "model": "m", "choices": [choice]}
    if usage is not None:
        body["usage"] = usage
    body.update(extra or {})
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


class Loopback:
    """An aiohttp server on 127.0.0.1:0 in its own thread; `model` picks the behaviour."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.requests: list[dict[str, Any]] = []
        self.drafts = 0
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> Loopback:
        self.thread.start()
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post("/v1/completions", self.stream)
        app.router.add_post("/v1/chat/completions", self.stream)
        self.runner = web.AppRunner(app, handler_cancellation=True)  # a client gone ends its handler
        asyncio.run_coroutine_threadsafe(self.runner.setup(), self.loop).result(10)
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        asyncio.run_coroutine_threadsafe(site.start(), self.loop).result(10)
        host, port = self.runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "ok"}, {"id": "other"}]})

    async def metrics(self, request: web.Request) -> web.Response:
        d = self.drafts
        return web.Response(
            text=f"vllm:spec_decode_num_drafts_total {d}\nvllm:spec_decode_num_draft_tokens_total "
            f"{3 * d}\nvllm:spec_decode_num_accepted_tokens_total {1.5 * d}\n"
        )

    async def stream(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        mode, n = body["model"], int(body.get("max_tokens", 4))
        chat = request.path.endswith("chat/completions")
        if mode == "http500":
            return web.Response(status=500, text="CUDA out of memory. Tried to allocate 2.00 GiB")
        if mode == "hang":
            await asyncio.sleep(5)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        usage = {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": 7 + n}
        if mode == "liar":  # claims millions of tokens for a short answer
            usage = {"prompt_tokens": 7, "completion_tokens": 3_000_001, "total_tokens": 3_000_008}
        if mode == "overrun":  # ignores max_tokens and streams on
            n = 10 * n
        if mode == "malformed":
            await resp.write(chunk("a", chat=chat) + b"data: {not json}\n\n")
        elif mode == "errorevent":
            await resp.write(
                chunk("a", chat=chat) + b'data: {"error":{"message":"overloaded","code":503}}\n\n'
            )
        elif mode in ("cut", "cut_clean"):
            await resp.write(b"".join(chunk("t", chat=chat) for _ in range(3)))
            if mode == "cut":
                await resp.write(b'data: {"id":"cmpl-1","choi')
                await asyncio.sleep(0.05)
                assert request.transport is not None
                request.transport.close()  # no chunked terminator: the client sees a cut stream
                return resp
        elif mode == "continuous":  # vLLM continuous_usage_stats: cumulative counts, 2 tokens a chunk
            for i in range(n // 2):
                cum = {"prompt_tokens": 7, "completion_tokens": 2 * (i + 1)}
                await resp.write(
                    chunk("tt", chat=chat, usage=cum, finish="length" if i == n // 2 - 1 else None)
                )
        else:
            events = [chunk(None, chat=True, role=True)] if chat else []  # vLLM's role-only opener
            texts = ['say "hi"', "back\\slash", "new\nline", "é"] if mode == "escapes" else ["tok"]
            events += [chunk(texts[i % len(texts)], chat=chat) for i in range(n - 1)]
            extra = (
                {"sglext": {"spec_tokens_details": {"spec_accept_length": 2.5, "spec_verify_ct": n / 2.5}}}
                if mode == "spec"
                else None
            )
            if mode == "spec":
                extra["sglext"]["spec_tokens_details"]["spec_verify_ct"] = int(n / 2.5)  # type: ignore[index]
            events.append(
                chunk(
                    "end", chat=chat, finish="length", usage=None if mode == "nodone" else usage, extra=extra
                )
            )
            if mode != "nodone":
                if (body.get("stream_options") or {}).get("include_usage"):
                    events.append(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
                events.append(b"data: [DONE]\n\n")
            raw = b"".join(events)
            if mode == "crlf":  # CRLF endings, pings, and the bytes dribbled out in odd pieces
                raw = raw.replace(b"\n\n", b"\r\n: ping\r\n\r\n")
                for i in range(0, len(raw), 7):
                    await resp.write(raw[i : i + 7])
            else:
                for e in events if mode in ("ok", "spec", "overrun") else [raw]:
                    await resp.write(e)
                    if mode == "ok" and body.get("delay_s"):
                        await asyncio.sleep(body["delay_s"])
        self.drafts += 10
        await resp.write_eof()
        return resp


@pytest.fixture(scope="module")
def server() -> Iterator[Loopback]:
    with Loopback() as srv:
        yield srv


_LOAD_FIELDS = {f.name for f in dataclasses.fields(Load)}


def run(server: Loopback, model: str, **kw: Any) -> BenchResult:
    """bench() with small defaults; ``kw`` may mix Load fields and bench() keywords."""
    args: dict[str, Any] = dict(num_prompts=4, max_concurrency=2, input_len=5, output_len=10, warmup=0) | kw
    load = Load(**{k: v for k, v in args.items() if k in _LOAD_FIELDS})
    options = {"progress": False, "timeout_s": 5.0} | {k: v for k, v in args.items() if k not in _LOAD_FIELDS}
    return bench(server.url, load, model=model, **options)


def test_public_api_is_pinned():
    package = importlib.import_module("toolkit.benchmark")  # the package, even once tk.bench is the function
    assert package.__all__ == [
        "bench",
        "bench_async",
        "Load",
        "BenchResult",
        "ClientSettings",
        "Workload",
        "make_workload",
        "RequestRecord",
        "summarize",
        "SUMMARY_KEYS",
        "ServerView",
        "SSEDecoder",
    ]


def test_good_stream_completions(server: Loopback):
    r = run(server, "ok", warmup=None, output_len=10)
    s = r.summary
    assert (s["completed"], s["failed"], s["total_output_tokens"]) == (4, 0, 40)
    assert s["output_tokens_source"] == "usage" and s["total_input_tokens"] == 28  # usage.prompt_tokens
    assert list(r.requests["chunks"]) == [10] * 4 and list(r.requests["itl_count"]) == [9] * 4
    assert r.settings.warmup == 2 and r.workload.num_prompts == 4
    body = server.requests[-1]
    assert body["stream"] and body["stream_options"] == {"include_usage": True} and body["ignore_eos"]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 10 and len(body["prompt"].split()) == 5
    assert r.ok and r.errors == {} and "4/4 completed" in str(r)
    json.dumps(r.to_dict())


def test_server_delays_show_in_the_gaps_and_extra_body_reaches_the_server(server: Loopback):
    r = run(server, "ok", output_len=4, num_prompts=2, extra_body={"delay_s": 0.02})
    assert server.requests[-1]["delay_s"] == 0.02
    assert r.summary["completed"] == 2 and list(r.requests["itl_count"]) == [3, 3]
    assert (r.requests["itl_mean_ms"] >= 15).all()  # the server slept 20 ms after every chunk
    assert r.summary["median_tpot_ms"] >= 15 and r.summary["median_e2el_ms"] >= 45


def test_chat_skips_the_role_chunk_and_handles_escapes_and_odd_framing(server: Loopback):
    r = run(server, "escapes", endpoint="chat", output_len=9)
    assert (
        r.summary["completed"] == 4 and list(r.requests["chunks"]) == [9] * 4
    )  # role-only opener not a token
    assert server.requests[-1]["messages"][0]["role"] == "user"
    r = run(server, "crlf", output_len=6)
    assert r.summary["completed"] == 4 and list(r.requests["chunks"]) == [6] * 4


def test_no_done_and_no_usage_counts_chunks(server: Loopback):
    r = run(server, "nodone", output_len=5)
    assert r.summary["completed"] == 4 and r.summary["output_tokens_source"] == "chunks"
    assert r.summary["total_output_tokens"] == 20


def test_per_chunk_token_counts_feed_itl_per_token(server: Loopback):
    r = run(server, "continuous", output_len=8, num_prompts=2)
    rec = r.records[0]
    assert rec.chunk_tokens == (2, 2, 2, 2) and rec.output_tokens == 8
    assert r.summary["mean_tokens_per_chunk"] == 2.0
    assert r.summary["mean_itl_per_token_ms"] == pytest.approx(r.summary["mean_itl_ms"] / 2)


def test_accept_length_from_responses_then_vllm_metrics(server: Loopback):
    r = run(server, "spec", output_len=10)
    assert r.records[0].spec_verify_ct == 4 and r.server_view.accept_length == 2.5
    assert r.server_view.accept_length_source == "responses" and r.summary["accept_length"] == 2.5
    r = run(server, "ok")
    assert r.server_view.accept_length_source == "vllm_metrics" and r.summary["accept_length"] == 2.5
    assert r.server_view.vllm_spec_decode is not None and r.server_view.vllm_spec_decode["num_drafts"] == 40


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        ("http500", "HTTP 500 Internal Server Error: CUDA out of memory"),
        ("malformed", "malformed SSE event: data is not JSON: b'{not json}'"),
        ("errorevent", "the server sent an error event"),
        ("cut", "the stream was cut mid-response after 3 token chunks"),
        ("cut_clean", "ended without a finish_reason or [DONE] after 3 token chunks"),
        ("hang", "timed out after 0.3 s"),
    ],
)
def test_failures_are_counted_with_their_error(server: Loopback, model: str, needle: str):
    r = run(server, model, timeout_s=0.3 if model == "hang" else 5.0, stop_after_failures=0)
    assert r.summary["completed"] == 0 and r.summary["failed"] == 4 and not r.ok
    assert needle in (r.first_error or "")
    assert sum(r.errors.values()) == 4 and "ALL 4 REQUESTS FAILED" in str(r)
    assert r.summary["mean_ttft_ms"] is None


def test_a_run_whose_first_requests_all_fail_stops_and_says_why(server: Loopback):
    started = time.monotonic()
    with pytest.raises(BenchmarkFailed, match="the first 2 requests all failed") as caught:
        run(server, "http500", num_prompts=50, stop_after_failures=2)
    assert "HTTP 500 Internal Server Error: CUDA out of memory" in str(caught.value)
    assert "not finished" in str(caught.value) or "not sent" in str(caught.value)  # the rest never ran
    assert time.monotonic() - started < 20


def test_a_warm_up_that_fails_stops_the_benchmark_before_it_starts(server: Loopback):
    with pytest.raises(BenchmarkFailed, match="the warm-up failed: all 2 warm-up requests"):
        run(server, "http500", warmup=2)


@pytest.mark.parametrize(("model", "needle"), [
    ("overrun", "streamed more than 18 token chunks for max_tokens=10"),
    ("liar", "returned 3000001 tokens for max_tokens=10"),
])
def test_a_response_longer_than_max_tokens_is_a_failed_request(server: Loopback, model: str, needle: str):
    r = run(server, model, output_len=10, stop_after_failures=0)
    assert r.summary["completed"] == 0 and needle in (r.first_error or ""), r.errors
    assert run(server, "ok", output_len=10).ok  # a server that honours max_tokens passes


def test_refused_connection_and_the_cli_exit_status(capsys: pytest.CaptureFixture[str]):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    r = bench(url, Load(num_prompts=3, warmup=0), model="m", progress=False, stop_after_failures=0,
              tokenizer=None)
    assert r.summary["failed"] == 3 and "cannot connect to" in (r.first_error or "")
    assert r.server_view.unavailable
    with pytest.raises(BenchmarkFailed, match="the warm-up failed") as caught:
        bench(url, Load(num_prompts=3, warmup=1), model="m", progress=False, tokenizer=None)
    assert "cannot connect to" in str(caught.value)
    with pytest.raises(ToolkitError, match="pass model="):
        bench(url, Load(num_prompts=1), progress=False)
    assert cli_main(["--url", url, "--model", "m", "--num-prompts", "2", "--no-progress", "--json"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the warm-up failed") and "cannot connect to" in err
    assert "Traceback" not in err


def test_cli_json_keys_and_model_lookup(server: Loopback, capsys: pytest.CaptureFixture[str]):
    assert (
        cli_main(
            [
                "--url",
                server.url + "/v1/",
                "--num-prompts",
                "3",
                "--max-concurrency",
                "2",
                "--input-len",
                "4",
                "--output-len",
                "5",
                "--warmup",
                "0",
                "--json",
                "--no-progress",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    for key in (
        "completed",
        "failed",
        "duration",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "accept_length",
        *(f"{s}_{m}_ms" for s in ("mean", "median", "p99") for m in ("ttft", "tpot", "itl", "e2el")),
    ):
        assert key in out
    assert out["completed"] == 3 and server.requests[-1]["model"] == "ok"  # first id of /v1/models
    assert (
        cli_main(
            ["--url", server.url, "--model", "ok", "--num-prompts", "2", "--warmup", "0", "--no-progress"]
        )
        == 0
    )
    assert "Serving Benchmark Result" in capsys.readouterr().out


def test_repeats_inside_a_running_loop_like_jupyter(server: Loopback):
    async def notebook_cell() -> BenchResult:
        return run(server, "ok", repeats=3, num_prompts=2)

    r = asyncio.run(notebook_cell())
    assert len(r.runs) == 3 and r.spread is not None
    assert r.spread.loc["completed", "median"] == 2 and r.summary["completed"] == 2
    assert {"ci95_low", "ci95_high", "run_3"} <= set(r.spread.columns)
    assert sorted(r.requests["run"].unique()) == [1, 2, 3] and "median of 3 runs" in str(r)
    assert len(r.to_dict()["runs"]) == 3


SERVER = textwrap.dedent("""
    import asyncio, json, os, sys
    from aiohttp import web
    sent = 0
    async def stream(request):
        global sent
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for _ in range(400):
            await resp.write(b'data: {"choices":[{"text":"t","finish_reason":null}]}\\n\\n')
            sent += 1
            if sent == 60:  # every stream in flight has had some chunks: die (a timer raced a slow start)
                os._exit(1)
            await asyncio.sleep(0.01)
        return resp
    app = web.Application()
    app.router.add_post("/v1/completions", stream)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=lambda *a: print("up", flush=True))
""")


def test_a_server_that_dies_mid_run(tmp_path: Any):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "dying_server.py"
    script.write_text(SERVER)
    proc = subprocess.Popen([sys.executable, str(script), str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        t0 = time.monotonic()
        r = bench(f"http://127.0.0.1:{port}", Load(num_prompts=6, max_concurrency=3, warmup=0), model="m",
                  progress=False, timeout_s=10, stop_after_failures=0)
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert time.monotonic() - t0 < 10 and r.summary["failed"] == 6
    errors = " | ".join(r.errors)
    assert "after" in errors and "token chunks" in errors  # in-flight streams cut after some chunks
    # later requests find nobody listening: refused, or (a connection the kernel accepted while the process was
    # dying) reset before any answer
    assert "cannot connect" in errors or "the connection was reset after 0 token chunks" in errors, errors


SILENT = textwrap.dedent(
    """
    import socket, sys, time
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    print(server.getsockname()[1], flush=True)
    held = []
    while True:  # accept, read nothing, answer nothing: a server wedged after its port opened
        connection, _ = server.accept()
        held.append(connection)
        print("accepted", flush=True)  # a client is waiting on it: what a test can wait for
    """
)


@pytest.fixture
def silent_server(tmp_path: Any) -> Iterator[tuple[str, IO[str]]]:
    """The silent server's URL and its stdout, which says ``accepted`` for each connection."""
    script = tmp_path / "silent.py"
    script.write_text(SILENT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield f"http://127.0.0.1:{proc.stdout.readline().strip()}", proc.stdout
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def silent_url(silent_server: tuple[str, IO[str]]) -> str:
    return silent_server[0]


@pytest.mark.slow
def test_a_silent_server_fails_the_benchmark_within_its_timeout(silent_url: str) -> None:
    """Three requests at timeout 3 s once took 36 s (every request waited its own timeout)."""
    started = time.monotonic()
    with pytest.raises(BenchmarkFailed, match="the warm-up failed") as caught:
        bench(silent_url, Load(num_prompts=3), model="m", timeout_s=3, progress=False, tokenizer=None)
    took = time.monotonic() - started
    assert "timed out after 3 s" in str(caught.value)
    assert took < 12, took  # the warm-up's one timeout, not one per request


@pytest.mark.slow
def test_ctrl_c_during_a_cli_benchmark_stops_cleanly(silent_server: tuple[str, IO[str]]) -> None:
    url, server_out = silent_server
    # As a terminal starts it: SIGINT at its default. A test run started in the background of a script (`make test
    # &`) has SIGINT ignored, and an ignored SIGINT stays ignored in every child (the CLI then rightly ignores Ctrl-C,
    # as under nohup). -X faulthandler: a SIGABRT below prints where every thread of a stuck CLI is.
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "toolkit", "bench", "--url", url, "--model", "m",
         "--num-prompts", "4", "--tokenizer", "words", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=terminal_signals,
    )
    # Wait until the benchmark's first request reaches the silent server (the CLI's imports can take
    # seconds on a loaded machine), not a fixed time: then SIGINT lands inside the benchmark.
    # (the server printed nothing since its port line, so nothing waits in the text buffer: select sees it all)
    ready, _, _ = select.select([server_out], [], [], 120)
    if not ready or server_out.readline().strip() != "accepted":
        proc.kill()
        _, err = proc.communicate(timeout=30)
        raise AssertionError(f"the benchmark never reached the server: {err}")
    proc.send_signal(2)  # SIGINT, what Ctrl-C sends
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=30)
        raise AssertionError(f"the CLI still ran 30 s after Ctrl-C; its threads:\n{err[-6000:]}") from None
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip() == "interrupted: the benchmark was stopped (Ctrl-C); no result"
