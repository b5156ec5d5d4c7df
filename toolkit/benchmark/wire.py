"""The streaming request's wire: HTTP/1.1 on asyncio's protocol, each read handed on as it arrives.

A read is stamped first thing in ``data_received``, unchunked, and handed to the request's sink in the
same call: no task woken, nothing buffered before the stamp. Through aiohttp's ``StreamReader`` every
read woke the request's task; at 256 streams of one token every 8 ms that alone saturated the client's
core (8.3 s of CPU in 8.4 s) and ITL p99 came 9 ms late (docs/metrics.md has the figures).

Only the streamed POSTs go this way; side reads stay on aiohttp. One connection per request in flight,
kept alive between requests as vLLM's pool does. A :class:`WireError`'s ``kind`` says what failed.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import unquote, urlsplit

__all__ = ["Sink", "WireError", "WireResponse", "StreamPool"]

Sink = Callable[[bytes, float], bool]
"""Takes one read's body bytes and the time they arrived; returns False to stop reading (the connection closes)."""

_MAX_HEAD = 64 << 10
_CLOCK = time.perf_counter


class WireError(Exception):
    """``kind``: ``connect`` (no connection), ``closed`` (closed before an answer), ``reset``, ``cut`` (mid-body),
    ``malformed`` (not HTTP/1.x)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class WireResponse:
    """The answer's status line and headers (names in lower case)."""

    status: int
    reason: str
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: one request at a time, its answer parsed as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.reusable = False
        self._done: asyncio.Future[WireResponse] | None = None
        self._head_cb: Callable[[WireResponse], Sink] | None = None
        self._sink: Sink | None = None
        self._response: WireResponse | None = None
        self._buf = bytearray()
        self._chunked = False
        self._remaining: int | None = None  # bytes of a Content-Length body still due; None: chunked or until close
        self._chunk_left = 0  # bytes of the current chunk still due (chunked)
        self._trailers = False  # the last chunk came: reading the trailer lines
        self.answered = False  # a byte of the current answer came

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not derive from asyncio's

    def send(self, head: bytes, body: bytes, on_head: Callable[[WireResponse], Sink]) -> asyncio.Future[WireResponse]:
        assert self.transport is not None and self._done is None
        self._done = asyncio.get_running_loop().create_future()
        self._head_cb, self._sink, self._response = on_head, None, None
        self._buf.clear()
        self._chunked, self._remaining, self._chunk_left, self._trailers = False, None, 0, False
        self.answered = self.reusable = False
        self.transport.write(head + body)
        return self._done

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        now = _CLOCK()  # before any work of ours
        if self._done is None or self._done.done():
            return  # bytes after the answer (a server that sends more than it said): ignored, not reused
        self.answered = True
        try:
            if self._sink is None:
                self._buf += data
                if not self._read_head():
                    return
                data, self._buf = bytes(self._buf), bytearray()
                if not data:
                    if self._remaining == 0:  # an empty sized body: the answer is complete with its head
                        self._finish(keep=self.reusable)
                    return
            self._body(data, now)
        except Exception as exc:  # noqa: BLE001 - a WireError, or a sink's bug: it ends this request, not the loop
            self._fail(exc)

    def _read_head(self) -> bool:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > _MAX_HEAD:
                raise WireError("malformed", f"no end of the answer's headers within {_MAX_HEAD:,} bytes")
            return False
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        del self._buf[: end + 4]
        version, _, rest = lines[0].partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise WireError("malformed", f"not an HTTP/1.x answer: {lines[0][:120]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        response = WireResponse(int(code), reason, headers)
        if 100 <= response.status < 200:  # an interim answer (we send no Expect): the real one follows
            return self._read_head() if self._buf else False
        self._response = response
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        if not self._chunked and length is not None:
            if not length.isdigit():
                raise WireError("malformed", f"Content-Length is not a number: {length[:40]!r}")
            self._remaining = int(length)
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        self.reusable = keep and (self._chunked or self._remaining is not None)
        assert self._head_cb is not None
        self._sink = self._head_cb(response)
        return True

    def _body(self, data: bytes, now: float) -> None:
        if self._chunked:
            data, complete = self._unchunk(data)
        elif self._remaining is not None:
            data, complete = data[: self._remaining], len(data) >= self._remaining
            self._remaining -= len(data)
        else:
            complete = False  # until the server closes
        assert self._sink is not None
        if data and not self._sink(data, now):
            self._finish(keep=False)
        elif complete:
            self._finish(keep=self.reusable)

    def _unchunk(self, data: bytes) -> tuple[bytes, bool]:
        """The body bytes of this read, and whether the last chunk and its trailers came."""
        buf = self._buf
        buf += data
        out = bytearray()
        while buf:
            if self._chunk_left:
                take = min(self._chunk_left, len(buf))
                out += buf[:take]
                del buf[:take]
                self._chunk_left -= take
                if self._chunk_left:
                    break
                continue
            nl = buf.find(b"\r\n")
            if nl < 0:
                if len(buf) > 4096:
                    raise WireError("malformed", "a chunk-size line longer than 4,096 bytes")
                break
            line = bytes(buf[:nl])
            del buf[: nl + 2]
            if self._trailers:
                if not line:
                    return bytes(out), True
                continue
            if not line:
                continue  # the CRLF that ends a chunk's data
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise WireError("malformed", f"a chunk size that is not hexadecimal: {size_text[:40]!r}") from None
            if size == 0:
                self._trailers = True
            else:
                self._chunk_left = size
        return bytes(out), False

    def _finish(self, *, keep: bool) -> None:
        if not keep:
            self.close()
        self.reusable = keep and not self.lost
        done, self._done = self._done, None
        if done is not None and not done.done():
            assert self._response is not None
            done.set_result(self._response)

    def _fail(self, exc: BaseException) -> None:
        self.close()
        done, self._done = self._done, None
        if done is not None and not done.done():
            done.set_exception(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost, self.reusable = True, False
        if self._done is None or self._done.done():
            return
        if self._response is not None and not self._chunked and self._remaining is None:
            self._finish(keep=False)  # a body that runs until the server closes: complete
        elif isinstance(exc, ConnectionResetError):
            self._fail(WireError("reset", f"the connection was reset: {exc.strerror or exc}"))
        elif self._response is not None:
            self._fail(WireError("cut", "the connection closed before the end of the answer's body"))
        else:
            why = f": {exc}" if exc else ""
            self._fail(WireError("closed", f"the server closed the connection before it answered{why}"))


class StreamPool:
    """Connections to one server, kept alive between requests; ``async with`` closes them all."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int, bool], list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._tls: ssl.SSLContext | None = None  # made once, on the first https connection

    async def __aenter__(self) -> StreamPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()
        await asyncio.sleep(0)  # the transports' close callbacks run before the loop may end

    def close(self) -> None:
        for conn in self._open:
            conn.close()
        self._open.clear()
        self._idle.clear()

    async def post(self, url: str, body: bytes, headers: Mapping[str, str],
                   on_head: Callable[[WireResponse], Sink]) -> WireResponse:
        """POST ``body`` to ``url``; ``on_head`` gets the answer's head and hands back the sink for its body.

        Returns once the body ended or the sink said stop; an idle connection found closed is replaced once.
        """
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        host, port = parts.hostname or "localhost", parts.port or (443 if tls else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        shown = f"[{host}]" if ":" in host else host  # an IPv6 address, bracketed as in a URL
        lines = [f"POST {path} HTTP/1.1", f"Host: {shown}" + (f":{parts.port}" if parts.port else ""),
                 f"Content-Length: {len(body)}", *(f"{name}: {value}" for name, value in headers.items())]
        if parts.username is not None and not any(name.lower() == "authorization" for name in headers):
            basic = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            lines.append(f"Authorization: Basic {base64.b64encode(basic).decode()}")  # as aiohttp sends a URL's user
        if any("\r" in line or "\n" in line for line in lines):
            raise ValueError("a header name or value holds a line break: it would end the request's head")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        key = (host, port, tls)
        conn, reused = await self._connection(key)
        try:
            return await self._exchange(conn, key, head, body, on_head)
        except WireError as exc:
            if not (reused and exc.kind in ("closed", "reset") and not conn.answered):
                raise
        conn, _ = await self._connection(key)  # the server had closed this idle connection: once more, on a new one
        return await self._exchange(conn, key, head, body, on_head)

    async def _exchange(self, conn: _Connection, key: tuple[str, int, bool], head: bytes, body: bytes,
                        on_head: Callable[[WireResponse], Sink]) -> WireResponse:
        """One request on ``conn``; the connection goes back to the idle ones if its answer left it reusable."""
        try:
            response = await conn.send(head, body, on_head)
        except BaseException:  # a failure, or cancelled (a timeout): the answer is unread, the connection goes
            conn.close()
            self._open.discard(conn)
            raise
        if conn.reusable:
            self._idle.setdefault(key, []).append(conn)
        else:
            self._open.discard(conn)
        return response

    async def _connection(self, key: tuple[str, int, bool]) -> tuple[_Connection, bool]:
        idle = self._idle.get(key, [])
        while idle:
            conn = idle.pop()
            if not conn.lost and conn.transport is not None and not conn.transport.is_closing():
                return conn, True
            self._open.discard(conn)
        host, port, tls = key
        if tls and self._tls is None:
            self._tls = ssl.create_default_context()
        try:
            _, conn = await asyncio.get_running_loop().create_connection(
                _Connection, host, port, ssl=self._tls if tls else None)
        except OSError as exc:
            raise WireError("connect", str(exc) or type(exc).__name__) from exc
        self._open.add(conn)
        return conn, False
