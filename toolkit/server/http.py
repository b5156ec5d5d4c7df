"""HTTP calls to a server outside a benchmark run: `request`, which each one goes through, and a server's own.

Synchronous and short (urllib, a timeout each), from `wait_ready`'s prober and the drivers between
runs; none raises for an HTTP or network failure. Only endpoints the release profile names are
asked, with the spec's API key: vLLM guards ``/v1`` with it, and a probe without it sees 401 forever.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, replace

from toolkit.engines import EngineProfile, resolve_profile
from toolkit.server.health import ProbeOutcome, judge_answer, quote_body
from toolkit.server.spec import MISSING, ServerSpec

__all__ = ["HttpAnswer", "request", "auth_headers", "ProbeOutcome", "probe_server",
           "engine_versions", "metrics_route", "served_model"]


@dataclass(frozen=True)
class HttpAnswer:
    """An HTTP status (0: no answer) and the start of the body."""

    status: int
    body: bytes
    error: str | None = None

    def json(self) -> object:
        return json.loads(self.body)


def auth_headers(api_key: str | None) -> dict[str, str]:
    """``Authorization: Bearer KEY`` (vLLM and SGLang both take it), or nothing."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def request(url: str, *, body: dict[str, object] | None = None, timeout_s: float = 5.0,
            max_bytes: int = 1 << 20, headers: Mapping[str, str] | None = None, method: str | None = None,
            api_key: str | None = None) -> HttpAnswer:
    """GET (or POST ``body`` as JSON; ``method="POST"`` without one) ``url``; never raises for HTTP errors."""
    data = None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", **auth_headers(api_key), **(headers or {})}
    req = urllib.request.Request(url, data=data, headers=sent, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as response:  # noqa: S310 (http only)
            return HttpAnswer(response.status, response.read(max_bytes))
    except urllib.error.HTTPError as exc:
        return HttpAnswer(exc.code, exc.read(min(max_bytes, 65536)) if exc.fp is not None else b"")
    except (OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        return HttpAnswer(0, b"", f"{type(exc).__name__}: {reason}")


def _detail(what: str, answer: HttpAnswer) -> str:
    if not answer.status:
        return f"{what}: {answer.error}"
    quoted = quote_body(answer.body, 200) if answer.status != 200 else ""
    return f"{what} {answer.status}" + (f" {quoted}" if quoted else "")


def _first_model(base: str, headers: Mapping[str, str], timeout_s: float) -> tuple[str | None, ProbeOutcome | None]:
    answer = request(f"{base}/v1/models", timeout_s=timeout_s, headers=headers)
    if answer.status != 200:
        return None, ProbeOutcome(False, _detail("GET /v1/models", answer), False, status=answer.status,
                                  body=answer.body.decode("utf-8", "replace"))
    try:
        listed = answer.json()
        models = listed.get("data") if isinstance(listed, dict) else None
        return (str(models[0]["id"]) if models else None), None
    except (ValueError, KeyError, TypeError, IndexError):
        return None, ProbeOutcome(False, "GET /v1/models 200 with a body that is not a model list", False)


def _one_token(base: str, model: str, headers: Mapping[str, str], timeout_s: float) -> ProbeOutcome:
    """A one-token completion (a chat completion on a chat-only server): proof that the server generates."""
    body: dict[str, object] = {"model": model, "prompt": "ping", "max_tokens": 1, "temperature": 0}
    what = "POST /v1/completions (1 token)"
    answer = request(f"{base}/v1/completions", body=body, timeout_s=timeout_s, headers=headers)
    if answer.status == 404:
        chat = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
        what = "POST /v1/chat/completions (1 token)"
        answer = request(f"{base}/v1/chat/completions", body=chat, timeout_s=timeout_s, headers=headers)
    ok = answer.status == 200
    return ProbeOutcome(ok, _detail(what, answer), ok, status=answer.status,
                        body=answer.body.decode("utf-8", "replace"))


def probe_server(url: str, profile: EngineProfile | None, *, api_key: str | None = None, model: str | None = None,
                 timeout_s: float = 5.0) -> ProbeOutcome:
    """Ask the server, as its release answers, whether it is ready; never raises.

    The profile's health endpoint (a "dead" answer ends it), then, unless that proved generation, a
    one-token completion; a plain command: ``/v1/models``, then a completion.
    """
    base = url.rstrip("/")
    headers = auth_headers(api_key)
    if profile is not None:
        check = profile.readiness_check
        what = f"{check.method} {check.path}"
        answer = request(f"{base}{check.path}", timeout_s=max(timeout_s, check.min_latency_s + 2.0), headers=headers)
        if not answer.status:
            return ProbeOutcome(False, _detail(what, answer), False)
        judged = judge_answer(check, what, answer.status, answer.body, profile.engine)
        if judged.verdict == "dead":
            dead_answer = check.answer(answer.status)
            if dead_answer is not None and dead_answer.reason_field and model is not None:
                request_said = _one_token(base, model, headers, timeout_s)
                if not request_said.ok and request_said.body:
                    said = f"and a request: {request_said.detail}"
                    judged = replace(judged, evidence=(*judged.evidence, said))
            return judged
        if not judged.ok or judged.proves_generation:
            return judged
    if model is None:
        model, failed = _first_model(base, headers, timeout_s)
        if failed is not None:
            return failed
        if model is None:
            return ProbeOutcome(True, "GET /v1/models 200 (no model listed)", False)
    return _one_token(base, model, headers, timeout_s)


def engine_versions(url: str, engine: str, *, timeout_s: float = 2.0, profile: EngineProfile | None = None,
                    api_key: str | None = None) -> dict[str, str]:
    """The engine version the server reports (SGLang ``/server_info``, vLLM ``/version``); {} if unknown."""
    try:
        chosen = profile or resolve_profile(engine, None).profile
    except ValueError:
        return {}
    for path in (*chosen.info_paths, *((chosen.version_path,) if chosen.version_path else ())):
        answer = request(url.rstrip("/") + path, timeout_s=timeout_s, headers=auth_headers(api_key))
        if answer.status == 404:
            continue
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
    return {}


def metrics_route(spec: ServerSpec, profile: EngineProfile | None) -> str | None:
    """The Prometheus path ``spec``'s server serves, or None (none in the profile, or ``--enable-metrics``
    not set): asking anyway fills its log with the toolkit's own ``GET /metrics 404`` lines (issue 14).

    >>> from toolkit.engines import profile_for
    >>> metrics_route(ServerSpec.sglang(model="m"), profile_for("sglang", "0.5.9"))
    >>> metrics_route(ServerSpec.sglang(model="m").with_flags({"--enable-metrics": None}), profile_for("sglang", "0.5.9"))
    '/metrics'
    """
    if profile is None or profile.metrics_path is None:
        return None
    enabled_by = profile.metrics.enabled_by if profile.metrics is not None else None
    if enabled_by is not None and enabled_by.startswith("--") and spec.flag(enabled_by) is MISSING:
        return None
    return profile.metrics_path


def served_model(url: str, *, timeout_s: float = 5.0, api_key: str | None = None) -> str | None:
    """The first model ``GET /v1/models`` lists, or None."""
    return _first_model(url.rstrip("/"), auth_headers(api_key), timeout_s)[0]
