"""Every HTTP call the toolkit makes to a server outside a benchmark run, in one place.

Synchronous and short (urllib, a timeout on each call), because they run from `wait_ready`'s
prober thread and from the drivers between runs. The benchmark's own streaming traffic is
`toolkit.benchmark.client` (aiohttp). None of these raises for an HTTP or network failure:
a refused connection is an answer too (the server is not up yet).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

__all__ = ["HttpAnswer", "request", "ProbeOutcome", "probe_generation", "engine_versions", "start_profile",
           "stop_profile", "flush_cache", "scrape_metrics", "served_model", "complete_greedy"]


@dataclass(frozen=True)
class HttpAnswer:
    """An HTTP status (0: no answer) and the start of the body."""

    status: int
    body: bytes
    error: str | None = None

    def json(self) -> object:
        return json.loads(self.body)


def request(url: str, *, body: dict[str, object] | None = None, timeout_s: float = 5.0,
            max_bytes: int = 1 << 20, method: str | None = None, api_key: str | None = None) -> HttpAnswer:
    """GET (or POST ``body`` as JSON) ``url``; never raises for HTTP or network errors.

    ``method="POST"`` posts without a body (vLLM's ``/stop_profile``); ``api_key`` goes in
    ``Authorization: Bearer KEY``, as both engines expect it.
    """
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {api_key}"} if api_key else {})
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as response:  # noqa: S310 (http only)
            return HttpAnswer(response.status, response.read(max_bytes))
    except urllib.error.HTTPError as exc:
        return HttpAnswer(exc.code, exc.read(min(max_bytes, 65536)) if exc.fp is not None else b"")
    except (OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        return HttpAnswer(0, b"", f"{type(exc).__name__}: {reason}")


@dataclass(frozen=True)
class ProbeOutcome:
    """One readiness probe: did it pass, what it said, and did it prove that the server generates."""

    ok: bool
    detail: str
    proves_generation: bool


def probe_generation(url: str, engine: str, *, timeout_s: float = 5.0, model: str | None = None) -> ProbeOutcome:
    """Ask the server to prove it generates; never raises (a refused connection is a failed probe).

    SGLang: `GET /health_generate` runs one decode step through the scheduler. Others:
    `GET /v1/models` (proves only that HTTP is up), then a one-token completion.
    """
    base = url.rstrip("/")
    if engine == "sglang":
        answer = request(f"{base}/health_generate", timeout_s=timeout_s)
        return ProbeOutcome(answer.status == 200, _detail("GET /health_generate", answer), answer.status == 200)
    if model is None:
        answer = request(f"{base}/v1/models", timeout_s=timeout_s)
        if answer.status != 200:
            return ProbeOutcome(False, _detail("GET /v1/models", answer), False)
        try:
            listed = answer.json()
            models = listed.get("data") if isinstance(listed, dict) else None
            model = str(models[0]["id"]) if models else None
        except (ValueError, KeyError, TypeError, IndexError):
            return ProbeOutcome(False, "GET /v1/models 200 with a body that is not a model list", False)
        if model is None:
            return ProbeOutcome(True, "GET /v1/models 200 (no model listed)", False)
    body: dict[str, object] = {"model": model, "prompt": "ping", "max_tokens": 1, "temperature": 0}
    answer = request(f"{base}/v1/completions", body=body, timeout_s=timeout_s)
    if answer.status == 404:  # a chat-only server
        chat = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
        answer = request(f"{base}/v1/chat/completions", body=chat, timeout_s=timeout_s)
        return ProbeOutcome(answer.status == 200, _detail("POST /v1/chat/completions (1 token)", answer),
                            answer.status == 200)
    return ProbeOutcome(answer.status == 200, _detail("POST /v1/completions (1 token)", answer), answer.status == 200)


def _detail(what: str, answer: HttpAnswer) -> str:
    return f"{what} {answer.status}" if answer.status else f"{what}: {answer.error}"


def engine_versions(url: str, engine: str, *, timeout_s: float = 2.0) -> dict[str, str]:
    """The engine version the server reports (SGLang ``/get_server_info``, vLLM ``/version``); {} if unknown."""
    path = {"sglang": "/get_server_info", "vllm": "/version"}.get(engine)
    if path is None:
        return {}
    answer = request(url.rstrip("/") + path, timeout_s=timeout_s)
    if answer.status != 200:
        return {}
    try:
        data = answer.json()
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    versions = {engine: str(data["version"])} if data.get("version") else {}
    if data.get("simulator"):
        versions["simulator"] = str(data["simulator"])
    return versions


# ---- the performance engineer's moves: profiles, the prefix cache, Prometheus metrics ------------------------


def start_profile(url: str, path: str = "/start_profile", *, body: dict[str, object] | None = None,
                  timeout_s: float = 30.0, api_key: str | None = None) -> HttpAnswer:
    """``POST {path}`` with the engine's profiler request (SGLang ``ProfileReqInput``; vLLM 0.33 start body).

    SGLang answers ``Start profiling.`` (200) once every rank's profiler runs (sglang 0.5.9
    entrypoints/http_server.py:832-854); vLLM registers the route only when profiling was
    configured at launch, else 404.
    """
    return request(url.rstrip("/") + path, body=body, method="POST", timeout_s=timeout_s, api_key=api_key)


def stop_profile(url: str, path: str = "/stop_profile", *, timeout_s: float = 300.0,
                 api_key: str | None = None) -> HttpAnswer:
    """``POST {path}``: the engine stops and exports its traces; this may take minutes on a big trace."""
    return request(url.rstrip("/") + path, method="POST", timeout_s=timeout_s, api_key=api_key)


def flush_cache(url: str, path: str = "/flush_cache", *, timeout_s: float = 30.0,
                api_key: str | None = None) -> HttpAnswer:
    """``POST {path}`` (SGLang ``/flush_cache``, vLLM ``/reset_prefix_cache``); the caller reads the answer."""
    return request(url.rstrip("/") + path, method="POST", timeout_s=timeout_s, api_key=api_key)


def scrape_metrics(url: str, path: str = "/metrics", *, timeout_s: float = 2.0,
                   max_bytes: int = 8 << 20) -> HttpAnswer:
    """``GET {path}``: the Prometheus text page (open without an API key on both engines)."""
    return request(url.rstrip("/") + path, timeout_s=timeout_s, max_bytes=max_bytes)


def served_model(url: str, *, timeout_s: float = 5.0, api_key: str | None = None) -> str | None:
    """The first model ``GET /v1/models`` lists, or None."""
    answer = request(url.rstrip("/") + "/v1/models", timeout_s=timeout_s, api_key=api_key)
    try:
        listed = answer.json() if answer.status == 200 else None
        models = listed.get("data") if isinstance(listed, dict) else None
        return str(models[0]["id"]) if models else None
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def complete_greedy(url: str, prompt: str, *, model: str | None, max_tokens: int, chat: bool = False,
                    logprobs: bool = True, timeout_s: float = 120.0, api_key: str | None = None) -> HttpAnswer:
    """One non-streamed greedy completion (``temperature: 0``), with per-token texts when ``logprobs``.

    Completions ask ``logprobs: 1`` (the answer's ``choices[0].logprobs.tokens``), chat asks
    ``logprobs: true`` (``choices[0].logprobs.content[i].token``). A server that rejects the
    field (``transformers serve`` answers 422 to unknown fields) is asked again by the caller
    without it.
    """
    body: dict[str, object] = {"max_tokens": max_tokens, "temperature": 0, "stream": False}
    if model is not None:
        body["model"] = model
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if logprobs:
        body["logprobs"] = True if chat else 1
    path = "/v1/chat/completions" if chat else "/v1/completions"
    return request(url.rstrip("/") + path, body=body, timeout_s=timeout_s, api_key=api_key)
