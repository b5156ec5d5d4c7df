"""Lines the toolkit caused: its own probe/scrape access lines, and the shutdown it asked for (toolkit.logs.caused)."""

from __future__ import annotations

import pytest

from toolkit.engines import PROFILES
from toolkit.logs import (
    TOOLKIT_REQUESTS,
    Verdict,
    after_stop,
    classify_lines,
    is_probe_completion,
    is_toolkit_request,
)

OURS = [
    # SGLang 0.5.x: uvicorn's access line inside SGLang's logger
    '[2026-02-09 14:38:44] INFO:     127.0.0.1:40330 - "GET /health_generate HTTP/1.1" 503 Service Unavailable',
    '[2026-02-09 14:38:44] INFO:     127.0.0.1:40330 - "GET /health_generate HTTP/1.1" 200 OK',
    '[2026-02-09 14:38:45] INFO:     127.0.0.1:40332 - "GET /metrics HTTP/1.1" 404 Not Found',
    '[2026-02-09 14:38:45] INFO:     127.0.0.1:40334 - "GET /server_info HTTP/1.1" 200 OK',
    '[2026-02-09 14:38:45] INFO:     127.0.0.1:40334 - "GET /get_server_info HTTP/1.1" 200 OK',
    # vLLM 0.33: uvicorn under the API server's process tag
    '(APIServer pid=1) INFO:     127.0.0.1:52372 - "GET /health HTTP/1.1" 200 OK',
    '(APIServer pid=1) INFO:     127.0.0.1:52372 - "GET /version HTTP/1.1" 200 OK',
    '(APIServer pid=1) INFO:     127.0.0.1:52372 - "GET /metrics?name=x HTTP/1.1" 200 OK',
    # the benchmark's prompt lengths, counted in the server's own tokens (benchmark/tokens.py)
    '(APIServer pid=1) INFO:     127.0.0.1:52380 - "POST /tokenize HTTP/1.1" 200 OK',
    # transformers serve: bare uvicorn
    'INFO:     127.0.0.1:52372 - "GET /v1/models HTTP/1.1" 200 OK',
    # the simulator's GPU samples, taken by the toolkit's telemetry
    '[2026-12-01 16:23:44] INFO:     127.0.0.1:32802 - "GET /sim/gpu HTTP/1.1" 200 OK',
]
NOT_OURS = [
    # the engine's own warm-up request (SGLang sends it to itself)
    '[2026-08-01 23:43:44] INFO:     127.0.0.1:34498 - "GET /model_info HTTP/1.1" 200 OK',
    '[2026-08-01 23:43:47] INFO:     127.0.0.1:34504 - "POST /generate HTTP/1.1" 200 OK',
    # a benchmark's request, a user's request: the request line cannot tell them from the probe
    '[2026-08-02 00:02:18] INFO:     127.0.0.1:36498 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    # near misses: another method on a probe path, a longer path, a path only mentioned in text
    'INFO:     127.0.0.1:1 - "POST /health HTTP/1.1" 405 Method Not Allowed',
    'INFO:     127.0.0.1:1 - "GET /health/live HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:1 - "GET /metrics_extra HTTP/1.1" 404 Not Found',
    'INFO:     127.0.0.1:1 - "POST /detokenize HTTP/1.1" 200 OK',
    "WARNING the server answered GET /health with 503",
    "[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: x",
]


@pytest.mark.parametrize("line", OURS)
def test_toolkit_requests_are_ours(line: str) -> None:
    assert is_toolkit_request(line)
    assert is_toolkit_request(classify_lines([line])[0].text)  # the message alone says it too


@pytest.mark.parametrize("line", NOT_OURS)
def test_other_lines_are_not_ours(line: str) -> None:
    assert not is_toolkit_request(line)


def test_every_path_the_profiles_probe_is_known() -> None:
    """The toolkit asks what the engine profiles name; each of those GETs must be recognised as ours."""
    asked = set()
    for profile in (p for profiles in PROFILES.values() for p in profiles):
        asked.add((profile.readiness_check.method, profile.readiness_check.path))
        asked.update(("GET", path) for path in profile.info_paths)
        if profile.version_path:
            asked.add(("GET", profile.version_path))
        if profile.metrics_path:
            asked.add(("GET", profile.metrics_path))
        asked.add(("GET", profile.models_path))
    assert asked <= TOOLKIT_REQUESTS, asked - TOOLKIT_REQUESTS


def test_probe_completion_shape() -> None:
    assert is_probe_completion('INFO:     127.0.0.1:1 - "POST /v1/completions HTTP/1.1" 200 OK')
    assert is_probe_completion('INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 404 Not Found')
    assert not is_probe_completion('INFO:     127.0.0.1:1 - "GET /v1/completions HTTP/1.1" 405 Method Not Allowed')
    assert not is_probe_completion('INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK')


SHUTDOWN_LOG = [
    "[2026-02-26 20:30:00] Child process unexpectedly failed with an exit code 15. pid=4242",
    "[2026-02-26 20:30:00] Received sigquit from a child process. It usually means the child failed.",
    "[2026-02-26 20:30:00] INFO:     Shutting down",
    "[2026-02-26 20:30:00] INFO:     Waiting for application shutdown.",
    "[2026-02-26 20:30:00] INFO:     Finished server process [24440]",
    "[2026-02-26 20:30:00 TP5] Ignore import error when loading sglang.srt.models.glmasr: x",
]


def test_lines_after_a_stop_are_shutdown_never_fatal() -> None:
    events = classify_lines(SHUTDOWN_LOG, engine="sglang")
    assert [e.verdict for e in events[:2]] == [Verdict.FATAL, Verdict.FATAL]  # on its own, a death
    after = [after_stop(e) for e in events]
    assert [e.verdict for e in after] == [Verdict.SHUTDOWN] * 5 + [Verdict.BENIGN]
    assert after[0].rule == "sglang_child_failed" and not after[1].notice
    assert after[-1] is events[-1]  # a benign line keeps its verdict and its rule
