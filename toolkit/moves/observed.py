"""A benchmark run that also watches: GPU telemetry, the server's Prometheus metrics, the prefix cache, outputs.

``observed(tk.Load(...))`` is a plan's ``bench`` that AIPerf and GuideLLM users would ask for, tied to the
journal: the trial hands it the step (:class:`toolkit.moves.trial.RunObserver`), which gets metric rows of
kind ``gpu``, ``prometheus``, ``cache`` and ``equivalence`` for each run.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolkit.benchmark import BenchResult, Load
from toolkit.journal import StepRecorder
from toolkit.logs import MetricRow
from toolkit.moves.profile import engine_profile
from toolkit.moves.trial import RunObserver, make_bench_call
from toolkit.observe.cache import CachePolicy, CacheRecord, flush_prefix_cache
from toolkit.observe.equivalence import EquivalenceResult, GreedyOutputs, compare_outputs, greedy_outputs
from toolkit.observe.scrape import MetricsScraper
from toolkit.observe.telemetry import GpuTelemetry, simulated_telemetry_command
from toolkit.server.http import metrics_route
from toolkit.server.server import Server

__all__ = ["Observation", "ObservedBench", "observed"]


@dataclass
class Observation:
    """What one run saw besides its benchmark numbers."""

    cache: CacheRecord | None = None
    gpu_rows: list[MetricRow] = field(default_factory=list)
    gpu_note: str = ""
    metric_rows: list[MetricRow] = field(default_factory=list)
    metrics_note: str = ""
    equivalence: EquivalenceResult | None = None

    def rows(self) -> list[MetricRow]:
        cache = [self.cache.metric_row()] if self.cache else []
        equivalence = [self.equivalence.metric_row()] if self.equivalence else []
        return cache + self.gpu_rows + self.metric_rows + equivalence

    def note(self) -> str:
        parts = [f"cache {self.cache.state} ({self.cache.detail})" if self.cache else "",
                 f"GPU telemetry: {self.gpu_note}" if self.gpu_note else "",
                 f"server metrics: {self.metrics_note}" if self.metrics_note else "",
                 f"output equivalence: {self.equivalence.summary()}" if self.equivalence else ""]
        return "; ".join(p for p in parts if p)


class ObservedBench(RunObserver):
    """A plan's ``bench`` that flushes (or notes) the cache, samples GPUs and scrapes ``/metrics`` around each run.

    ``telemetry``: ``auto`` (the simulator's stand-in for a simulated server, else nvidia-smi),
    ``nvidia-smi``, ``simulated``, ``off``, or a DCGM exporter URL. ``cache="keep"`` notes the state:
    ``warm`` after an earlier run on the same launch, else ``unknown``.
    """

    def __init__(self, bench: Load | Callable[[Server], BenchResult] | None = None, *,
                 telemetry: str = "auto", telemetry_interval_ms: int = 500, metrics: bool = True,
                 metrics_interval_s: float = 1.0, cache: CachePolicy = "keep", reference: GreedyOutputs | None = None,
                 api_key: str | None = None, progress: bool = False) -> None:
        if cache not in ("flush", "keep"):
            raise ValueError(f"cache must be 'flush' or 'keep', not {cache!r}")
        self._bench = make_bench_call(bench, progress=progress)
        self.telemetry, self.telemetry_interval_ms = telemetry, int(telemetry_interval_ms)
        self.metrics, self.metrics_interval_s = metrics, metrics_interval_s
        self.cache, self.reference, self.api_key = cache, reference, api_key
        self._observations: dict[int, tuple[BenchResult, Observation]] = {}
        self._benched: weakref.WeakSet[Server] = weakref.WeakSet()
        self._lock = threading.Lock()

    def _gpus(self, server: Server) -> GpuTelemetry | None:
        kind = self.telemetry
        if kind == "off":
            return None
        if kind.startswith(("http://", "https://")):
            return GpuTelemetry(server.host, kind="dcgm", dcgm_url=kind, interval_ms=self.telemetry_interval_ms)
        if kind == "simulated" or (kind == "auto" and server.spec.simulated):
            command = simulated_telemetry_command(server.spec.python or "python3", f"http://127.0.0.1:{server.spec.port}",
                                                  self.telemetry_interval_ms)
            return GpuTelemetry(server.host, kind="simulated", command=command, interval_ms=self.telemetry_interval_ms)
        if kind in ("auto", "nvidia-smi"):
            return GpuTelemetry(server.host, interval_ms=self.telemetry_interval_ms)
        raise ValueError(f"telemetry must be auto, nvidia-smi, simulated, off or a DCGM URL, not {kind!r}")

    def __call__(self, server: Server) -> BenchResult:
        return self.observe(server)

    def observe(self, server: Server, bench: Load | Callable[[Server], BenchResult] | None = None
                ) -> BenchResult:
        """One observed run; ``bench`` replaces this object's benchmark for it (another concurrency, say)."""
        run = self._bench if bench is None else make_bench_call(bench, progress=False)
        engine = engine_profile(server)
        observation = Observation()
        if self.cache == "flush":
            observation.cache = flush_prefix_cache(server, engine, api_key=self.api_key)
        else:
            warm = server in self._benched
            observation.cache = CacheRecord("keep", "warm" if warm else "unknown",
                                            "not flushed; earlier runs on this launch may have filled it" if warm
                                            else "not flushed; first run on this launch (warm-up requests ran)")
        gpus = self._gpus(server)
        scraper = None
        names = engine.metrics if engine is not None and engine.metrics_path is not None else None
        path = metrics_route(server.spec, engine)
        if self.metrics and names is None:
            observation.metrics_note = f"{server.spec.engine} serves no Prometheus /metrics"
        elif self.metrics and names is not None and path is None:  # SGLang: only with --enable-metrics (0.5.9)
            observation.metrics_note = (f"not scraped: the metrics route exists only with {names.enabled_by} "
                                        "at launch; add it to the spec to record it")
        elif self.metrics and names is not None and path is not None:
            scraper = MetricsScraper(server.url, names, path=path, interval_s=self.metrics_interval_s)
        try:
            for sensor in (gpus, scraper):
                if sensor is not None:
                    sensor.start()
            result = run(server)
        finally:
            if scraper is not None:
                observation.metric_rows, observation.metrics_note = scraper.stop(), scraper.note
            if gpus is not None:
                observation.gpu_rows = [s.metric_row() for s in gpus.stop()]
                observation.gpu_note = gpus.note
            self._benched.add(server)
        if self.reference is not None:
            mine = greedy_outputs(server, self.reference.prompts, max_tokens=self.reference.max_tokens,
                                  api_key=self.api_key)
            observation.equivalence = compare_outputs(self.reference, mine)
        with self._lock:
            self._observations[id(result)] = (result, observation)
        return result

    def observation(self, result: BenchResult) -> Observation | None:
        """What was observed around the run that returned ``result``."""
        with self._lock:
            held = self._observations.get(id(result))
        return held[1] if held is not None and held[0] is result else None

    def record(self, step: StepRecorder, result: BenchResult, run_id: int | None) -> None:
        """Store the run's observations in ``step``, joined to ``run_id``; forgets them afterwards."""
        with self._lock:
            held = self._observations.pop(id(result), None)
        if held is None or held[0] is not result:
            return
        observation = held[1]
        step.record_metrics(observation.rows(), run_id=run_id)
        step.note(f"run {run_id}: {observation.note()}")


def observed(bench: Load | Callable[[Server], BenchResult] | None = None, **options: Any) -> ObservedBench:
    """A benchmark that observes each run (a plan's ``bench``): see :class:`ObservedBench`.

    >>> watch = observed(tk.Load(num_prompts=8, output_len=64), cache="flush", telemetry="auto")  # doctest: +SKIP
    >>> tk.measure(host, spec, plan=tk.Plan(bench=watch))  # doctest: +SKIP
    """
    return ObservedBench(bench, **options)
