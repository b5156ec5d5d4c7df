"""The simulated server's life: start-up, readiness, faults, shutdown, in the imitated release's order.

SGLang: server_args, one scheduler per TP rank, uvicorn, a warm-up request, then `The server is fired up
and ready to roll!`; a scheduler failure is a SIGQUIT that kills the tree (kill_process_tree). vLLM binds
its port first, starts EngineCore and workers; `Application startup complete.` is ready. transformers
serve: one process whose batching thread can die while the server answers (`worker-dead-after-start`).
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
import random
import signal
import socket
import time
from collections.abc import Coroutine
from http import HTTPStatus
from typing import Any

from aiohttp import web

from toolkit.sim import faults, logs, release_logs, startup
from toolkit.sim.args import SimConfig
from toolkit.sim.engine import Engine, GenRequest
from toolkit.sim.latency import LatencyModel, PerfParams
from toolkit.sim.release import installed_kernel
from toolkit.sim.routes import build_app
from toolkit.sim.source import SourcePerf, kernel_too_old
from toolkit.sim.startup_vllm import VLLM_ROUTES, vllm_preamble
from toolkit.sim.stats_log import SglangStatsLog, VllmStatsLog
from toolkit.sim.workers import Child, WorkerFailed, WorkerPool

__all__ = ["SimServer"]


class SimServer:
    """One simulated server process. `run()` returns the exit status (or the process kills itself)."""

    def __init__(self, config: SimConfig, source: SourcePerf | None = None) -> None:
        self.config = config
        self.source = source
        self.pid = os.getpid()
        self.writer = logs.LogWriter(1, config.log_level)
        self.model = LatencyModel(source.params if source else PerfParams(), config.decode_setup)
        self.max_total_tokens = startup.max_total_tokens(config)
        self.engine = Engine(self.model, config.seed, config.spin_ms, max_running=config.cuda_graph_max_bs,
                             noise_pct=config.noise_pct, noise_key=(source.version or "") if source else "")
        self.pool = WorkerPool(config)
        self.ready = asyncio.Event()
        self.http_up = self.crashed = self.shutting_down = False
        self.worker_error: str | None = None
        self.running_phase = False  # SGLang: the tokenizer manager's loop runs (from the warm-up on)
        self.requests_seen = 0
        self._stop: asyncio.Future[int] | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._engine_task: asyncio.Task[None] | None = None
        self._rng = random.Random(config.seed)

    @property
    def api_label(self) -> str:
        return f"APIServer pid={self.pid}"

    def log(self, message: str, level: str = "info", rank: int | None = None, source: str = "") -> None:
        """One record of the main process (SGLang: rank-less or `TP0`; vLLM: `(APIServer pid=N)`)."""
        text = logs.record(self.config.engine, time.time(), message, self.api_label, level, source, rank)
        self.writer.write(text, level)

    def plain(self, lines: list[str]) -> None:
        """Printed (not logged) error lines: a traceback."""
        if self.config.engine == "vllm":
            lines = [logs.vllm_plain(self.api_label, x) for x in lines]
        self.writer.write("\n".join(lines), "error")

    def uvicorn(self, *messages: str, level: str = "info") -> None:
        for message in messages:
            if self.config.engine == "sglang":
                self.writer.write(logs.uvicorn_line(time.time(), level, message), level)
            elif self.config.engine == "transformers":  # uvicorn logs at info (transformers/cli/serve.py:221)
                self.writer.write(logs.plain_uvicorn(level, message), "sim")
            else:
                self.writer.write(logs.vllm_uvicorn(self.api_label, level, message), level)

    def access(self, peer: tuple[str, int], method: str, path: str, version: str, status: int) -> None:
        phrase = HTTPStatus(status).phrase
        self.uvicorn(f'{peer[0]}:{peer[1]} - "{method} {path} HTTP/{version}" {status} {phrase}')

    def _stats_emit(self, message: str, level: str, source: str) -> None:
        self.log(message, level, rank=0 if self.config.tp_size > 1 else None, source=source)

    def finish(self, code: int) -> None:
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(code)

    def worker_pids(self) -> list[int]:
        return [c.pid for c in self.pool.children]

    def die_like_sglang(self) -> None:
        """SGLang's sigquit handler (the launcher's, then the tokenizer manager's): kill_process_tree."""
        line = (release_logs.running_sigquit_line if self.running_phase
                else release_logs.launch_sigquit_line)(self.config.release)
        if line is not None:
            self.log(line, "error")
        self.pool.kill()
        os.kill(os.getpid(), signal.SIGKILL)

    def _on_term(self) -> None:
        if not self.http_up:  # nothing catches SIGTERM before uvicorn runs: children go, then the default
            self.pool.kill()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        self.finish(0)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._stop = loop.create_future()
        loop.add_signal_handler(signal.SIGTERM, self._on_term)
        loop.add_signal_handler(signal.SIGINT, self._on_term)
        if self.config.engine == "sglang":
            loop.add_signal_handler(signal.SIGQUIT, self.die_like_sglang)
        try:
            code = await self._start_and_serve()
        finally:
            for task in self._tasks:
                task.cancel()
            self.pool.unwatch()
            self.pool.stop()
            if self._runner is not None:
                await self._runner.cleanup()
        return code

    async def _until_stopped(self, awaitable: Coroutine[object, object, None]) -> int | None:
        """Wait for `awaitable` unless a stop (signal) comes first; returns the stop's exit code then."""
        assert self._stop is not None
        task = asyncio.ensure_future(awaitable)
        waiting: set[asyncio.Future[Any]] = {task, self._stop}
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if task not in done:
            task.cancel()
            return self._stop.result()
        task.result()  # re-raises WorkerFailed
        return None

    def _banner(self) -> None:
        c = self.config
        details = f"imitating {c.release.label}, startup {c.startup_s:g} s, fault {c.fault}, seed {c.seed}"
        details += f", noise {c.noise_pct:g}%" if c.noise_pct else ""
        if self.source is not None:
            details += f", source {self.source.root} ({self.source.version})"
        self.writer.write(logs.banner(c.engine, time.time(), self.pid, details), "sim")

    def _bind_early(self) -> socket.socket | None:
        """vLLM binds its port before it starts the engine (api_server.create_server_socket)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            if self.config.fault == "port-in-use":
                raise OSError(errno.EADDRINUSE, "Address already in use")
            sock.bind((self.config.host, self.config.port))
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE:
                raise
            self.plain(faults.vllm_api_server_traceback("bind"))
            return None
        return sock

    async def _start_and_serve(self) -> int:
        c = self.config
        self._banner()
        sock = None
        if c.engine == "sglang":
            for message in startup.sglang_preamble(c):
                self.log(message, "warning")
            self.log(release_logs.server_args_line(c.release, startup.sglang_server_args(c)))
            if self._kernel_refused():
                return 1
        elif c.engine == "transformers":
            await asyncio.sleep(startup.phases(c).pre + startup.phases(c).weights)  # FORCE_MODEL loads first
        else:
            no_logo = os.environ.get("VLLM_DISABLE_LOG_LOGO", "0") not in ("", "0")  # vllm/envs.py:2184 (0.33.0)
            for level, source, message in vllm_preamble(c, disable_logo=no_logo):
                self.log(message, level, source=source)
            sock = self._bind_early()
            if sock is None:
                return 1
        await asyncio.sleep(startup.phases(c).pre)
        self.pool.spawn()
        try:
            stopped = await self._until_stopped(self.pool.wait_ready())
        except WorkerFailed as failure:
            return await self._startup_failure(failure.child)
        if stopped is not None:
            return stopped
        if (code := await self._start_http(sock)) is not None:
            return code
        self.pool.watch(self._on_child_death)
        self._engine_task = asyncio.create_task(self.engine.run())
        self._tasks.append(self._engine_task)
        if c.engine == "sglang":
            self.engine.hooks.append(SglangStatsLog(self.engine, self._stats_emit, c.decode_log_interval,
                                                    self.max_total_tokens))
            self._tasks.append(asyncio.create_task(self._warmup()))
        elif c.engine == "transformers":
            self.ready.set()
            if c.fault == "worker-dead-after-start":
                self._tasks.append(asyncio.create_task(self._cb_worker_dies()))
        else:
            interval = float(os.environ.get("VLLM_LOG_STATS_INTERVAL", "10"))
            self._tasks.append(asyncio.create_task(
                VllmStatsLog(self.engine, self._stats_emit, interval, self.max_total_tokens).run()))
            self.ready.set()
        if c.fault in ("crash-while-serving", "watchdog") and c.engine != "transformers":
            self._arm_crash()
        assert self._stop is not None
        code = await self._stop
        if code == 0:
            self._graceful_shutdown()
        return code

    async def _start_http(self, sock: socket.socket | None) -> int | None:
        self._runner = web.AppRunner(build_app(self), access_log=None, handle_signals=False)
        await self._runner.setup()
        c = self.config
        if c.engine == "vllm":
            self.log(f"Starting vLLM server on http://{c.host}:{c.port}", source="api_server.py:616")
            self.log("Available routes are:", source="launcher.py:37")
            for route, methods in VLLM_ROUTES:
                self.log(f"Route: {route}, Methods: {methods}", source="launcher.py:46")
            assert sock is not None
            site: web.BaseSite = web.SockSite(self._runner, sock)
        else:
            site = web.TCPSite(self._runner, c.host, c.port, backlog=1024)
        self.uvicorn(f"Started server process [{self.pid}]", "Waiting for application startup.",
                     "Application startup complete.")
        try:
            if c.fault == "port-in-use":
                raise OSError(errno.EADDRINUSE, "address already in use")
            await site.start()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            self.uvicorn(faults.bind_error(c.host, c.port), level="error")
            self.uvicorn("Waiting for application shutdown.", "Application shutdown complete.")
            return 1
        self.http_up = True
        if c.engine != "vllm":
            self.uvicorn(f"Uvicorn running on http://{c.host}:{c.port} (Press CTRL+C to quit)")
        return None

    def _peer(self) -> tuple[str, int]:
        return ("127.0.0.1", self._rng.randrange(32768, 60999))

    async def _warmup(self) -> None:
        """SGLang's _wait_and_warmup: GET /model_info, an 8-token POST /generate, then the ready line
        (--skip-server-warmup: Up at once, 0.5.23 http_server.py:2593)."""
        c = self.config
        self.access(self._peer(), "GET", "/model_info", "1.1", 200)
        self.running_phase = True  # the first request starts the tokenizer manager's loop
        if c.skip_warmup:
            self.log("The server is fired up and ready to roll!")
            self.ready.set()
            return
        generation = (self.model.prefill_ms(6) + 7 * self.model.step_ms(1)) / 1000.0
        await asyncio.sleep(max(c.warmup_s - generation, 0.0))  # first-request JIT compilation
        request = self.engine.new_request("warmup", 6, 8)
        self.engine.submit(request)
        while (await request.out.get()).finish_reason is None:
            pass
        self.access(self._peer(), "POST", "/generate", "1.1", 200)
        self.log("The server is fired up and ready to roll!")
        self.ready.set()

    async def _startup_failure(self, child: Child) -> int:
        c = self.config
        if c.engine == "sglang":
            # A failing scheduler sends SIGQUIT (die_like_sglang); this is a scheduler that just died.
            lines, traceback = release_logs.scheduler_died_lines(c.release, child.rank, child.popen.wait())
            if traceback:
                self.plain(faults.traceback_lines(faults.SCHEDULER_WAIT_FRAMES, lines))
            else:
                for line in lines:
                    self.log(line, "error")
            return 1
        self.pool.kill()
        if child.role == "worker":
            label = next(x.label for x in self.pool.children if x.role == "engine-core")
            tb = "\n".join(["EngineCore failed to start.", *faults.vllm_engine_traceback("workers")])
            self.writer.write(logs.record("vllm", time.time(), tb, label, "error", "core.py:1231"), "error")
        self.plain(faults.vllm_api_server_traceback("engine"))
        return 1

    def _on_child_death(self, child: Child) -> None:
        if self.config.engine == "sglang":
            line, fatal = release_logs.child_crashed_line(self.config.release, child.rank, child.pid, child.popen.wait())
            if line is not None:
                self.log(line, "error" if fatal else "warning")
            if fatal:
                self.die_like_sglang()
            else:
                self.crashed = True  # 0.4.10-0.5.9: nobody notices; requests hang
                if self._engine_task is not None:
                    self._engine_task.cancel()
            return
        self._engine_dead()

    def _kernel_refused(self) -> bool:
        """SGLang's launcher checks the kernel wheel before anything starts (release.installed_kernel)."""
        if self.source is None or self.source.kernel is None:
            return False
        package, required = self.source.kernel
        installed_package, version = installed_kernel(self.config.release)
        installed = version if installed_package == package else None
        if installed is not None and not kernel_too_old(required, installed):
            return False
        self.plain(faults.kernel_version_traceback(self.source.package_root, package, installed, required))
        return True

    async def _cb_worker_dies(self) -> None:
        """transformers serve: the batching thread dies; the server keeps answering (503 with the reason)."""
        await asyncio.sleep(self.config.crash_after_s or 0.0)
        error = self.worker_error = faults.CUDA_ILLEGAL_ACCESS[0].split(": ", 1)[1]
        self.crashed = True
        if self._engine_task is not None:
            self._engine_task.cancel()
        self.log("\n".join([f"Error in generation loop: {error}", *faults.transformers_cb_traceback()]), "error")

    def _engine_dead(self) -> None:
        """vLLM: the API server learns that EngineCore died, logs EngineDeadError and shuts down."""
        _, api = faults.vllm_engine_dead_traceback()
        self.log("\n".join(["AsyncLLM output_handler failed.", *api]), "error", source="async_llm.py:537")
        self._graceful_shutdown()
        self.finish(1)

    def _arm_crash(self) -> None:
        c = self.config
        if c.crash_after_s is not None:
            async def later() -> None:
                await self.ready.wait()
                await asyncio.sleep(c.crash_after_s or 0.0)
                self._crash()
            self._tasks.append(asyncio.create_task(later()))
            return
        steps = itertools.count(1)

        def hook(kind: str, batch: list[GenRequest]) -> None:
            # N requests complete; the crash comes 3 decode steps into request N + 1.
            if kind == "decode" and self.requests_seen > c.crash_after_requests and next(steps) >= 3:
                self._crash()
        self.engine.hooks.append(hook)

    def _crash(self) -> None:
        if self.crashed:
            return
        self.crashed = True
        if self._engine_task is not None:
            self._engine_task.cancel()  # the scheduler is dead: no more tokens
        role, rank = ("scheduler", self.config.fault_rank) if self.config.engine == "sglang" else ("engine-core", 0)
        child = self.pool.child(role, rank)
        if child is not None:
            self.pool.command(child, "stall" if self.config.fault == "watchdog" else "crash")

    def _graceful_shutdown(self) -> None:
        self.shutting_down = True
        self.uvicorn("Shutting down", "Waiting for application shutdown.", "Application shutdown complete.",
                     f"Finished server process [{self.pid}]")
