"""The simulated server's torch profiler: ``/start_profile`` and ``/stop_profile`` writing Chrome traces.

SGLang (0.5.9 entrypoints/http_server.py:832-865, managers/scheduler_profiler_mixin.py): GET or POST,
the folder from the body's ``output_dir``, else ``$SGLANG_TORCH_PROFILER_DIR``, else ``/tmp``;
``num_steps`` stops by itself; a start while one runs, or a stop with none, is HTTP 500 (the engine's
RuntimeError). vLLM (0.33.0 entrypoints/serve/profile/api_router.py:38-66): POST only, routes only with
``--profiler-config``. File names: toolkit.engines.traces. At most ``MAX_STEPS`` steps are kept.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import socket
import time

from aiohttp import web

from toolkit.engines.traces import trace_file_name
from toolkit.sim.engine import GenRequest, modelled_ms
from toolkit.sim.route_host import RouteHost
from toolkit.sim.trace import StepRecord, TraceShape, build_trace, dumps, trace_json_for_rank

__all__ = ["SimProfiler", "MAX_STEPS"]

MAX_STEPS = 64
_NOTE = "SIMULATED trace written by toolkit.sim: kernel names, frames and CUDA-graph markers imitate SGLang 0.5.9"


class SimProfiler:
    """Records the engine's steps while a profile runs and writes one trace per TP rank when it stops."""

    def __init__(self, server: RouteHost) -> None:
        self.server = server
        self.active = False
        self.steps: list[StepRecord] = []
        self.output_dir = self.profile_id = self.prefix = ""
        self.num_steps: int | None = None
        self.started = 0.0
        self.writing: asyncio.Task[list[str]] | None = None
        server.engine.hooks.append(self._on_step)

    def _on_step(self, kind: str, batch: list[GenRequest]) -> None:
        if not self.active:
            return
        end = time.time()
        # a late step makes the next ones come sooner (engine.py): never let two steps overlap in the trace
        start = max(end - modelled_ms(self.server.model, kind, batch) / 1000.0,
                    self.steps[-1].end_s if self.steps else self.started)
        if len(self.steps) < MAX_STEPS:
            self.steps.append(StepRecord(kind, start, end, len(batch)))
        if self.num_steps is not None and len(self.steps) >= self.num_steps and self.writing is None:
            self.writing = asyncio.ensure_future(self._stop())

    def _log_ranks(self, message: str) -> None:
        """SGLang: every TP rank logs it."""
        for rank in range(self.server.config.tp_size):
            self.server.log(message, rank=rank if self.server.config.tp_size > 1 else None,
                            source="gpu_worker.py:1440")

    def start(self, output_dir: str, num_steps: int | None, prefix: str) -> None:
        self.active, self.steps, self.writing = True, [], None
        self.output_dir, self.prefix, self.num_steps = output_dir, prefix, num_steps
        self.started = time.time()
        self.profile_id = str(self.started)
        if self.server.config.engine == "sglang":
            self._log_ranks(f"Profiling starts. Traces will be saved to: {output_dir} (with profile id: "
                            f"{self.profile_id})")
        else:
            self.server.log("Starting profiler...", source="api_router.py:38")

    def _file_names(self) -> list[str]:
        """One per TP rank, as the release names them (toolkit.engines.traces); vLLM's front end adds its CPU
        trace (``<host>_<pid>.async_llm.<ns>``, vllm 0.25.0 vllm/v1/engine/async_llm.py:187-196)."""
        c = self.server.config
        if c.engine == "vllm":
            version, ns, host = str(c.release.version), time.time_ns(), socket.gethostname()
            names = [trace_file_name("vllm", version, r, host=host, pid=os.getpid(), ns=ns) for r in range(c.tp_size)]
            front = trace_file_name("vllm", version, 0, host=host, pid=os.getpid(), ns=ns, kind="frontend")
            return [n for n in names if n is not None] + ([front] if front else [])
        head = f"{self.prefix}-" if self.prefix else ""
        return [f"{head}{self.profile_id}-TP-{r}.trace.json.gz" for r in range(c.tp_size)]

    def _write(self, steps: list[StepRecord]) -> list[str]:
        """Every rank's trace file (gzip, atomically renamed); runs in a worker thread."""
        os.makedirs(self.output_dir, exist_ok=True)
        pid0 = self.server.pid
        pids = [pid0] + self.server.worker_pids()[: self.server.config.tp_size]
        c, m, spec = self.server.config, self.server.model, self.server.config.speculation
        shape = TraceShape(c.engine, m.params.num_layers, c.cuda_graph, spec.num_steps if spec else 0,
                           bool(spec and spec.verify_in_extend), m.draft_ms(), c.tp_size)
        text = dumps(build_trace(shape, steps, t0=self.started, pid=pid0, rank=0, note=_NOTE))
        paths = []
        for rank, name in enumerate(self._file_names()):
            pid = pids[rank] if rank < len(pids) else pid0 + rank
            path = os.path.join(self.output_dir, name)
            partial = os.path.join(self.output_dir, f".{name}.partial")
            with gzip.open(partial, "wt", compresslevel=1, encoding="utf-8") as out:
                # the front end's trace holds CPU events only (AsyncLLM profiles ProfilerActivity.CPU): no kernels
                front = ".async_llm." in name
                out.write(dumps({"traceEvents": [], "note": _NOTE}) if front else trace_json_for_rank(text, rank, pid0, pid))
            os.replace(partial, path)
            paths.append(path)
        return paths

    async def _stop(self) -> list[str]:
        self.active = False
        steps = list(self.steps)
        if self.server.config.engine == "sglang":
            self._log_ranks("Stop profiling...")
        paths = await asyncio.get_running_loop().run_in_executor(None, self._write, steps)
        if self.server.config.engine == "sglang":
            self._log_ranks(f"Profiling done. Traces are saved to: {self.output_dir}")
        else:
            self.server.log("Profiler stopped.", source="api_router.py:51")
        return paths

    async def _body(self, request: web.Request) -> dict[str, object]:
        if not request.can_read_body:
            return {}
        try:
            body = json.loads(await request.read() or b"{}")
        except ValueError:
            raise web.HTTPUnprocessableEntity(text='{"detail": "invalid JSON body"}',
                                              content_type="application/json") from None
        return body if isinstance(body, dict) else {}

    async def start_profile(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if self.active or (self.writing is not None and not self.writing.done()):
            return web.Response(status=500, text="Internal Server Error")  # RuntimeError: already in progress
        vllm = self.server.config.engine == "vllm"
        if vllm:
            config = self.server.config.namespace.get("profiler_config") or {}
            folder = config.get("torch_profiler_dir", "") if isinstance(config, dict) else ""
            steps = body.get("max_iterations")
        else:
            folder = body.get("output_dir") or os.environ.get("SGLANG_TORCH_PROFILER_DIR", "/tmp")
            steps = body.get("num_steps")
        self.start(os.path.expanduser(str(folder)), steps if isinstance(steps, int) and steps > 0 else None,
                   str(body.get("profile_prefix") or ""))
        return web.Response(status=200) if vllm else web.Response(text="Start profiling.\n")

    async def stop_profile(self, request: web.Request) -> web.Response:
        if self.writing is not None:  # num_steps stopped it already: the engine says it is not in progress
            await self.writing
            self.writing = None
            return web.Response(status=500, text="Internal Server Error")
        if not self.active:
            return web.Response(status=500, text="Internal Server Error")  # "Profiling is not in progress."
        await self._stop()
        if self.server.config.engine == "vllm":
            return web.Response(status=200)
        return web.Response(text="Stop profiling. This will take some time.\n")

    def register(self, app: web.Application) -> None:
        if self.server.config.engine == "vllm":
            config = self.server.config.namespace.get("profiler_config")
            if isinstance(config, dict) and config.get("profiler"):
                app.router.add_post("/start_profile", self.start_profile)
                app.router.add_post("/stop_profile", self.stop_profile)
            return
        app.router.add_route("*", "/start_profile", self.start_profile)
        app.router.add_route("*", "/stop_profile", self.stop_profile)
