"""What a performance engineer scrapes from the simulated server: Prometheus metrics, cache flush, GPU load.

SGLang ``/metrics`` only with ``--enable-metrics`` (sglang 0.5.9 entrypoints/http_server.py,
metrics/collector.py:305-397, managers/scheduler_metrics_mixin.py:114-120); vLLM ``/reset_prefix_cache``
only with ``VLLM_SERVER_DEV_MODE=1`` (0.33.0 serve/dev/cache/api_router.py:20-43); ``/sim/gpu``: busy time.
"""

from __future__ import annotations

import os
import time

from aiohttp import web

from toolkit.sim.engine import GenRequest, modelled_ms
from toolkit.sim.metrics_page import family
from toolkit.sim.profiler import SimProfiler
from toolkit.sim.route_host import RouteHost

__all__ = ["register_observability", "render_sglang_metrics"]


def render_sglang_metrics(server: RouteHost) -> str:
    """SGLang's gauges and counters as its scheduler on TP rank 0 exports them."""
    e, c, t = server.engine, server.config, server.engine.totals
    labels = {"model_name": c.served_model_name, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0",
              "moe_ep_rank": "0"}
    rows: list[tuple[str, str, str, float]] = [
        ("num_running_reqs", "gauge", "The number of running requests.", len(e.running)),
        ("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", len(e.waiting)),
        ("token_usage", "gauge", "The token usage.", e.num_tokens_in_use / max(server.max_total_tokens, 1)),
        ("gen_throughput", "gauge", "The generation throughput (token/s).", e.last_gen_throughput),
        ("cache_hit_rate", "gauge", "The prefix cache hit rate.", 0.0)]
    if c.speculation is not None:
        rows.append(("spec_accept_length", "gauge", "The average acceptance length of speculative decoding.",
                     t.spec_accept_tokens / t.spec_forward_ct if t.spec_forward_ct else 0.0))
    rows += [("prompt_tokens_total", "counter", "Number of prefill tokens processed.", t.prompt_tokens),
             ("generation_tokens_total", "counter", "Number of generation tokens processed.",
              t.generation_tokens),
             ("num_requests_total", "counter", "Number of requests processed.", t.requests_finished)]
    return "\n".join(line for name, kind, text, value in rows
                     for line in family(f"sglang:{name}", kind, text, [(labels, value)])) + "\n"


class _GpuLoad:
    """Busy seconds of the (simulated) GPUs: every step's modelled duration, added when it ends."""

    def __init__(self, server: RouteHost) -> None:
        self.server = server
        self.busy_s = 0.0
        server.engine.hooks.append(self._on_step)

    def _on_step(self, kind: str, batch: list[GenRequest]) -> None:
        self.busy_s += modelled_ms(self.server.model, kind, batch) / 1000.0

    async def handle(self, request: web.Request) -> web.Response:
        e, c = self.server.engine, self.server.config
        return web.json_response({"simulator": "toolkit.sim", "tp_size": c.tp_size, "busy_s": self.busy_s,
                                  "now": time.time(), "running": len(e.running), "waiting": len(e.waiting),
                                  "mem_fraction_static": c.mem_fraction_static,
                                  "speculative": c.speculation is not None})


def register_observability(app: web.Application, server: RouteHost) -> None:
    """Add the routes of this module to the server's application (one call from routes.build_app)."""
    SimProfiler(server).register(app)
    app.router.add_get("/sim/gpu", _GpuLoad(server).handle)
    c = server.config
    if c.engine == "sglang" and c.namespace.get("enable_metrics"):
        async def metrics(request: web.Request) -> web.Response:
            return web.Response(text=render_sglang_metrics(server), content_type="text/plain", charset="utf-8")

        app.router.add_get("/metrics", metrics)
    if c.engine == "vllm" and os.environ.get("VLLM_SERVER_DEV_MODE") == "1":
        async def reset_prefix_cache(request: web.Request) -> web.Response:
            server.log("Resetting prefix cache", source="api_router.py:30")
            return web.json_response({"success": True})

        app.router.add_post("/reset_prefix_cache", reset_prefix_cache)
