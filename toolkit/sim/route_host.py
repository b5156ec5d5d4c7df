"""What the HTTP handlers see of the simulated server: a protocol, so the routes never import the server."""

from __future__ import annotations

import asyncio
from typing import Protocol

from toolkit.sim.args import SimConfig
from toolkit.sim.engine import Engine
from toolkit.sim.latency import LatencyModel
from toolkit.sim.source import SourcePerf

__all__ = ["RouteHost"]


class RouteHost(Protocol):
    """What the handlers need of the server process."""

    config: SimConfig
    source: SourcePerf | None
    engine: Engine
    model: LatencyModel
    ready: asyncio.Event
    max_total_tokens: int
    pid: int
    requests_seen: int
    shutting_down: bool
    worker_error: str | None  # transformers serve: the batching worker's fatal error, once it died
    crashed: bool  # the engine (SGLang scheduler, vLLM EngineCore) died while serving

    def access(self, peer: tuple[str, int], method: str, path: str, version: str, status: int) -> None: ...

    def log(self, message: str, level: str = "info", rank: int | None = None, source: str = "") -> None: ...

    def worker_pids(self) -> list[int]: ...
