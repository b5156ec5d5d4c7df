"""HTTP endpoints of the simulated server (aiohttp), shaped like SGLang's and vLLM's.

Generation goes through the engine's step loop, so tokens arrive at the latency model's pace;
with speculative decoding one SSE chunk carries all tokens of one verify step. Requests that
arrive before SGLang's warm-up finished wait for it (`/v1/models` answers at once, `/health`
and `/health_generate` say 503), as with the real server.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from toolkit.sim import protocol
from toolkit.sim.engine import Chunk, GenRequest
from toolkit.sim.metrics import render_vllm_metrics
from toolkit.sim.observability import register_observability
from toolkit.sim.outputs import add_logprobs, greedy_words
from toolkit.sim.protocol import WordSource
from toolkit.sim.startup import sglang_server_args
from toolkit.sim.startup_vllm import VLLM_VERSION

if TYPE_CHECKING:
    from toolkit.sim.server import SimServer

__all__ = ["build_app"]

SGLANG_VERSION = "0.5.9"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _peer(request: web.Request) -> tuple[str, int]:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return (str(peer[0]), int(peer[1])) if peer else ("127.0.0.1", 0)


def _error(message: str, kind: str = "BadRequestError", status: int = 400) -> web.Response:
    return web.json_response(protocol.error_body(message, kind, status), status=status)


async def _chunks(request: GenRequest) -> AsyncIterator[Chunk]:
    while True:
        chunk = await request.out.get()
        yield chunk
        if chunk.finish_reason is not None:
            return


class Routes:
    """The handlers; they read the server's engine, config and readiness."""

    def __init__(self, server: SimServer) -> None:
        self.server = server
        self.config = server.config
        self.started = int(time.time())

    # ---- plumbing ----------------------------------------------------------------------------
    @web.middleware
    async def access_log(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            response = exc
        if not request.get("access_logged"):
            self._log_access(request, response.status)
        if isinstance(response, web.HTTPException):
            raise response
        return response

    def _log_access(self, request: web.Request, status: int) -> None:
        request["access_logged"] = True
        version = f"{request.version.major}.{request.version.minor}"
        self.server.access(_peer(request), request.method, request.path_qs, version, status)

    async def _body(self, request: web.Request) -> object:
        try:
            return await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise protocol.BadRequest("The request body is not valid JSON.") from None

    async def _start(self, prompt_tokens: int, max_tokens: int, rid: str, words: WordSource | None = None
                     ) -> GenRequest:
        await self.server.ready.wait()  # generation is proven only after the warm-up request
        gen = self.server.engine.new_request(rid, prompt_tokens, max_tokens, words)
        self.server.requests_seen += 1
        self.server.engine.submit(gen)
        return gen

    # ---- info endpoints ------------------------------------------------------------------------
    async def models(self, request: web.Request) -> web.Response:
        owner = "sglang-simulator" if self.config.engine == "sglang" else "vllm-simulator"
        card = {"id": self.config.served_model_name, "object": "model", "created": self.started, "owned_by": owner,
                "root": self.config.model_path, "parent": None, "max_model_len": self.config.context_length}
        return web.json_response({"object": "list", "data": [card]})

    async def health(self, request: web.Request) -> web.Response:
        if self.config.engine == "sglang" and not self.server.ready.is_set():
            return web.Response(status=503)
        return web.Response(status=200)

    async def health_generate(self, request: web.Request) -> web.Response:
        if not self.server.ready.is_set():
            return web.Response(status=503)
        gen = await self._start(1, 1, f"HEALTH_CHECK_{uuid.uuid4().hex}")
        async for _ in _chunks(gen):
            pass
        return web.Response(status=200)

    async def model_info(self, request: web.Request) -> web.Response:
        return web.json_response({"model_path": self.config.model_path, "tokenizer_path": self.config.model_path,
                                  "is_generation": True, "simulator": "toolkit.sim"})

    async def server_info(self, request: web.Request) -> web.Response:
        totals = self.server.engine.totals
        state: dict[str, object] = {"last_gen_throughput": self.server.engine.last_gen_throughput,
                                    "memory_usage": {"token_capacity": self.server.max_total_tokens}}
        if self.config.speculation is not None and totals.spec_forward_ct:
            state["avg_spec_accept_length"] = totals.spec_accept_tokens / totals.spec_forward_ct
        version = self.server.source.version if self.server.source and self.server.source.version else SGLANG_VERSION
        return web.json_response({**sglang_server_args(self.config), "internal_states": [state],
                                  "version": version, "simulator": "toolkit.sim"})

    async def flush_cache(self, request: web.Request) -> web.Response:
        engine = self.server.engine
        if not engine.running and not engine.waiting:
            self.server.log("Cache flushed successfully!", rank=0 if self.config.tp_size > 1 else None)
        return web.Response(text="Cache flushed.\nPlease check backend logs for more details. (When there are "
                                 "running or waiting requests, the operation will not be performed.)\n")

    async def metrics(self, request: web.Request) -> web.Response:
        e = self.server.engine
        text = render_vllm_metrics(e.totals, self.config.served_model_name, len(e.running), len(e.waiting),
                                   e.num_tokens_in_use / max(self.server.max_total_tokens, 1),
                                   self.config.speculation is not None)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def tokenize(self, request: web.Request) -> web.Response:
        """``POST /tokenize`` (vLLM; SGLang 0.5.x also serves it): the prompt's token count."""
        try:
            body = await self._body(request)
        except protocol.BadRequest as exc:
            return _error(str(exc))
        if not isinstance(body, dict):
            return _error("The request body must be a JSON object.")
        count = protocol.count_prompt_tokens(body, chat="messages" in body)
        return web.json_response({"count": count, "max_model_len": 32768, "tokens": list(range(count))})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": VLLM_VERSION, "simulator": "toolkit.sim"})

    async def sim_info(self, request: web.Request) -> web.Response:
        """Simulator only: the latency model's predictions for this launch (docs/simulator.md)."""
        m = self.server.model
        return web.json_response({
            "simulator": "toolkit.sim", "engine": self.config.engine, "perf": m.params.to_mapping(),
            "step_ms": m.step_ms(1), "mean_accept_length": m.mean_accept_length(),
            "single_stream_tok_s": m.tokens_per_s(1), "cuda_graph": m.uses_cuda_graph(1),
            "ready": self.server.ready.is_set(), "pid": self.server.pid,
            "worker_pids": [c.pid for c in self.server.pool.children]})

    # ---- generation ----------------------------------------------------------------------------
    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, chat=True)

    async def _openai(self, request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            raw = await self._body(request)
            sampling = protocol.parse_sampling(raw, chat, self.config.served_model_name,
                                               strict_model=self.config.engine == "vllm")
        except protocol.BadRequest as exc:
            if self.config.engine == "vllm":
                self.server.log(f"Error with model object='error' message='{exc}' type='{exc.kind}' param=None "
                                f"code={exc.status}", "error", source="serving_chat.py:136")
            return _error(str(exc), exc.kind, exc.status)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        words = greedy_words(raw, chat, sampling.temperature, self.config.seed, self.config.fault)
        gen = await self._start(sampling.prompt_tokens, sampling.max_tokens, rid, words)
        base: dict[str, object] = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()), "model": sampling.model}
        try:
            if not sampling.stream:
                texts = [t async for chunk in _chunks(gen) for t in chunk.texts]
                body = protocol.final_response(base, chat, "".join(texts), "length",
                                               protocol.usage(sampling.prompt_tokens, gen.generated))
                add_logprobs(body, raw, chat, texts)
                return web.json_response(body)
            return await self._stream(request, gen, base, chat, sampling)
        except (ConnectionResetError, asyncio.CancelledError):
            gen.cancelled = True
            raise

    async def _stream(self, request: web.Request, gen: GenRequest, base: dict[str, object], chat: bool,
                      sampling: protocol.Sampling) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        self._log_access(request, 200)
        first = True
        async for chunk in _chunks(gen):
            usage = protocol.usage(sampling.prompt_tokens, gen.generated)
            data = b""
            if first and chat:
                data += protocol.sse(protocol.chunk_event(base, chat, "", None, True, None))
            last_usage = usage if chunk.finish_reason and self.config.engine == "sglang" else None
            data += protocol.sse(protocol.chunk_event(base, chat, "".join(chunk.texts), chunk.finish_reason,
                                                      first and not chat, last_usage))
            if chunk.finish_reason and sampling.include_usage:
                data += protocol.sse(protocol.usage_event(base, usage))
            if chunk.finish_reason:
                data += protocol.sse("[DONE]")
            first = False
            await response.write(data)
        await response.write_eof()
        return response

    async def generate(self, request: web.Request) -> web.StreamResponse:
        """SGLang's native /generate: {"text", "sampling_params": {"max_new_tokens"}, "stream"}."""
        try:
            body = await self._body(request)
            if not isinstance(body, dict):
                raise protocol.BadRequest("The request body must be a JSON object.")
            params = body.get("sampling_params") or {}
            max_new = params.get("max_new_tokens", 128) if isinstance(params, dict) else 128
            if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1:
                raise protocol.BadRequest(f"max_new_tokens must be a positive integer, got {max_new!r}.")
        except protocol.BadRequest as exc:
            return _error(str(exc))
        prompt = protocol.count_prompt_tokens({"prompt": body.get("input_ids") or body.get("text")}, chat=False)
        rid = uuid.uuid4().hex
        gen = await self._start(prompt, max_new, rid)
        started = time.perf_counter()
        text = ""

        def meta(finish: str | None) -> dict[str, object]:
            return {"id": rid, "finish_reason": {"type": finish, "length": gen.generated} if finish else None,
                    "prompt_tokens": prompt, "completion_tokens": gen.generated, "cached_tokens": 0,
                    "e2e_latency": time.perf_counter() - started}
        try:
            if not body.get("stream"):
                async for chunk in _chunks(gen):
                    text += "".join(chunk.texts)
                return web.json_response({"text": text, "meta_info": meta("length")})
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            self._log_access(request, 200)
            async for chunk in _chunks(gen):
                text += "".join(chunk.texts)
                data = protocol.sse({"text": text, "meta_info": meta(chunk.finish_reason)})
                await response.write(data + (protocol.sse("[DONE]") if chunk.finish_reason else b""))
            await response.write_eof()
            return response
        except (ConnectionResetError, asyncio.CancelledError):
            gen.cancelled = True
            raise


def build_app(server: SimServer) -> web.Application:
    """The aiohttp application of one simulated server."""
    r = Routes(server)
    app = web.Application(middlewares=[r.access_log], client_max_size=64 * 1024 * 1024)

    async def server_header(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["Server"] = "uvicorn (toolkit.sim simulator)"

    app.on_response_prepare.append(server_header)
    add = app.router
    add.add_get("/v1/models", r.models)
    add.add_get("/health", r.health)
    add.add_post("/v1/completions", r.completions)
    add.add_post("/v1/chat/completions", r.chat_completions)
    add.add_get("/sim/info", r.sim_info)
    for path in ("/tokenize", "/v1/tokenize"):
        add.add_post(path, r.tokenize)
    if server.config.engine == "sglang":
        add.add_get("/health_generate", r.health_generate)
        for path in ("/get_model_info", "/model_info"):
            add.add_get(path, r.model_info)
        for path in ("/get_server_info", "/server_info"):
            add.add_get(path, r.server_info)
        add.add_route("*", "/flush_cache", r.flush_cache)
        add.add_post("/generate", r.generate)
    else:
        add.add_get("/metrics", r.metrics)
        add.add_get("/version", r.version)
    register_observability(app, server)  # profiler, SGLang --enable-metrics, cache reset, /sim/gpu
    return app
