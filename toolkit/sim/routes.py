"""HTTP endpoints of the simulated server (aiohttp), shaped like the imitated release's.

Tokens come at the step loop's pace (one SSE chunk per verify step); requests wait for SGLang's warm-up.
With `--api-key` (vLLM: or `VLLM_API_KEY`) guarded paths answer 401 `{"error": "Unauthorized"}` without
`Authorization: Bearer KEY` (vllm 0.33.0 vllm/entrypoints/serve/middleware/authenticate.py:11,30-60;
sglang 0.5.23 python/sglang/srt/utils/auth.py:101-106). The server is seen through `RouteHost`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from toolkit.sim import protocol
from toolkit.sim.engine import Chunk, GenRequest
from toolkit.sim.health import HealthRoutes
from toolkit.sim.metrics_page import render_vllm_metrics
from toolkit.sim.observability import register_observability
from toolkit.sim.outputs import add_logprobs, greedy_words
from toolkit.sim.protocol import WordSource
from toolkit.sim.release_logs import server_args_fields
from toolkit.sim.route_host import RouteHost
from toolkit.sim.startup import sglang_server_args

__all__ = ["build_app"]

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

    def __init__(self, server: RouteHost) -> None:
        self.server = server
        self.config = server.config
        self.started = int(time.time())

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

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise protocol.BadRequest("The request body is not valid JSON.") from None
        if not isinstance(body, dict):
            raise protocol.BadRequest("The request body must be a JSON object.")
        return body

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The release's API-key check (only guarded paths; /sim/ is the simulator's own)."""
        keys = self.config.api_keys
        profile = self.config.release.profile
        if keys and not request.path.startswith("/sim/") and profile.needs_api_key(request.path):
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            # vLLM's ASGI middleware reads the scheme case-insensitively (0.33.0 authenticate.py:30-45);
            # SGLang and older vLLM compare the whole header with f"Bearer {key}".
            lenient = self.config.engine == "vllm" and self.config.release.at_least("0.25.0")
            if not ((scheme.lower() == "bearer" if lenient else scheme == "Bearer") and token in keys):
                return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    async def _start(self, prompt_tokens: int, max_tokens: int, rid: str, words: WordSource | None = None
                     ) -> GenRequest:
        await self.server.ready.wait()  # generation is proven only after the warm-up request
        gen = self.server.engine.new_request(rid, prompt_tokens, max_tokens, words)
        self.server.requests_seen += 1
        self.server.engine.submit(gen)
        return gen

    async def models(self, request: web.Request) -> web.Response:
        owner = "sglang-simulator" if self.config.engine == "sglang" else "vllm-simulator"
        card = {"id": self.config.served_model_name, "object": "model", "created": self.started, "owned_by": owner,
                "root": self.config.model_path, "parent": None, "max_model_len": self.config.context_length}
        return web.json_response({"object": "list", "data": [card]})

    async def model_info(self, request: web.Request) -> web.Response:
        return web.json_response({"model_path": self.config.model_path, "tokenizer_path": self.config.model_path,
                                  "is_generation": True, "simulator": "toolkit.sim"})

    async def server_info(self, request: web.Request) -> web.Response:
        totals = self.server.engine.totals
        state: dict[str, object] = {"last_gen_throughput": self.server.engine.last_gen_throughput,
                                    "memory_usage": {"token_capacity": self.server.max_total_tokens}}
        if self.config.speculation is not None and totals.spec_forward_ct:
            state["avg_spec_accept_length"] = totals.spec_accept_tokens / totals.spec_forward_ct
        source = self.server.source
        version = source.version if source and source.version else str(self.config.release.version)
        fields = server_args_fields(self.config.release, sglang_server_args(self.config))
        fields.pop("api_key", None)
        return web.json_response({**fields, "internal_states": [state], "version": version,
                                  "simulator": "toolkit.sim"})

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
        count = protocol.count_prompt_tokens(body, chat="messages" in body)
        return web.json_response({"count": count, "max_model_len": 32768, "tokens": list(range(count))})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": str(self.config.release.version), "simulator": "toolkit.sim"})

    async def sim_info(self, request: web.Request) -> web.Response:
        """Simulator only: the latency model's predictions for this launch (docs/simulator.md)."""
        m = self.server.model
        return web.json_response({
            "simulator": "toolkit.sim", "engine": self.config.engine, "perf": m.params.to_mapping(),
            "step_ms": m.step_ms(1), "mean_accept_length": m.mean_accept_length(),
            "single_stream_tok_s": m.tokens_per_s(1), "cuda_graph": m.uses_cuda_graph(1),
            "ready": self.server.ready.is_set(), "pid": self.server.pid, "worker_pids": self.server.worker_pids(),
            "release": str(self.config.release.version)})

    async def openai(self, request: web.Request, chat: bool) -> web.StreamResponse:
        if self.server.worker_error is not None:  # transformers serve 5.24 serving/utils.py:949-958, server.py:78-81
            rid = request.headers.get("X-Request-ID") or str(uuid.uuid4())
            return web.json_response({"error": f"CB worker is dead and cannot accept request {rid}: "
                                               f"{self.server.worker_error}"}, status=503)
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


def build_app(server: RouteHost) -> web.Application:
    """The aiohttp application of one simulated server: the routes its release serves."""
    r = Routes(server)
    health = HealthRoutes(server)
    app = web.Application(middlewares=[r.access_log, r.guard], client_max_size=64 * 1024 * 1024)

    async def server_header(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["Server"] = "uvicorn (toolkit.sim simulator)"

    app.on_response_prepare.append(server_header)
    add = app.router
    engine = server.config.engine
    add.add_get("/v1/models", r.models)
    add.add_post("/v1/completions", functools.partial(r.openai, chat=False))
    add.add_post("/v1/chat/completions", functools.partial(r.openai, chat=True))
    add.add_get("/sim/info", r.sim_info)
    health.add_to(add)
    if engine == "transformers":
        return app  # transformers 5.24 serving/server.py:106-154: no /metrics, no /tokenize, no server info
    for path in ("/tokenize", "/v1/tokenize"):
        add.add_post(path, r.tokenize)
    if engine == "sglang":
        for path in ("/get_model_info", "/model_info"):
            add.add_get(path, r.model_info)
        for path in server.config.release.profile.info_paths:
            add.add_get(path, r.server_info)
        add.add_route("*", "/flush_cache", r.flush_cache)
        add.add_post("/generate", r.generate)
    else:
        add.add_get("/metrics", r.metrics)
        add.add_get("/version", r.version)
    register_observability(app, server)  # profiler, SGLang --enable-metrics, cache reset, /sim/gpu
    return app
