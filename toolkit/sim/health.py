"""Health endpoints of the simulated server, answered as the imitated release answers them.

SGLang 0.5.x: one handler (0.5.23 python/sglang/srt/entrypoints/http_server.py:721-799), 503 while shutting
down or before the warm-up (:735-736), else a one-token request, ``asyncio.sleep(1)`` (:780), 200 once a
token came back, 503 after ``SGLANG_HEALTH_CHECK_TIMEOUT``; 0.4.x ``/health`` is 200 at once (0.4.10
:232-235). vLLM: 503 once the engine died (500 before 0.11). transformers serve 5.24: 503 ``cb_worker_dead``
(transformers/cli/serving/server.py:150-154).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

from aiohttp import web

from toolkit.sim.route_host import RouteHost

__all__ = ["HealthRoutes"]


class HealthRoutes:
    def __init__(self, server: RouteHost) -> None:
        self.server = server
        self.release = server.config.release

    def add_to(self, router: web.UrlDispatcher) -> None:
        sglang = self.sglang_generate if self.release.at_least("0.5.0rc0") else self.always_up
        handlers = {"sglang": sglang, "vllm": self.vllm, "transformers": self.transformers}
        router.add_get("/health", handlers[self.server.config.engine])
        if self.server.config.engine == "sglang":
            router.add_get("/health_generate", self.sglang_generate)

    async def always_up(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def sglang_generate(self, request: web.Request) -> web.Response:
        server = self.server
        if server.shutting_down:
            server.log("Health check request received during shutdown. Returning 503.")
            return web.Response(status=503)
        if self.release.at_least("0.5.0rc0") and not server.ready.is_set():
            return web.Response(status=503)  # server_status == Starting: warm-up not done
        timeout_s = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
        request_ = server.engine.new_request(f"HEALTH_CHECK_{uuid.uuid4().hex}", 1, 1)
        server.engine.submit(request_)
        tic = time.time()
        while time.time() < tic + timeout_s:
            await asyncio.sleep(1)
            if request_.generated > 0:
                return web.Response(status=200)
        request_.cancelled = True
        started = time.strftime("%H:%M:%S", time.localtime(tic))
        server.log("Health check failed. Server couldn't get a response from detokenizer for last "
                   f"{timeout_s:g} seconds. tic start time: {started}. last_heartbeat time: {started}", "error")
        return web.Response(status=503)

    async def vllm(self, request: web.Request) -> web.Response:
        if self.server.crashed:
            return web.Response(status=503 if self.release.at_least("0.11.0") else 500)
        return web.Response(status=200)

    async def transformers(self, request: web.Request) -> web.Response:
        if self.server.worker_error is not None:
            return web.json_response({"status": "unhealthy", "reason": "cb_worker_dead"}, status=503)
        return web.json_response({"status": "ok"})
