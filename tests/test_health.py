"""What readiness probes' answers mean, per release, and how often to ask: pure, table-driven.

Issue 13's H200 run: ``transformers serve``'s batching worker died after start; ``/health``
answered 503 ``{"status": "unhealthy", "reason": "cb_worker_dead"}``; the toolkit probed a
completion 2,769 times in 300 s and ended with a timeout. Each case names the release line whose
handler decides it.
"""

from __future__ import annotations

import doctest

import pytest

from toolkit.engines import profile_for
from toolkit.server import health, hints
from toolkit.server.health import ProbeSchedule, RepeatedErrors, judge_answer
from toolkit.server.readiness import ReadinessState, ReadinessTracker
from toolkit.server.release import release_from_output
from toolkit.server.state import ServerState


@pytest.mark.parametrize("module", [health, hints])
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize(
    "engine, version, status, body, verdict",
    [
        # SGLang 0.5.23: 503 without a body is "starting, shutting down or stuck" alike: a wait, the log decides
        ("sglang", "0.5.23", 503, b"", "wait"),
        ("sglang", "0.5.23", 200, b"", "pass"),
        # vLLM 0.33 /health: 503 is EngineDeadError (serve/instrumentator/health.py:32-33); 0.10 said 500
        ("vllm", "0.33.0", 503, b"", "dead"),
        ("vllm", "0.33.0", 500, b"", "wait"),  # near miss: 0.33 answers 500 for nothing the profile knows
        ("vllm", "0.8.5", 500, b"", "dead"),
        ("vllm", "0.33.0", 200, b"", "pass"),
        # transformers serve 5.24: the unhealthy JSON names the reason (serving/server.py:152-153)
        ("transformers", "5.24.0", 503, b'{"status": "unhealthy", "reason": "cb_worker_dead"}', "dead"),
        ("transformers", "5.24.0", 200, b'{"status": "ok"}', "pass"),
    ],
)
def test_answers_mean_what_the_release_means(engine: str, version: str, status: int, body: bytes,
                                              verdict: str) -> None:
    check = profile_for(engine, version).readiness_check
    outcome = judge_answer(check, f"GET {check.path}", status, body, engine)
    assert outcome.verdict == verdict
    if verdict == "dead":
        assert outcome.evidence[0].startswith(f"GET {check.path} {status}")
        assert outcome.hint is not None and "dead" in outcome.hint
    if body:
        assert "reason: cb_worker_dead" in (outcome.hint or "") or verdict != "dead"


def test_sglang_proves_generation_with_its_own_endpoint_and_vllm_does_not() -> None:
    assert profile_for("sglang", "0.5.23").readiness_check.path == "/health_generate"
    assert profile_for("sglang", "0.5.23").readiness_check.min_latency_s == 1.0  # asyncio.sleep(1) at :780
    assert not profile_for("vllm", "0.33.0").readiness_check.proves_generation  # 200 = loaded, not generated
    assert profile_for("transformers", "5.24.0").metrics_path is None  # no /metrics: never probed


def test_the_same_error_again_is_a_failure_an_empty_503_is_not() -> None:
    errors = RepeatedErrors(times=5, span_s=3.0)
    body = '{"error": "CB worker is dead and cannot accept request 1f2e: CUDA error"}'
    said = [errors.see("POST /v1/completions", 503, body.replace("1f2e", f"{i:04x}"), at=float(i)) for i in range(5)]
    assert said[:4] == [None] * 4 and said[4] is not None and "503 5 times in 4 s" in said[4]
    empty = RepeatedErrors(times=2, span_s=0.0)
    assert [empty.see("GET /health_generate", 503, "", at=float(t)) for t in range(5)] == [None] * 5
    fast = RepeatedErrors(times=3, span_s=3.0)  # near miss: three answers within one second are not enough
    assert [fast.see("GET /v1/models", 401, '{"error": "Unauthorized"}', at=t / 2) for t in range(3)][-1] is None
    changing = RepeatedErrors(times=2, span_s=0.0)
    assert changing.see("x", 500, '{"error": "a"}', at=0) is None and changing.see("x", 500, '{"error": "b"}', at=1) \
        is None


def test_probes_back_off_and_stay_few() -> None:
    schedule = ProbeSchedule()
    intervals = [schedule.interval(elapsed_s=t, failures=k, fast=True) for k, t in enumerate(range(0, 20, 2))]
    assert intervals[0] == 0.25 and intervals == sorted(intervals) and max(intervals) <= 5.0
    # A server that never becomes ready: how many probes in 300 s (issue 13's transformers run: 2,769)?
    elapsed, probes, failures = 0.0, 0, 0
    while elapsed < 300:
        elapsed += schedule.interval(elapsed_s=elapsed, failures=failures, fast=True)
        probes, failures = probes + 1, failures + 1
    assert probes < 120
    assert schedule.interval(elapsed_s=0, failures=0, fast=False) == 1.0  # while loading: once a second


def test_a_probe_that_says_dead_fails_the_start_and_lands_in_the_state() -> None:
    state = ServerState(started_at=0.0)
    status = state.probe_failed(message="the server answered that it is dead: GET /health 503",
                                evidence=('GET /health 503: {"status": "unhealthy", "reason": "cb_worker_dead"}',),
                                hint="read it", at=3.0)
    assert status.lifecycle == "failed" and status.error is not None
    assert "cb_worker_dead" in status.error.evidence[0] and status.error.kind == "ServerDied"
    assert state.settled
    tracker = ReadinessTracker(started_at=0.0)
    tracker.probe(True, "GET /health_generate 200", True, at=1.0)
    assert tracker.probe_failed("dead", at=2.0) is ReadinessState.READY  # a verdict stands


def test_hints_follow_the_detected_release() -> None:
    from toolkit.logs.packs import Hints

    state = ServerState(started_at=0.0)
    state.use_release("sglang", "0.5.23")
    tracker = state.tracker
    tracker.probe_failed("x", hint=Hints.CUDA_GRAPH, at=1.0)
    shown = state.status().error
    assert shown is not None and "--cuda-graph-max-bs-decode" in (shown.hint or "")
    assert "--cuda-graph-max-bs " not in (shown.hint or "") + " "


@pytest.mark.parametrize(
    "engine, output, version, line",
    [
        ("sglang", "0.5.23\n", "0.5.23", "sglang-0.5.20+"),
        ("sglang", "toolkit.sim imitating sglang 0.4.10\n", "0.4.10", "sglang-0.4.x"),
        ("vllm", "INFO 12-01 import noise\n0.33.0\n", "0.33.0", "vllm-0.14+"),
        ("transformers", "5.24.0\n", "5.24.0", "transformers-5.24+"),
    ],
)
def test_release_from_the_hosts_answer(engine: str, output: str, version: str, line: str) -> None:
    release = release_from_output(engine, output, "the command")
    assert (release.version, release.profile and release.profile.name) == (version, line)


def test_an_unreadable_answer_assumes_the_newest_line_and_says_so() -> None:
    release = release_from_output("sglang", "Traceback (most recent call last):\nImportError: no sglang", "cmd")
    assert release.version is None and release.profile is not None and release.profile.name == "sglang-0.5.20+"
    assert "assuming the newest line" in release.describe()
    assert release_from_output("command", "1.0", "cmd").profile is None
