"""The streaming HTTP client: send the workload, time every chunk, never crash on a bad server.

Each request yields one :class:`~toolkit.benchmark.metrics.RequestRecord`; a failure (HTTP status, refused
connection, cut stream, malformed or error event, timeout) is a record with ``error`` set, not an exception.

Fast: reads are stamped inside the connection (:mod:`toolkit.benchmark.wire`), and the last *plain* token
chunk (one choice, no ``finish_reason``, ``usage``, ``error``, ``meta_info`` or ``sglext``) becomes a
template: a later payload with the same bytes around a quote-free text is counted undecoded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from toolkit.benchmark.load import Endpoint
from toolkit.benchmark.metrics import RequestRecord
from toolkit.benchmark.sse import DONE, SSEDecoder
from toolkit.benchmark.wire import Sink, StreamPool, WireError, WireResponse
from toolkit.benchmark.workload import RequestSpec

try:  # orjson is ~3x faster than json on these small chunks; json is the fallback
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
    _dumps: Callable[[Any], bytes] = orjson.dumps
except ImportError:  # pragma: no cover - exercised where orjson is absent
    _loads = json.loads

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


__all__ = ["ClientSettings", "request_body", "encode_body", "stream_request", "overrun_allowance", "Endpoint",
           "DEFAULT_HEADERS"]

_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
DEFAULT_HEADERS: Mapping[str, str] = MappingProxyType({"Content-Type": "application/json",
                                                      "Accept": "text/event-stream"})
_TEXT_KEYS = {False: b'"text":"', True: b'"content":"'}
_SPEC_KEYS = ("spec_accept_length", "spec_verify_ct")
_COUNT_LIMIT = 1 << 31  # a token count at or past 2**31 is no model's context: a lie, not a measurement


@dataclass(frozen=True)
class ClientSettings:
    """How the client drove the server: everything but the prompts (see ``Workload``)."""

    url: str
    model: str
    endpoint: Endpoint = "completions"
    max_concurrency: int | None = 1
    request_rate: float = float("inf")
    burstiness: float = 1.0
    warmup: int = 1
    warmup_output_len: int = 32
    ignore_eos: bool = True
    temperature: float = 0.0
    timeout_s: float = 600.0
    include_usage: bool = True
    extra_body: tuple[tuple[str, Any], ...] = ()
    goodput_slos_ms: tuple[tuple[str, float], ...] = ()
    progress: bool = True
    seed: int = 0
    repeats: int = 1

    @property
    def api_url(self) -> str:
        return self.url + _PATHS[self.endpoint]

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: self.__dict__[f.name] for f in dataclasses.fields(self)}
        out["extra_body"] = dict(self.extra_body)
        out["goodput_slos_ms"] = dict(self.goodput_slos_ms)
        out["request_rate"] = "inf" if self.request_rate == float("inf") else self.request_rate
        return out


def request_body(settings: ClientSettings, spec: RequestSpec) -> dict[str, Any]:
    """The JSON body for one request (pure). ``ignore_eos`` is sent only when true."""
    body: dict[str, Any] = {"model": settings.model}
    if settings.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": spec.prompt}]
        # vLLM reads max_completion_tokens, older SGLang max_tokens: send both, equal
        body["max_completion_tokens"] = spec.output_len
    else:
        body["prompt"] = spec.prompt
    body.update(max_tokens=spec.output_len, temperature=settings.temperature, stream=True)
    if settings.include_usage:
        body["stream_options"] = {"include_usage": True}
    if settings.ignore_eos:
        body["ignore_eos"] = True
    body.update(settings.extra_body)
    return body


def encode_body(settings: ClientSettings, spec: RequestSpec) -> bytes:
    """The request body as the bytes sent (orjson when installed)."""
    return _dumps(request_body(settings, spec))


class _Stream:
    """Per-request state touched by the slow path (the fast path only appends a time)."""

    __slots__ = ("times", "chat", "cums", "usage_out", "usage_in", "spec_len", "spec_ct", "finished", "error")

    def __init__(self, times: list[float], chat: bool) -> None:
        self.times = times
        self.chat = chat
        self.cums: dict[int, int] = {}
        self.usage_out: int | None = None
        self.usage_in: int | None = None
        self.spec_len: float | None = None
        self.spec_ct: int | None = None
        self.finished = False
        self.error: str | None = None

    def event(self, payload: bytes, now: float, *, at_eof: bool = False) -> tuple[bytes, bytes] | None:
        """Decode one event fully and take what we use; a *plain* token chunk's (prefix, suffix) around
        its text, for the caller to count later events of that template undecoded."""
        if payload == DONE:
            self.finished = True
            return None
        try:
            data = _loads(payload)
        except ValueError:
            what = "the stream ended inside an event (cut mid-response?)" if at_eof else "malformed SSE event"
            self.error = f"{what}: data is not JSON: {payload[:200]!r}"
            return None
        if not isinstance(data, dict):
            self.error = f"malformed SSE event: expected a JSON object, got {payload[:200]!r}"
            return None
        if data.get("error") is not None or data.get("object") == "error":
            self.error = f"the server sent an error event: {payload[:300].decode(errors='replace')}"
            return None
        choices = data.get("choices")
        token = plain = False
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            choice = choices[0]
            token = _chat_has_output(choice) if self.chat else True
            plain = choice.get("finish_reason") is None and len(choices) == 1
            if not plain:
                self.finished = True
        if token:
            self.times.append(now)
        usage, meta, ext = data.get("usage"), data.get("meta_info"), data.get("sglext")
        for part in (usage, meta):
            if isinstance(part, dict):
                self._counts(part, token)
        details = ext.get("spec_tokens_details") if isinstance(ext, dict) else None
        if isinstance(details, list):
            details = details[0] if details else None
        if isinstance(details, dict):
            self._counts(details, False)
        if token and plain and usage is None and meta is None and ext is None:
            return _template(payload, _TEXT_KEYS[self.chat])
        return None

    def _counts(self, part: Mapping[str, Any], token: bool) -> None:
        ct, pt = part.get("completion_tokens"), part.get("prompt_tokens")
        for name, value in (("completion_tokens", ct), ("prompt_tokens", pt)):  # issue 25: -1000 was taken
            if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value < _COUNT_LIMIT:
                self.error = f"the server sent {name}={value}: a count outside [0, {_COUNT_LIMIT:,}) cannot be true"
                return
        if isinstance(ct, int) and not isinstance(ct, bool):
            self.usage_out = ct
            if token:
                self.cums[len(self.times) - 1] = ct  # cumulative count as of this chunk
        if isinstance(pt, int) and not isinstance(pt, bool):
            self.usage_in = pt
        length, ct_verify = part.get(_SPEC_KEYS[0]), part.get(_SPEC_KEYS[1])
        if isinstance(length, int | float) and not isinstance(length, bool) and 0 < length < _COUNT_LIMIT:
            self.spec_len = float(length)
        if isinstance(ct_verify, int) and not isinstance(ct_verify, bool) and 0 < ct_verify < _COUNT_LIMIT:
            self.spec_ct = ct_verify

    def chunk_tokens(self) -> tuple[int, ...] | None:
        """Tokens per chunk when every token chunk carried a cumulative count, else None."""
        n = len(self.times)
        if not n or len(self.cums) != n:
            return None
        counts = tuple(self.cums[i] - (self.cums[i - 1] if i else 0) for i in range(n))
        return counts if min(counts) >= 0 else None


def _template(payload: bytes, key: bytes) -> tuple[bytes, bytes] | None:
    """Split ``payload`` around the string value of its only ``key``; None if ambiguous."""
    if payload.count(key) != 1:
        return None
    start = payload.find(key) + len(key)
    end = payload.find(b'"', start)
    while end > 0:
        segment = payload[start:end]
        if (len(segment) - len(segment.rstrip(b"\\"))) % 2 == 0:
            break  # an unescaped quote closes the value
        end = payload.find(b'"', end + 1)
    return (payload[:start], payload[end:]) if end > 0 else None


def _chat_has_output(choice: Mapping[str, Any]) -> bool:
    """vLLM's ``_choice_has_streamed_output``, plus ``reasoning_content`` (SGLang, DeepSeek)."""
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return False
    keys = ("content", "reasoning_content", "reasoning", "tool_calls", "function_call")
    return any(delta.get(k) for k in keys) or (delta.get("content") == "" and "role" not in delta)


def overrun_allowance(max_tokens: int) -> int:
    """Tokens a server may send beyond ``max_tokens`` before the response counts as wrong (speculative
    decoding accepts drafts in blocks, and a few releases let a block end past the limit)."""
    return max(8, max_tokens // 50)


_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title", re.I | re.S)


def html_answer(head: bytes) -> str:
    """Why a 200 answer came in HTML (a proxy, an SSO login page), where "cut mid-response?" was said."""
    found = _TITLE.search(head)
    title = " ".join(found.group(1).decode(errors="replace").split())[:120] if found else ""
    shown = f"titled {title!r}" if title else f"starting {head[:120].decode(errors='replace')!r}"
    return (f"the server answered HTML (a proxy or a login page?), not an event stream: a page {shown}; "
            "check the URL and port, or reach the server without the proxy")


def _failure(exc: BaseException, url: str, timeout_s: float, n_chunks: int) -> str:
    if isinstance(exc, TimeoutError):
        return f"timed out after {timeout_s:g} s (timeout_s) with {n_chunks} token chunks received"
    if not isinstance(exc, WireError):
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if exc.kind == "connect":
        return f"cannot connect to {url}: {exc} (is the server up, and is this its port?)"
    if exc.kind == "cut":
        return f"the stream was cut mid-response after {n_chunks} token chunks: {exc}"
    if exc.kind == "closed":
        return f"the server closed the connection after {n_chunks} token chunks: {exc}"
    if exc.kind == "reset":  # accepted, then the process died
        return (f"the connection was reset after {n_chunks} token chunks: {exc} (the server's process "
                f"died or closed its port while this request was connecting or waiting)")
    return f"the server's answer is not HTTP as expected after {n_chunks} token chunks: {exc}"


async def stream_request(streams: StreamPool, url: str, body: bytes, *, chat: bool, timeout_s: float,
                         index: int = 0, prompt_len: int = 0, max_tokens: int | None = None,
                         headers: Mapping[str, str] = DEFAULT_HEADERS) -> RequestRecord:
    """POST one streaming request and time its token chunks; errors land in the record (an event over
    the size cap, or more chunks than ``max_tokens`` allows, fails it: a server is not trusted)."""
    clock = time.perf_counter
    chunk_cap = None if max_tokens is None else max_tokens + overrun_allowance(max_tokens)
    times: list[float] = []
    st = _Stream(times, chat)
    slow = st.event
    decoder = SSEDecoder()
    push, take = decoder.push, decoder.take
    pre: bytes | None = None  # the last plain token chunk's bytes before and after its text
    suf, min_len = b"", 0
    kept = bytearray()  # the first bytes of an answer that is not an event stream

    def stream(data: bytes, now: float) -> bool:
        nonlocal pre, suf, min_len
        push(data)
        while True:
            count, p = take(pre, suf, min_len)  # counts template chunks unbuilt
            if count:
                times.extend([now] * count)
            if p is None:
                break
            made = slow(p, now)
            if st.error:
                return False
            if made is not None:
                pre, suf = made
                min_len = 1 if chat else 0  # chat needs non-empty content (vLLM's rule)
        if chunk_cap is not None and len(times) > chunk_cap:
            st.error = (f"the server streamed more than {chunk_cap} token chunks for max_tokens="
                        f"{max_tokens}: it does not honour max_tokens")
            return False
        return True

    def keep(limit: int) -> Sink:
        def sink(data: bytes, _now: float) -> bool:
            kept.extend(data[: limit - len(kept)])
            return len(kept) < limit
        return sink

    def on_head(response: WireResponse) -> Sink:
        if response.status != 200:
            return keep(500)
        return keep(4000) if response.content_type in _HTML_TYPES else stream

    send = clock()
    try:
        async with asyncio.timeout(timeout_s):
            response = await streams.post(url, body, headers, on_head)
        if response.status != 200:
            text = kept.decode(errors="replace").strip()
            st.error = f"HTTP {response.status} {response.reason or ''}: {text}".rstrip(": ")
        elif response.content_type in _HTML_TYPES:
            st.error = html_answer(bytes(kept))
        elif not st.error:  # the stream ended: the decoder's last event, then did it finish?
            now = clock()
            for p in decoder.close():
                slow(p, now, at_eof=True)
            if not st.error and not st.finished:
                st.error = (f"the stream ended without a finish_reason or [DONE] after {len(times)} "
                            "token chunks: cut mid-response?")
    except Exception as exc:  # noqa: BLE001 - every failure is data for the summary
        st.error = st.error or _failure(exc, url, timeout_s, len(times))
    end = clock()
    if st.error is None and not times:
        st.error = "the response finished without a single token chunk (nothing to time)"
    counted = st.chunk_tokens()
    out_tokens = st.usage_out if st.usage_out is not None else (sum(counted) if counted else len(times))
    if st.error is None and max_tokens is not None and out_tokens > max_tokens + overrun_allowance(max_tokens):
        st.error = f"the server returned {out_tokens} tokens for max_tokens={max_tokens}: it does not honour max_tokens"
    return RequestRecord(send_time=send, chunk_times=tuple(times), end_time=end,
                         prompt_tokens=st.usage_in if st.usage_in is not None else prompt_len,
                         output_tokens=out_tokens, chunk_tokens=counted, error=st.error, index=index,
                         output_tokens_source="usage" if st.usage_out is not None else "chunks",
                         prompt_tokens_source="usage" if st.usage_in is not None else "workload",
                         spec_accept_length=st.spec_len, spec_verify_ct=st.spec_ct)
