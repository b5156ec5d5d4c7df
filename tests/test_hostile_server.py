"""Issue 25: a server's numbers are checked and its side answers bounded in bytes and time.

A real aiohttp server on loopback plays the liar; each test sets what it answers on one path.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import numpy as np
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from toolkit.benchmark import Load
from toolkit.benchmark.runner import bench
from toolkit.benchmark.server_view import VllmSpecCounters, sglang_accept_length, vllm_spec_delta
from toolkit.benchmark.side_reads import fetch_snapshot
from toolkit.benchmark.tokens import checked_count
from toolkit.benchmark.workload import refine_prompt
from toolkit.errors import BenchmarkFailed, MalformedResponse, ToolkitError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _sse(usage: dict[str, int]) -> bytes:
    events = [{"choices": [{"index": 0, "text": "tok", "finish_reason": None}]},
              {"choices": [{"index": 0, "text": "end", "finish_reason": "length"}]},
              {"choices": [], "usage": usage}]
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


class Liar:
    """An OpenAI-shaped server on 127.0.0.1:0 in its own thread; ``answers[path]`` overrides a route."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.answers: dict[str, Handler] = {}

    def __enter__(self) -> Liar:
        self.thread.start()
        app = web.Application()
        for method, path in (("GET", "/v1/models"), ("POST", "/tokenize"), ("POST", "/v1/completions"),
                             ("GET", "/metrics"), ("GET", "/server_info")):
            app.router.add_route(method, path, self.route)
        self.server = TestServer(app, host="127.0.0.1")  # aiohttp's own loopback server, a real socket
        asyncio.run_coroutine_threadsafe(self.server.start_server(), self.loop).result(10)
        self.url = str(self.server.make_url("")).rstrip("/")
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def route(self, request: web.Request) -> web.StreamResponse:
        if request.path in self.answers:
            return await self.answers[request.path](request)
        if request.path == "/v1/models":
            return web.json_response({"data": [{"id": "m"}]})
        if request.path == "/tokenize":
            prompt = (await request.json())["prompt"]
            return web.json_response({"count": len(prompt.split())})
        if request.path == "/v1/completions":
            body = await request.json()
            return web.Response(body=_sse({"prompt_tokens": 5, "completion_tokens": body["max_tokens"]}),
                                content_type="text/event-stream")
        return web.Response(status=404)


@pytest.fixture
def liar() -> Iterator[Liar]:
    with Liar() as server:
        yield server


def _bench(url: str, *, input_len: int = 5, **kw: Any) -> Any:
    load = Load(num_prompts=2, max_concurrency=1, input_len=input_len, output_len=2, warmup=0)
    return bench(url, load, **({"progress": False, "timeout_s": 5.0} | kw))


def test_a_token_count_of_one_for_any_text_is_refused_not_fitted(liar: Liar) -> None:
    """``{"count": 1}`` once made the fitting ask numpy for a billion words (8 GiB)."""
    async def one(request: web.Request) -> web.Response:
        return web.json_response({"count": 1})

    liar.answers["/tokenize"] = one
    with pytest.raises(MalformedResponse, match="counted 1 tokens in a text of 1,024 words"):
        _bench(liar.url, model="m", input_len=1024)


def test_the_fitting_grows_a_prompt_by_at_most_8_words_a_missing_token() -> None:
    grown = refine_prompt(["word"] * 1000, 1, 1024, 1, np.random.default_rng(0))
    assert grown is not None and len(grown) <= 1000 + 8 * 1023


@pytest.mark.parametrize(("body", "needle"), [
    ({"tokens": [[1, 2, 3]]}, "not a flat list of integer ids"),
    ({"count": -3}, "counted -3 tokens"),
    ({"count": 10**12}, "counted 1,000,000,000,000 tokens"),
])
def test_a_tokenize_answer_that_cannot_be_true_is_named(body: Any, needle: str) -> None:
    with pytest.raises(MalformedResponse, match=needle):
        checked_count(body, "a prompt of six words in it")


def test_a_batch_shaped_tokenize_answer_is_not_counted_as_one_token(liar: Liar) -> None:
    async def batch(request: web.Request) -> web.Response:
        prompt = (await request.json())["prompt"]
        return web.json_response({"tokens": [list(range(len(prompt.split())))]})

    liar.answers["/tokenize"] = batch
    with pytest.raises(MalformedResponse, match="not a flat list"):
        _bench(liar.url, model="m", input_len=64)


def test_a_negative_usage_count_fails_the_request_instead_of_the_throughput(liar: Liar) -> None:
    async def negative(request: web.Request) -> web.Response:
        return web.Response(body=_sse({"prompt_tokens": 5, "completion_tokens": -1000}),
                            content_type="text/event-stream")

    liar.answers["/v1/completions"] = negative
    with pytest.raises(BenchmarkFailed, match=r"completion_tokens=-1000: a count outside \[0"):
        _bench(liar.url, model="m", tokenizer=None)


def test_a_huge_models_list_is_not_read_whole(liar: Liar) -> None:
    async def huge(request: web.Request) -> web.Response:  # valid JSON, 2 MiB of padding
        return web.json_response({"data": [{"id": "m"}], "pad": "x" * (2 << 20)})

    liar.answers["/v1/models"] = huge
    with pytest.raises(MalformedResponse, match="answered more than 1,048,576 bytes"):
        _bench(liar.url, tokenizer=None)


def test_a_models_list_of_strings_is_named_not_a_type_error(liar: Liar) -> None:
    async def strings(request: web.Request) -> web.Response:
        return web.json_response({"data": ["m"]})

    liar.answers["/v1/models"] = strings
    with pytest.raises(MalformedResponse, match="answered no model id"):
        _bench(liar.url, tokenizer=None)


def test_a_huge_metrics_page_becomes_a_note_not_a_gigabyte(liar: Liar) -> None:
    page = b"# padding\n" * ((17 << 20) // 10)

    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()  # chunked: no Content-Length to refuse it by
        await response.prepare(request)
        await response.write(page)
        return response

    liar.answers["/metrics"] = huge

    async def go() -> Any:
        async with aiohttp.ClientSession() as session:
            return await fetch_snapshot(session, liar.url, info_paths=())

    snapshot = asyncio.run(go())
    assert not snapshot.metrics_reachable and "answered more than 16,777,216 bytes" in snapshot.errors[0]


def test_the_deadline_covers_fitting_the_prompts(liar: Liar) -> None:
    """Fitting once ran before the deadline started: 19.9 s against ``--deadline 5``."""
    async def slow(request: web.Request) -> web.Response:
        prompt = (await request.json())["prompt"]
        await asyncio.sleep(1.5)
        return web.json_response({"count": len(prompt.split())})

    liar.answers["/tokenize"] = slow
    with pytest.raises(BenchmarkFailed, match="deadline of 2 s .* while the model was looked up"):
        _bench(liar.url, model="m", deadline_s=2)


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A port that accepts connections and never answers (the backlog holds them)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_a_silent_server_holds_the_model_lookup_no_longer_than_timeout_s(silent_url: str) -> None:
    """``bench --timeout 3`` against a silent server took 35 s: the side requests had their own 30 s."""
    with pytest.raises(ToolkitError, match="did not answer within 2 s"):
        _bench(silent_url, timeout_s=2)


@pytest.mark.parametrize(("before", "after"), [
    ((10, 30, 15), (5, 15, 7)),          # counters went back: a restarted server
    ((0, 0, 0), (10, 30, 45)),           # more accepted than drafted
    ((0, 0, 0), (10, float("inf"), 5)),  # not a number
])
def test_spec_counters_that_cannot_be_true_give_no_acceptance(before: tuple[float, float, float],
                                                               after: tuple[float, float, float]) -> None:
    assert vllm_spec_delta(VllmSpecCounters(*before, ()), VllmSpecCounters(*after, ())) is None
    assert sglang_accept_length({"avg_spec_accept_length": -3.0}) is None
