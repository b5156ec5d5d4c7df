"""The streamed request's wire (toolkit/benchmark/wire.py) against a real loopback server that writes HTTP by hand.

Each answer is written a byte at a time, so that a read may end anywhere in the framing:
chunked bodies with extensions and trailers, Content-Length bodies, bodies that run until the server closes,
interim 100 answers, and the ways a server fails (closes, resets, cuts a body, answers something not HTTP).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from toolkit.benchmark.wire import StreamPool, WireError, WireResponse

Script = Sequence[bytes | float | None]  # bytes to write, a pause in seconds, None: close, b"RST": reset


def chunked(*parts: bytes, trailer: bytes = b"") -> bytes:
    return b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n" + trailer + b"\r\n"


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


class Server:
    """Answers the n-th request on any connection with ``scripts[n]``; counts connections and requests."""

    def __init__(self, scripts: list[Script]) -> None:
        self.scripts, self.accepted, self.requests = scripts, 0, 0
        self.bodies: list[bytes] = []
        self.heads: list[bytes] = []
        self.handlers: set[asyncio.Task[None]] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.heads.append(head)
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                self.bodies.append(await reader.readexactly(length))
                script, self.requests = self.scripts[self.requests], self.requests + 1
                for step in script:
                    if step is None:
                        writer.close()
                        return
                    if step == b"RST":
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        writer.transport.abort()
                        return
                    if isinstance(step, float):
                        await asyncio.sleep(step)
                    elif len(step) > 4096:  # a flood: at once
                        writer.write(step)
                        await writer.drain()
                    else:
                        for i in range(len(step)):  # a byte at a time: a read may end anywhere
                            writer.write(step[i : i + 1])
                            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        """Every connection still open (kept alive, waiting for a next request) is closed and its handler ended."""
        for task in self.handlers:
            task.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)
        await asyncio.sleep(0)


def run(scripts: list[Script], requests: int, *, stop_after: int | None = None,
        headers: dict[str, str] | None = None, user: str = "") -> tuple[Server, list[Any]]:
    """``requests`` POSTs in turn through one pool; each outcome is (response, body, stamps) or the WireError."""
    server = Server(scripts)
    outcomes: list[Any] = []

    async def main() -> None:
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        async with listener, StreamPool() as pool:
            for n in range(requests):
                body, stamps = bytearray(), []

                def on_head(_response: WireResponse, body: bytearray = body,
                            stamps: list[float] = stamps) -> Callable[[bytes, float], bool]:
                    def sink(data: bytes, now: float) -> bool:
                        body.extend(data)
                        stamps.append(now)
                        return stop_after is None or len(body) < stop_after
                    return sink

                try:
                    response = await asyncio.wait_for(
                        pool.post(f"http://{user}127.0.0.1:{port}/v1/completions", b'{"n": %d}' % n,
                                  headers or {"Content-Type": "application/json"}, on_head), 10)
                    outcomes.append((response, bytes(body), stamps))
                except WireError as exc:
                    outcomes.append(exc)
            await server.close()

    asyncio.run(main())
    return server, outcomes


def test_a_chunked_stream_read_a_byte_at_a_time_and_kept_alive_for_the_next_request() -> None:
    answer = HEAD + chunked(b"data: {\"a\": 1}\n\n", b"data: [DONE]\n\n", trailer=b"X-Trailer: yes\r\n")
    server, outcomes = run([[answer], [answer]], 2)
    for response, body, stamps in outcomes:
        assert response.status == 200 and response.content_type == "text/event-stream"
        assert body == b"data: {\"a\": 1}\n\ndata: [DONE]\n\n" and stamps == sorted(stamps)
    assert server.accepted == 1 and server.bodies == [b'{"n": 0}', b'{"n": 1}']  # one connection, two requests


def test_a_content_length_body_and_a_body_that_runs_until_the_server_closes() -> None:
    sized = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 18\r\n\r\nCUDA out of memory"
    until_close = b"HTTP/1.0 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<title>Login</title>"
    server, outcomes = run([[sized], [until_close, None], [sized]], 3)
    (first, body1, _), (second, body2, _), (third, _, _) = outcomes
    assert (first.status, first.reason, body1) == (500, "Internal Server Error", b"CUDA out of memory")
    assert second.content_type == "text/html" and body2 == b"<title>Login</title>"
    assert third.status == 500 and server.accepted == 2  # reused after a sized body, not after an HTTP/1.0 one


def test_an_empty_answer_that_says_connection_close_is_not_kept_alive() -> None:
    empty = b"HTTP/1.1 204 No Content\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    server, outcomes = run([[empty], [empty]], 2)  # the server would read on; the client must not send there
    assert [o[0].status for o in outcomes] == [204, 204] and server.accepted == 2, outcomes


def test_an_interim_100_answer_is_skipped() -> None:
    _, [(response, body, _)] = run([[b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD + chunked(b"x")]], 1)
    assert response.status == 200 and body == b"x"


def test_an_idle_connection_the_server_closed_is_replaced_once() -> None:
    answer = HEAD + chunked(b"ok")
    server, outcomes = run([[answer, 0.05, None], [answer]], 2)  # the second request meets the closing connection
    assert [o[1] for o in outcomes] == [b"ok", b"ok"] and server.accepted == 2


@pytest.mark.parametrize(("script", "kind", "words"), [
    ([HEAD + b"5\r\nabc", None], "cut", "before the end of the answer's body"),
    ([None], "closed", "closed the connection before it answered"),
    ([b"RST"], "reset", "reset"),
    ([b"SSH-2.0-OpenSSH_9.2\r\n\r\n"], "malformed", "not an HTTP/1.x answer"),
    ([HEAD + b"zz\r\n"], "malformed", "not hexadecimal"),
    ([b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 12000], "malformed", "no end of the answer's headers"),
])
def test_each_failure_is_a_wire_error_of_its_kind(script: Script, kind: str, words: str) -> None:
    _, [outcome] = run([script], 1)
    assert isinstance(outcome, WireError) and outcome.kind == kind and words in str(outcome), outcome


def test_a_refused_connection_and_a_header_that_would_end_the_head() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed

    async def post(url: str, headers: dict[str, str]) -> Any:
        async with StreamPool() as pool:
            return await pool.post(url, b"{}", headers, lambda _r: lambda _d, _n: True)

    with pytest.raises(WireError) as refused:
        asyncio.run(post(f"http://127.0.0.1:{port}/v1/completions", {}))
    assert refused.value.kind == "connect"
    with pytest.raises(ValueError, match="line break"):
        asyncio.run(post(f"http://127.0.0.1:{port}/", {"Authorization": "Bearer x\r\nX-Injected: 1"}))


def test_a_sink_that_says_stop_ends_the_answer_and_the_connection() -> None:
    first, rest = HEAD + b"a;x\r\naaaaaaaaaa\r\na\r\nbbbbbbbbbb\r\n", b"a\r\ncccccccccc\r\n0\r\n\r\n"
    server, outcomes = run([[first, 1.0, rest], [first, 1.0, rest]], 2, stop_after=15)
    # each read goes to the sink whole, so it stops between 15 and 20 bytes: no "c", read no further
    assert all(15 <= len(o[1]) <= 20 and b"c" not in o[1] for o in outcomes) and server.accepted == 2, outcomes


def test_the_request_head_names_the_host_not_the_url_s_user_whose_password_goes_as_basic_auth() -> None:
    server, [(response, _, _)] = run([[HEAD + chunked(b"x")]], 1, user="me:p%40ss@")
    head = server.heads[0].decode()
    assert response.status == 200 and "p%40ss" not in head and "me:" not in head
    assert "\r\nHost: 127.0.0.1:" in head and "\r\nAuthorization: Basic bWU6cEBzcw==\r\n" in head  # me:p@ss
    assert head.startswith("POST /v1/completions HTTP/1.1\r\n") and "\r\nContent-Length: 8\r\n" in head
