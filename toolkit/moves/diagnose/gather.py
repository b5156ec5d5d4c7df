"""What each side of a diagnosis showed while measured: a plan's bench that watches as the A/B test runs.

A launch's first run keeps the resolved configuration lines, the release and every process's
environment; every run its log metric rows, telemetry and ``/metrics``. A server's side is read
from its spec's label, which :func:`diagnose` sets, so two identical configurations stay two sides.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from toolkit.benchmark import BenchResult, Load
from toolkit.journal import StepRecorder
from toolkit.moves.diagnose.analyse import Side, SideEvidence
from toolkit.moves.diagnose.environment import EnvRow
from toolkit.moves.envcheck import env_report
from toolkit.moves.observed import ObservedBench
from toolkit.moves.trial import RunObserver
from toolkit.server.logfile import count_lines
from toolkit.server.server import Server

__all__ = ["SideGatherer", "CONFIG_MARKERS", "DEFAULT_ENV"]

CONFIG_MARKERS = ("server_args=", "non-default args:", "LLM engine")  # see toolkit.moves.diagnose.resolved
# Variables that change speed without changing a flag: NCCL's tuning (the seed's second suspect), CUDA's.
DEFAULT_ENV = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_CUMEM_ENABLE",
               "NCCL_NVLS_ENABLE", "NCCL_P2P_LEVEL", "NCCL_IB_DISABLE", "NCCL_GRAPH_REGISTER",
               "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")


class SideGatherer(RunObserver):
    """A plan's ``bench`` for :func:`toolkit.moves.compare` that keeps each side's evidence (see the module)."""

    def __init__(self, bench: Load | Callable[[Server], BenchResult] | None, labels: Mapping[str, Side],
                 *, env: Sequence[str] = DEFAULT_ENV, cache: Literal["flush", "keep"] = "flush") -> None:
        self._watch = ObservedBench(bench, cache=cache)
        self._labels = dict(labels)
        self._env = tuple(dict.fromkeys(env))
        self._seen: weakref.WeakSet[Server] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.sides: dict[Side, SideEvidence] = {"fast": SideEvidence(), "slow": SideEvidence()}

    def side_of(self, server: Server) -> Side:
        side = self._labels.get(server.spec.label or "")
        if side is None:
            raise ValueError(f"the server {server.where} runs a spec labelled {server.spec.label!r}, which is neither "
                             f"side of this diagnosis ({', '.join(self._labels)}); launch the specs diagnose() made")
        return side

    def __call__(self, server: Server) -> BenchResult:
        side = self.side_of(server)
        evidence = self.sides[side]
        if server not in self._seen:
            self._seen.add(server)
            self._first_run(server, evidence)
        before = count_lines(server.host, server.log_path) or 0
        result = self._watch.observe(server)
        after = count_lines(server.host, server.log_path) or 0
        server.follow().wait_for_lines(after)
        rows = server.ledger.metric_rows(before, after, result.started_at)
        observation = self._watch.observation(result)
        with self._lock:
            evidence.runs.append((result, rows))
            evidence.log_rows += rows
            if observation is not None:
                evidence.gpu_rows += observation.gpu_rows
                evidence.server_rows += observation.metric_rows
        return result

    def _first_run(self, server: Server, evidence: SideEvidence) -> None:
        lines = [e.text for e in server.follow().events() if any(m in e.text for m in CONFIG_MARKERS)]
        release = server.release()
        rows: list[EnvRow] = []
        note = ""
        with self._lock:
            read_env = bool(self._env) and not evidence.env_rows  # once per side: the first launch's ranks
        if read_env:
            report = env_report(server, dict.fromkeys(self._env), nccl_log=False)
            frame = report.frame  # read by its public columns; a column added later is not read
            rows = [(str(p), str(v), None if a is None or a != a else str(a))
                    for p, v, a in zip(frame["process"], frame["variable"], frame["actual"], strict=True)]
            note = report.summary()
        with self._lock:
            evidence.launches += 1
            if not evidence.config_lines:
                evidence.config_lines = lines
            if not evidence.env_rows:
                evidence.env_rows, evidence.env_note = rows, note
            evidence.version = evidence.version or release.version
            evidence.commit = server.spec.commit

    def record(self, step: StepRecorder, result: BenchResult, run_id: int | None) -> None:
        self._watch.record(step, result, run_id)

    def record_runs(self, step: StepRecorder, labels: Mapping[Side, str]) -> None:
        """Store both sides' runs in the one diagnosis step: each with its label, log metric lines, observations."""
        for side, evidence in self.sides.items():
            for repeat, (result, rows) in enumerate(evidence.runs):
                run_id = step.record_bench(result, run_label=labels[side], repeat=repeat)
                if rows:
                    step.record_metrics(rows, run_id=run_id)
                self._watch.record(step, result, run_id)
