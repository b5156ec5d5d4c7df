"""The prefix cache before a measured run: flushed, or its state noted in a ``cache`` row.

An A/B test must never compare a cold cache with a warm one by accident (sgl-project/sglang#39651).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from toolkit.engines import EngineProfile
from toolkit.logs import MetricRow
from toolkit.server.http import HttpAnswer, request

if TYPE_CHECKING:
    from toolkit.server.server import Server

__all__ = ["CachePolicy", "CacheState", "CacheRecord", "cache_state", "flush_cache", "flush_prefix_cache"]

CachePolicy = Literal["flush", "keep"]
CacheState = Literal["flushed", "warm", "unknown"]


@dataclass(frozen=True)
class CacheRecord:
    """The prefix cache before a run: the policy asked, the state that resulted, and the evidence."""

    policy: CachePolicy
    state: CacheState
    detail: str
    http_status: int = 0

    def metric_row(self) -> MetricRow:
        values = {"flushed": self.state == "flushed", "warm": self.state == "warm",
                  "policy_flush": self.policy == "flush", "http_status": self.http_status}
        return MetricRow("cache", values, datetime.now(), None, 0)


def cache_state(values: Mapping[str, Any]) -> CacheState:
    """A ``cache`` row's values (as the journal gives them back) -> ``flushed``, ``warm`` or ``unknown``."""
    if values.get("flushed") is True or values.get("flushed") == 1:
        return "flushed"
    return "warm" if values.get("warm") is True or values.get("warm") == 1 else "unknown"


def flush_cache(url: str, path: str = "/flush_cache", *, timeout_s: float = 30.0,
                api_key: str | None = None) -> HttpAnswer:
    """``POST {path}`` (SGLang ``/flush_cache``, vLLM ``/reset_prefix_cache``); the caller reads the answer."""
    return request(url.rstrip("/") + path, method="POST", timeout_s=timeout_s, api_key=api_key)


def flush_prefix_cache(server: Server, engine: EngineProfile | None, *, attempts: int = 3,
                       api_key: str | None = None) -> CacheRecord:
    """Flush the server's prefix cache through its release's endpoint, and say whether it happened.

    SGLang ``/flush_cache`` answers 400 while requests run (sglang 0.5.23 http_server.py:1025-1040):
    it is asked again after a second. vLLM's ``/reset_prefix_cache`` exists only with
    ``VLLM_SERVER_DEV_MODE=1`` (0.33.0 serve/dev/cache/api_router.py:20-43) and answers 404 otherwise.
    """
    if engine is None or engine.flush_cache is None:
        return CacheRecord("flush", "unknown", f"{server.spec.engine} has no prefix-cache flush endpoint")
    endpoint = engine.flush_cache
    answer = flush_cache(server.url, endpoint.path, api_key=api_key)
    for _ in range(attempts - 1):
        if answer.status != 400:
            break
        time.sleep(1.0)
        answer = flush_cache(server.url, endpoint.path, api_key=api_key)
    said = answer.body.decode("utf-8", "replace").strip().replace("\n", " ")[:160] or (answer.error or "")
    refused = answer.status == 200 and '"success": false' in said.replace("'", '"').lower()
    if answer.status == 200 and not refused:
        # the success reply (SGLang's 150 characters of "Cache flushed. Please check backend logs...") says
        # nothing the 200 does not, and it was repeated in every run's note (issue 28): only a refusal is quoted
        return CacheRecord("flush", "flushed", f"POST {endpoint.path}: 200", 200)
    hint = f" (needs {endpoint.enabled_by} at launch)" if answer.status == 404 and endpoint.enabled_by else ""
    return CacheRecord("flush", "unknown", f"POST {endpoint.path}: HTTP {answer.status} {said}{hint}".strip(),
                       answer.status)
