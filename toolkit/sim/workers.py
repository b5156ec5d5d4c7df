"""The server's child processes: one per TP rank (plus vLLM's EngineCore), real OS processes.

Each is `python -m toolkit.sim.worker ... -- <server argv>` with the release's visible environment writes
(toolkit/sim/release.py). Children report "ready" or "failed" over a pipe whose EOF says a child died.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from toolkit.sim.args import SimConfig
from toolkit.sim.logs import vllm_label

__all__ = ["Child", "WorkerFailed", "WorkerPool", "worker_environment"]


def worker_environment(parent_env: Mapping[str, str], config: SimConfig, role: str = "scheduler") -> dict[str, str]:
    """What a child of ``role`` is exec'd with: the server's environment minus ``--sim-drop-env-in-workers``,
    plus the release's writes that its ``/proc/<pid>/environ`` shows."""
    env = {k: v for k, v in parent_env.items() if k not in config.drop_env_in_workers}
    return config.release.child_environment(env, role, config.env_context)[0]


@dataclass
class Child:
    role: str  # "scheduler" (SGLang), "engine-core" or "worker" (vLLM)
    rank: int
    popen: subprocess.Popen[bytes]
    ready_fd: int
    command_fd: int
    state: str = "starting"  # starting | ready | failed | exited

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def label(self) -> str:
        return vllm_label(self.role, self.rank, self.pid)


class WorkerFailed(RuntimeError):
    """A child reported a start-up failure or exited; carries the child."""

    def __init__(self, child: Child) -> None:
        super().__init__(f"{child.role} rank {child.rank} (pid {child.pid}) failed")
        self.child = child


class WorkerPool:
    """Spawns, watches and stops the children of one server."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.children: list[Child] = []

    def _roles(self) -> list[tuple[str, int]]:
        tp = self.config.tp_size
        if self.config.engine == "transformers":  # its batching worker is a thread of the server
            return []
        if self.config.engine == "vllm":
            return [("engine-core", 0)] + ([("worker", r) for r in range(tp)] if tp > 1 else [])
        return [("scheduler", r) for r in range(tp)]

    def spawn(self) -> None:
        t0 = time.monotonic()  # CLOCK_MONOTONIC is system-wide: every rank times its script from here
        for role, rank in self._roles():
            ready_r, ready_w = os.pipe()
            command_r, command_w = os.pipe()
            argv = [sys.executable, "-m", "toolkit.sim.worker", "--engine", self.config.engine, "--role", role,
                    "--tp-rank", str(rank), "--parent-pid", str(os.getpid()), "--ready-fd", str(ready_w),
                    "--command-fd", str(command_r), "--t0", f"{t0:.6f}", "--", *self.config.argv]
            env = worker_environment(os.environ, self.config, role)
            popen = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, pass_fds=(ready_w, command_r))
            os.close(ready_w)
            os.close(command_r)
            os.set_blocking(ready_r, False)
            self.children.append(Child(role, rank, popen, ready_r, command_w))

    def child(self, role: str, rank: int) -> Child | None:
        return next((c for c in self.children if c.role == role and c.rank == rank), None)

    def _read_reports(self, child: Child) -> None:
        try:
            data = os.read(child.ready_fd, 256)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            child.state = "failed" if child.state == "starting" else "exited"
            return
        for word in data.decode(errors="replace").split():
            if word == "ready" and child.state == "starting":
                child.state = "ready"
            elif word == "failed":
                child.state = "failed"

    async def wait_ready(self) -> None:
        """Return when every child reported ready; raise WorkerFailed for the first one that failed."""
        if not self.children:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def settle(failed: Child | None) -> None:
            if done.done():
                return
            if failed is None:
                done.set_result(None)
            else:
                done.set_exception(WorkerFailed(failed))

        self.watch(settle, on_ready=lambda: settle(None))
        try:
            await done
        finally:
            self.unwatch()

    def watch(self, on_death: Callable[[Child], None], on_ready: Callable[[], None] | None = None) -> None:
        """Call `on_death(child)` when a child failed or its pipe closed (it exited or was killed), and
        `on_ready()` once every child reported ready."""
        loop = asyncio.get_running_loop()

        def on_report(child: Child) -> None:
            self._read_reports(child)
            if child.state in ("failed", "exited"):
                loop.remove_reader(child.ready_fd)
                on_death(child)
            elif on_ready is not None and all(c.state == "ready" for c in self.children):
                on_ready()

        for child in self.children:
            loop.add_reader(child.ready_fd, on_report, child)

    def unwatch(self) -> None:
        loop = asyncio.get_running_loop()
        for child in self.children:
            if child.ready_fd >= 0:
                loop.remove_reader(child.ready_fd)

    def command(self, child: Child, text: str) -> None:
        with contextlib.suppress(OSError):  # already gone
            os.write(child.command_fd, (text + "\n").encode())

    def stop(self, grace_s: float = 2.0) -> None:
        """SIGTERM every child, SIGKILL those still alive after `grace_s`, and reap them all."""
        for child in self.children:
            if child.popen.poll() is None:
                child.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in self.children:
            try:
                child.popen.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                child.popen.kill()
                child.popen.wait()
        for child in self.children:
            for fd in (child.ready_fd, child.command_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)
            child.ready_fd = child.command_fd = -1

    def kill(self) -> None:
        """SIGKILL every child at once, as SGLang's kill_process_tree does."""
        for child in self.children:
            if child.popen.poll() is None:
                child.popen.kill()
