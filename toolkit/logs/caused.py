"""Lines the toolkit caused: its own probe and scrape requests, and the shutdown it asked for.

Two echoes of the toolkit mislead a reader: the access lines of its probes and scrapes (14 amber
``GET /health_generate 503`` lines while SGLang warms up), and the lines the ranks write while dying of the
SIGTERM it sent (``Child process unexpectedly failed with an exit code 15``: fatal when the server dies on its
own). Views hide or dim them and the post-mortem leaves them out of its decisive lines.

A line is known to be ours by its request line alone: uvicorn's access format is ``%(levelprefix)s
%(client_addr)s - "%(request_line)s" %(status_code)s`` (uvicorn config.py ``LOGGING_CONFIG``; SGLang 0.5.x
in ../shared/real-logs), with no User-Agent. The one-token completion that proves generation has the request
line of any user's request: :func:`is_probe_completion` names the shape, a caller that knows readiness is not
yet proven claims it.

>>> is_toolkit_request('[2026-02-09 14:38:44] INFO:     127.0.0.1:40330 - "GET /health_generate HTTP/1.1" 503 Service Unavailable')
True
>>> is_toolkit_request('127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK')
False
"""

from __future__ import annotations

import dataclasses
import re

from toolkit.logs.event import LogEvent
from toolkit.logs.rules import Verdict

__all__ = ["TOOLKIT_REQUESTS", "REQUEST", "STOP", "is_toolkit_request", "request_mark", "is_probe_completion", "after_stop"]

# What LogEvent.caused says: the classifier marks a toolkit request's access line, the follower a line after a stop.
REQUEST = "request"
STOP = "stop"

# (method, path) of every request the toolkit sends to a server outside a benchmark, with who sends it:
TOOLKIT_REQUESTS: frozenset[tuple[str, str]] = frozenset({
    ("GET", "/health"),            # readiness (vLLM 0.33 api_server.py, transformers serve): server/http.probe_server
    ("GET", "/health_generate"),   # readiness (SGLang 0.5.9 http_server.py:440): server/http.probe_server
    ("GET", "/v1/models"),         # a plain command's readiness, the served model: http._first_model, served_model
    ("GET", "/server_info"),       # engine version (SGLang 0.5.6+): http.engine_versions
    ("GET", "/get_server_info"),   # engine version (SGLang before 0.5.6, deprecated after): http.engine_versions
    ("GET", "/version"),           # engine version (vLLM): http.engine_versions
    ("GET", "/metrics"),           # Prometheus scrape while a run is measured: observe/scrape.MetricsScraper
    ("GET", "/sim/gpu"),           # the simulator's stand-in for nvidia-smi, sampled by observe/telemetry.GpuTelemetry
    ("POST", "/flush_cache"),      # SGLang's prefix cache flushed before a measured run: observe/cache.py
    ("GET", "/flush_cache"),       # (SGLang accepts both methods, 0.5.9 http_server.py)
    ("POST", "/reset_prefix_cache"),  # vLLM's (with VLLM_SERVER_DEV_MODE=1): observe/cache.py
    ("POST", "/tokenize"),         # prompt lengths counted in the server's tokens: benchmark/tokens.py (vLLM
                                   # 0.x api_server.py `@router.post("/tokenize")`, SGLang 0.5.x http_server.py)
    ("POST", "/start_profile"),    # a profile's window: moves/profile.py (SGLang, vLLM)
    ("POST", "/stop_profile"),
})

# `"GET /health_generate HTTP/1.1" 503`, query string allowed (`/metrics?x=1`), inside any header.
_REQUEST_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>/[^ "?]*)(?:\?[^ "]*)? HTTP/[\d.]+" \d{3}')
_COMPLETION = re.compile(r'"POST /v1/(?:chat/)?completions(?:\?[^ "]*)? HTTP/[\d.]+" \d{3}')

# What a line read after the toolkit asked for a stop keeps: a metric row is still a measurement,
# a benign line keeps the rule that explains it, the ready line cannot come after a stop.
_KEPT_AFTER_STOP = frozenset({Verdict.METRIC, Verdict.BENIGN, Verdict.READY, Verdict.SHUTDOWN})


def is_toolkit_request(text: str) -> bool:
    """Whether ``text`` (a raw log line or its message) is the access line of a toolkit probe or scrape."""
    match = _REQUEST_LINE.search(text) if "HTTP/" in text else None
    return match is not None and (match["method"], match["path"]) in TOOLKIT_REQUESTS


def request_mark(text: str) -> str | None:
    """``LogEvent.caused`` of a line by its text alone: :data:`REQUEST` for a toolkit request's access line."""
    return REQUEST if is_toolkit_request(text) else None


def is_probe_completion(text: str) -> bool:
    """Whether ``text`` is a completion's access line: the toolkit's one-token probe before readiness is
    proven (the caller knows when), a benchmark's or a user's request after."""
    return "HTTP/" in text and _COMPLETION.search(text) is not None


def after_stop(event: LogEvent) -> LogEvent:
    """``event`` as read after the toolkit asked the server to stop: a ``shutdown`` line (never fatal).

    Fatal, warning, progress and info lines become :attr:`Verdict.SHUTDOWN` and keep the rule that
    matched them (the tooltip still says ``sglang_child_failed``); metric and benign lines are kept.

    >>> from toolkit.logs.classify import classify_lines
    >>> died = classify_lines(["[2026-02-26 20:30:00] Child process unexpectedly failed with an exit code 15. pid=1"],
    ...                       engine="sglang")[0]
    >>> (died.verdict.value, after_stop(died).verdict.value, after_stop(died).rule, after_stop(died).caused)
    ('fatal', 'shutdown', 'sglang_child_failed', 'stop')
    """
    if event.verdict in _KEPT_AFTER_STOP:
        return event
    return dataclasses.replace(event, verdict=Verdict.SHUTDOWN, notice=False, caused=STOP)
