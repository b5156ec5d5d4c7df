"""Side answers (``/v1/models``, ``/tokenize``, ``/metrics``, server info), read with a byte cap and a timeout.

A server is not trusted (issue 25): a ``/v1/models`` of 200 MB, a ``/metrics`` of 100 MB and a server
info of 150 MB were read whole (931 MB, 1.1 GB, 582 MB peak in the driver). The caps sit far above what
an engine sends (vLLM 0.11's ``/metrics``: a few hundred KB; a 128k-token ``/tokenize``: about 1 MB).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from toolkit.benchmark.server_view import ServerSnapshot, sglang_accept_length, vllm_spec_counters
from toolkit.errors import MalformedResponse, ToolkitError
from toolkit.prometheus_text import parse_prometheus

__all__ = ["MODELS_MAX_BYTES", "TOKENIZE_MAX_BYTES", "METRICS_MAX_BYTES", "INFO_MAX_BYTES",
           "fetch_snapshot", "first_model", "model_id", "read_capped", "read_json_capped"]

MODELS_MAX_BYTES = 1 << 20
TOKENIZE_MAX_BYTES = 8 << 20
METRICS_MAX_BYTES = 16 << 20
INFO_MAX_BYTES = 4 << 20


async def read_capped(response: aiohttp.ClientResponse, max_bytes: int, what: str) -> bytes:
    """The body of ``response``, or MalformedResponse once it passes ``max_bytes`` (decompressed bytes)."""
    declared = response.content_length
    if declared is not None and declared > max_bytes:
        raise _too_long(what, max_bytes, f"it declared {declared:,} bytes")
    body = bytearray()
    while chunk := await response.content.read(max_bytes + 1 - len(body)):
        body += chunk
        if len(body) > max_bytes:
            raise _too_long(what, max_bytes, "it sent more")
    return bytes(body)


async def read_json_capped(response: aiohttp.ClientResponse, max_bytes: int, what: str) -> Any:
    """The JSON body of ``response``, capped as :func:`read_capped`; ValueError if it is not JSON."""
    return json.loads(await read_capped(response, max_bytes, what))


async def first_model(session: aiohttp.ClientSession, url: str, headers: Mapping[str, str], timeout_s: float) -> str:
    """The first model id ``url`` serves (``/v1/models``), read within ``timeout_s`` and ``MODELS_MAX_BYTES``."""
    try:
        async with session.get(f"{url}/v1/models", headers=headers,
                               timeout=aiohttp.ClientTimeout(total=timeout_s)) as r:
            body = await read_capped(r, MODELS_MAX_BYTES, f"{url}/v1/models")
            if r.status != 200:
                raise ToolkitError(f"{url}/v1/models answered HTTP {r.status}, so no model name could be "
                                   "found", evidence=[body[:300].decode(errors="replace")],
                                   hint="pass model=... (or --model)")
            return model_id(json.loads(body), f"{url}/v1/models")
    except ToolkitError:
        raise
    except TimeoutError:
        raise ToolkitError(f"{url}/v1/models did not answer within {timeout_s:g} s (timeout_s)",
                           hint="check the server is up at that URL, or pass model=... (or --model)") from None
    except (aiohttp.ClientError, ValueError) as exc:
        raise ToolkitError(f"could not list the models at {url}/v1/models: {type(exc).__name__}: {exc}",
                           hint="check the server is up at that URL, or pass model=... (or --model)") from exc


def model_id(body: Any, where: str) -> str:
    """The first model id of a ``/v1/models`` answer, checked: ``{"data": [{"id": "..."}]}`` (OpenAI's shape)."""
    data = body.get("data") if isinstance(body, dict) else None
    first = data[0] if isinstance(data, list) and data else None
    model = first.get("id") if isinstance(first, dict) else None
    if not isinstance(model, str) or not model or len(model) > 1024:
        raise MalformedResponse(f"{where} answered no model id where OpenAI's shape has one "
                                f"({{'data': [{{'id': ...}}]}}); it answered {str(body)[:120]!r}",
                                hint="pass model=... (or --model)")
    return model


async def fetch_snapshot(session: Any, base_url: str, *, timeout_s: float = 5.0, metrics_path: str | None = "/metrics",
                         info_paths: tuple[str, ...] = ("/server_info", "/get_server_info"),
                         headers: Mapping[str, str] | None = None) -> ServerSnapshot:
    """GET the metrics and server-info endpoints the server serves (its release profile names them:
    transformers serve has neither, SGLang 0.4 only ``/get_server_info``); errors become notes."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    errors: list[str] = []
    vllm = sgl = None
    metrics_ok = info_ok = False
    if metrics_path is not None:
        try:
            async with session.get(f"{base_url}{metrics_path}", timeout=timeout, headers=headers) as resp:
                if resp.status == 200:
                    page = await read_capped(resp, METRICS_MAX_BYTES, f"{base_url}{metrics_path}")
                    vllm = vllm_spec_counters(parse_prometheus(page.decode(errors="replace")))
                    metrics_ok = True
                else:
                    errors.append(f"{base_url}{metrics_path}: HTTP {resp.status}")
        except Exception as exc:
            errors.append(f"{base_url}{metrics_path}: {type(exc).__name__}: {exc}")
    for path in info_paths:
        try:
            async with session.get(f"{base_url}{path}", timeout=timeout, headers=headers) as resp:
                if resp.status == 200:
                    sgl = sglang_accept_length(await read_json_capped(resp, INFO_MAX_BYTES, f"{base_url}{path}"))
                    info_ok = True
                    break
                if resp.status != 404:
                    errors.append(f"{base_url}{path}: HTTP {resp.status}")
                    break
        except Exception as exc:
            errors.append(f"{base_url}{path}: {type(exc).__name__}: {exc}")
            break
    else:
        if info_paths:
            errors.append(f"{base_url}{info_paths[0]}: not served (not SGLang)")
    return ServerSnapshot(vllm, sgl, metrics_ok, info_ok, tuple(errors))


def _too_long(what: str, max_bytes: int, seen: str) -> MalformedResponse:
    return MalformedResponse(f"{what} answered more than {max_bytes:,} bytes ({seen}): not what an engine sends, "
                             "so it was not read on",
                             hint="check that the URL reaches the inference server, not another service")
