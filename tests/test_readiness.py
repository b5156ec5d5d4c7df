"""ReadinessTracker: synthetic event sequences (pure, no clock, no I/O)."""

from __future__ import annotations

import pytest

from toolkit.logs import LogClassifier
from toolkit.server.readiness import ReadinessState, ReadinessTracker

SGLANG_START = [
    "[2026-02-26 20:25:00] server_args=ServerArgs(model_path='kimi', tp_size=8)",
    "[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: cannot import name 'GlmAsrConfig'",
    "[2026-02-26 20:26:10 TP0] Load weight begin. avail mem=78.00 GB",
    "[2026-02-26 20:27:10 TP0] Load weight end. type=DeepseekV3ForCausalLM, avail mem=20.00 GB",
    "[2026-02-26 20:27:11 TP0] KV Cache is allocated. #tokens: 100000, K size: 5 GB, V size: 5 GB",
    "[2026-02-26 20:27:12 TP0] Capture cuda graph begin. This can take up to several minutes.",
    "[2026-02-26 20:28:12 TP0] Capture cuda graph end. Time elapsed: 60.00 s.",
    "[2026-02-26 20:28:13] INFO:     Application startup complete.",
    "[2026-02-26 20:28:13] INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
    '[2026-02-26 20:28:14] INFO:     127.0.0.1:4000 - "GET /model_info HTTP/1.1" 200 OK',
]
FIRED_UP = "[2026-02-26 20:28:20] The server is fired up and ready to roll!"


def feed(
    tracker: ReadinessTracker, classifier: LogClassifier, lines: list[str], start: float, step: float = 1.0
) -> float:
    at = start
    for line in lines:
        for event in classifier.feed(line):
            tracker.observe(event, at)
        at += step
    return at


def test_uvicorn_up_before_sglang_warmup_ends_is_not_ready() -> None:
    t, c = ReadinessTracker(started_at=0.0), LogClassifier()
    at = feed(t, c, SGLANG_START, 1.0)
    t.probe(True, "GET /v1/models 200", proves_generation=False, at=at)
    assert t.state is ReadinessState.STARTING
    feed(t, c, [FIRED_UP], at + 1)
    assert t.state is ReadinessState.READY  # ready line + the passing probe seen before
    report = t.report()
    assert report.ready and report.time_to_ready_s == pytest.approx(at + 1)
    assert report.phase_names == (
        "server_args",
        "weights_loading",
        "weights_loaded",
        "kv_cache_allocated",
        "cuda_graph_capture_begin",
        "cuda_graph_captured",
        "http_up",
        "warmup",
        "ready",
    )
    assert [(e.line_no, e.rule, e.rank) for e in report.benign] == [(2, "sglang_ignore_import_error", "TP5")]
    assert "ready line 11" in (report.ready_reason or "")


def test_models_probe_alone_is_not_ready() -> None:
    t = ReadinessTracker(started_at=0.0)
    for i in range(5):
        t.probe(True, "GET /v1/models 200", proves_generation=False, at=float(i))
    assert t.state is ReadinessState.STARTING


def test_a_generating_probe_is_proof_on_its_own() -> None:
    t = ReadinessTracker(started_at=10.0)
    t.probe(False, "connection refused", at=11.0)
    assert t.probe(True, "GET /health_generate 200", proves_generation=True, at=15.0) is ReadinessState.READY
    assert t.report().time_to_ready_s == 5.0


def test_ready_line_without_any_probe_is_not_ready() -> None:
    t, c = ReadinessTracker(started_at=0.0), LogClassifier(engine="vllm")
    feed(t, c, ["INFO:     Application startup complete."], 1.0)
    assert t.state is ReadinessState.STARTING
    t.probe(True, "GET /health 200", at=3.0)
    assert t.state is ReadinessState.READY


def test_404_after_ready_stays_ready() -> None:
    t, c = ReadinessTracker(started_at=0.0), LogClassifier(engine="vllm")
    at = feed(t, c, ["INFO:     Application startup complete."], 1.0)
    t.probe(True, "POST /v1/completions 200", proves_generation=True, at=at)
    feed(
        t,
        c,
        [
            'INFO:     127.0.0.1:56148 - "POST /v1/x HTTP/1.1" 404 Not Found',
            "ERROR 05-12 02:47:14 [serving_chat.py:136] Error with model object='error' type='NotFoundError' code=404",
        ],
        at,
    )
    assert t.state is ReadinessState.READY and t.failure is None


def test_address_in_use_after_ready_fails() -> None:
    t, c = ReadinessTracker(started_at=0.0), LogClassifier(engine="vllm")
    at = feed(t, c, ["INFO:     Application startup complete."], 1.0)
    t.probe(True, "GET /health 200", at=at)
    assert t.state is ReadinessState.READY
    feed(
        t,
        c,
        [
            "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use"
        ],
        at + 1,
    )
    assert t.state is ReadinessState.FAILED
    assert t.failure is not None and t.failure.kind == "fatal"
    assert "after it was ready" in t.failure.message and "port" in (t.failure.hint or "")


def test_silence_is_a_hang_and_output_clears_it() -> None:
    t, c = ReadinessTracker(started_at=0.0, hang_after_s=60.0), LogClassifier()
    at = feed(t, c, SGLANG_START[:6], 1.0)
    assert t.tick(at + 30) is ReadinessState.STARTING
    assert t.tick(at + 61) is ReadinessState.HUNG
    assert t.failure is not None and t.failure.kind == "hung" and "py-spy" in (t.failure.hint or "")
    feed(t, c, SGLANG_START[6:7], at + 62)
    assert t.state is ReadinessState.STARTING


def test_process_exit_before_ready_is_a_death_with_the_last_fatal_line() -> None:
    t, c = ReadinessTracker(started_at=0.0), LogClassifier()
    feed(t, c, SGLANG_START[:5], 1.0)
    assert t.process_exited(-9, at=20.0) is ReadinessState.FAILED
    failure = t.failure
    assert failure is not None and (failure.kind, failure.exit_code) == ("died", -9)
    assert "OOM killer" in (failure.hint or "") and failure.decisive is None
    assert failure.context[-1].startswith("[2026-02-26 20:27:11 TP0] KV Cache")


def test_notice_is_refined_by_the_rank_exception_then_settles() -> None:
    lines = [
        "[2025-01-20 19:10:05] server_args=ServerArgs(model_path='x', tp_size=2)",
        "[2025-01-20 19:10:07] Received sigquit from a child proces. It usually means the child failed.",
        "[2025-01-20 19:10:07 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sglang/srt/model_executor/model_runner.py", line 1, in init',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]
    t, c = ReadinessTracker(started_at=0.0, settle_s=2.0), LogClassifier()
    feed(t, c, lines[:2], 1.0, step=0.1)
    assert t.state is ReadinessState.FAILED and not t.settled
    assert t.failure is not None and t.failure.decisive is not None and t.failure.decisive.notice
    feed(t, c, lines[2:], 1.2, step=0.1)
    failure = t.failure
    assert failure is not None and failure.decisive is not None
    assert (failure.decisive.line_no, failure.rank) == (5, "TP0") and t.settled
    assert "--mem-fraction-static" in (failure.hint or "")
    assert (
        failure.evidence()[-1]
        == "line 5 [TP0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    t.process_exited(1, at=3.0)
    assert t.failure is not None and t.failure.exit_code == 1 and t.failure.kind == "fatal"


def test_a_notice_alone_settles_after_settle_s() -> None:
    t, c = ReadinessTracker(started_at=0.0, settle_s=2.0), LogClassifier(engine="sglang")
    feed(
        t,
        c,
        ["[2025-01-20 19:10:07] Received sigquit from a child proces. It usually means the child failed."],
        1.0,
    )
    t.tick(2.0)
    assert not t.settled
    t.tick(3.5)
    assert t.settled


def test_timeout_names_the_phases_reached() -> None:
    t, c = ReadinessTracker(started_at=0.0, timeout_s=100.0, hang_after_s=1000.0), LogClassifier()
    feed(t, c, SGLANG_START[:4], 1.0)
    assert t.tick(99.0) is ReadinessState.STARTING
    assert t.tick(100.0) is ReadinessState.FAILED
    assert t.failure is not None and t.failure.kind == "timeout"
    assert "weights_loaded" in t.failure.message


def test_a_timeout_after_the_log_said_ready_quotes_the_failing_probe() -> None:
    t, c = ReadinessTracker(started_at=0.0, timeout_s=100.0, hang_after_s=1000.0), LogClassifier()
    at = feed(t, c, [*SGLANG_START, FIRED_UP], 1.0)
    t.probe(False, "GET http://localhost:30000/v1/models: connection refused", at=at)
    assert t.tick(100.0) is ReadinessState.FAILED
    assert t.failure is not None and t.failure.kind == "timeout"
    assert "log says HTTP is up, but the last probe failed: GET http://localhost:30000/v1/models" in t.failure.message
    assert "--host" in (t.failure.hint or "")


def test_a_timeout_whose_last_probe_passed_does_not_blame_the_url() -> None:
    t, c = ReadinessTracker(started_at=0.0, timeout_s=100.0, hang_after_s=1000.0), LogClassifier()
    at = feed(t, c, SGLANG_START, 1.0)  # HTTP up, no ready line: warm-up never ended
    t.probe(False, "connection refused", at=at)
    t.probe(True, "GET /v1/models 200", at=at + 1)
    assert t.tick(100.0) is ReadinessState.FAILED
    assert t.failure is not None and "probe failed" not in t.failure.message


def test_report_counts_warnings_and_keeps_last_lines_bounded() -> None:
    t, c = ReadinessTracker(started_at=0.0, keep_last_lines=3), LogClassifier(engine="vllm")
    feed(t, c, ["WARNING 08-01 23:19:56 [vllm.py:1648] max_num_scheduled_tokens is set to 1600"] * 5, 1.0)
    report = t.report()
    assert report.warnings == 5 and len(report.last_lines) == 3 and not report.ready


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="hang_after_s"):
        ReadinessTracker(started_at=0.0, hang_after_s=0)


def test_report_and_failure_serialize_to_json() -> None:
    import json

    t, c = ReadinessTracker(started_at=0.0), LogClassifier()
    feed(
        t,
        c,
        SGLANG_START[:2] + ["[2026-02-26 20:26:07 TP0] Watchdog timeout (self.watchdog_timeout=300)"],
        1.0,
    )
    data = json.loads(json.dumps(t.report().to_dict()))
    assert data["ready"] is False and data["state"] == "failed"
    assert (
        data["failure"]["decisive"]["rule"] == "sglang_watchdog_timeout" and data["failure"]["rank"] == "TP0"
    )
    assert data["benign"] == [
        {
            "line_no": 2,
            "rule": "sglang_ignore_import_error",
            "rank": "TP5",
            "text": SGLANG_START[1].split("] ", 1)[1],
        }
    ]


def test_a_log_joined_mid_run_is_ready_on_serving_lines_and_a_probe() -> None:
    """Attaching to a server that is already serving: no ready line will come, its serving lines prove it."""
    lines = [
        "[2026-02-26 20:40:01 TP0] Decode batch. #running-req: 1, #token: 512, token usage: 0.01, "
        "cuda graph: True, gen throughput (token/s): 81.95, #queue-req: 0",
        '[2026-02-26 20:40:02] INFO:     127.0.0.1:50514 - "POST /v1/completions HTTP/1.1" 200 OK',
    ]
    tracker, classifier = ReadinessTracker(started_at=0.0), LogClassifier(engine="sglang")
    for event in [e for line in lines for e in classifier.feed(line)] + classifier.finish():
        tracker.observe(event, at=1.0)
    assert tracker.state is ReadinessState.STARTING  # the log alone is not proof
    tracker.probe(True, "GET /v1/models 200", proves_generation=False, at=2.0)
    report = tracker.report()
    assert report.ready and report.ready_evidence == "serving lines"
    assert report.ready_reason is not None and "joined mid-run" in report.ready_reason
