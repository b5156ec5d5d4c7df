"""Turn what the other modules hand us into plain JSON-safe data, by duck typing.

The journal must not import launch/bench/readiness/logs at import time (they are built in
parallel, and a journal must open without them), so it states what it needs as Protocols
and accepts plain dicts too. Nothing here redacts: the store does, at the one boundary.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "SpecLike", "BenchLike", "ReadinessLike", "MetricRowLike", "LogEventLike", "HostLike",
    "SpecParts", "BenchParts", "jsonable", "spec_parts", "bench_parts", "readiness_dict",
    "metric_row_dict", "log_line_dict", "host_names", "is_bench", "is_readiness", "env_pairs", "flag_words",
]


@runtime_checkable
class SpecLike(Protocol):
    """``launch.ServerSpec``: ``to_dict()`` with engine, launcher, model, port, flags, env, commit, label."""

    def to_dict(self) -> Mapping[str, Any]: ...


@runtime_checkable
class BenchLike(Protocol):
    """``bench.BenchResult``: a summary with vLLM-style stable keys and per-request rows."""

    summary: Mapping[str, Any]
    requests: Any


class ReadinessLike(Protocol):
    """``readiness.ReadinessReport``: ready, time_to_ready_s, phases, benign lines."""

    ready: bool

    def to_dict(self) -> Mapping[str, Any]: ...


class MetricRowLike(Protocol):
    """``logs.MetricRow``: one parsed metric line of the server log."""

    kind: str
    values: Mapping[str, Any]
    timestamp: dt.datetime | None
    rank: str | None
    line_no: int


class LogEventLike(Protocol):
    """``logs.LogEvent``: one classified log line."""

    line_no: int
    text: str
    rank: str | None
    verdict: Any
    rule: str | None


class HostLike(Protocol):
    """``hosts.Host``: we only keep its name."""

    name: str


def jsonable(obj: Any) -> Any:
    """A JSON-safe copy: numpy scalars and arrays, pandas values, datetimes, enums, dataclasses.

    NaN and infinities become None (JSON has no NaN and SQLite's JSON would reject it).
    """
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, enum.Enum):
        return jsonable(obj.value)
    if isinstance(obj, dt.datetime):
        return obj.timestamp()
    if isinstance(obj, dt.date | dt.timedelta):
        return str(obj)
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "to_dict") and callable(obj.to_dict):  # the owner's own JSON form wins
        return jsonable(obj.to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
    if hasattr(obj, "tolist"):  # numpy arrays and scalars
        return jsonable(obj.tolist())
    if hasattr(obj, "item"):
        return jsonable(obj.item())
    if hasattr(obj, "isoformat"):  # pandas.Timestamp and friends
        return str(obj.isoformat())
    return str(obj)


@dataclass(frozen=True)
class SpecParts:
    """A spec as stored: its dict, its shell command line and a short label (all unredacted here)."""

    data: dict[str, Any]
    command: str
    label: str | None


def env_pairs(env: Any) -> list[tuple[str, Any]]:
    """A spec's env as pairs, whether it came as ``{"K": "v"}`` or ``[["K", "v"], ...]``."""
    if not env:
        return []
    items = env.items() if isinstance(env, Mapping) else env
    return [(str(k), v) for k, v in items]


def flag_words(value: Any) -> list[str]:
    """A flag's value as argv words: None is a switch, a list is several words (``--x a b``)."""
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


def command_from_spec_dict(data: Mapping[str, Any]) -> str:
    """Rebuild a shell line from a spec dict when the spec cannot say it itself."""
    env = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env_pairs(data.get("env")))
    argv = [str(a) for a in data.get("launcher") or []]
    for name, value in data.get("flags") or []:
        argv += [str(name), *flag_words(value)]
    line = " ".join(part for part in (env, shlex.join(argv)) if part)
    return f"cd {shlex.quote(str(data['workdir']))} && {line}" if data.get("workdir") else line


def spec_parts(spec: Any) -> SpecParts:
    """Accept a ServerSpec-like object (``to_dict``, ``command``, ``describe``) or a plain dict."""
    if isinstance(spec, Mapping):
        data = jsonable(spec)
    elif hasattr(spec, "to_dict"):
        data = jsonable(spec.to_dict())
    else:
        raise TypeError(
            f"spec must be a ServerSpec (anything with .to_dict()) or a dict, not {type(spec).__name__}"
        )
    command = spec.command() if callable(getattr(spec, "command", None)) else command_from_spec_dict(data)
    label = spec.describe() if callable(getattr(spec, "describe", None)) else data.get("label") or None
    return SpecParts(data=data, command=str(command), label=None if label is None else str(label))


def is_bench(obj: Any) -> bool:
    """A benchmark result: ``.summary``, or a dict with a summary or throughput keys."""
    if hasattr(obj, "summary"):
        return True
    return isinstance(obj, Mapping) and ("summary" in obj or "output_throughput" in obj)


def is_readiness(obj: Any) -> bool:
    """A readiness report: ``.ready`` on a dataclass or ``to_dict`` object, or a dict with ``ready``."""
    if hasattr(obj, "ready") and (hasattr(obj, "to_dict") or dataclasses.is_dataclass(obj)):
        return True
    return isinstance(obj, Mapping) and "ready" in obj


@dataclass(frozen=True)
class BenchParts:
    """A benchmark result split the way it is stored: summary, per-request rows, the rest."""

    summary: dict[str, Any]
    requests: list[dict[str, Any]]
    extra: dict[str, Any]


def _request_rows(requests: Any) -> list[dict[str, Any]]:
    if requests is None:
        return []
    if hasattr(requests, "to_dict") and hasattr(requests, "columns"):  # a DataFrame
        return [jsonable(row) for row in requests.to_dict(orient="records")]
    return [jsonable(row) for row in requests]


def bench_parts(result: Any) -> BenchParts:
    """Accept a BenchResult-like object or a dict (a bare summary, or {summary, requests, ...})."""
    if isinstance(result, Mapping):
        if "summary" in result:
            rest = {k: v for k, v in result.items() if k not in ("summary", "requests")}
            return BenchParts(jsonable(result["summary"]), _request_rows(result.get("requests")), jsonable(rest))
        return BenchParts(jsonable(result), [], {})
    summary = jsonable(result.summary)
    extra: dict[str, Any] = {}
    for name in ("workload", "settings", "server_view"):
        if getattr(result, name, None) is not None:
            extra[name] = jsonable(getattr(result, name))
    rows = _request_rows(getattr(result, "requests", None))
    _add_itl_lists(rows, getattr(result, "records", None))
    return BenchParts(summary, rows, extra)


def _add_itl_lists(rows: list[dict[str, Any]], records: Any) -> None:
    """Give each request its ITL gaps (ms) when the frame only has ITL aggregates.

    ``BenchResult.requests`` carries itl_mean/max per request; the ECDF of ITL needs every
    gap. ``RequestRecord.chunk_times`` (perf_counter seconds, one per token chunk) has them:
    ITL = gaps between streamed chunks, the vLLM/SGLang definition.
    """
    if not rows or "itl_ms" in rows[0] or not records or len(records) != len(rows):
        return
    for row, record in zip(rows, records, strict=True):
        times = [float(t) for t in getattr(record, "chunk_times", ()) or ()]
        row["itl_ms"] = [(b - a) * 1000.0 for a, b in zip(times, times[1:], strict=False)]


def readiness_dict(report: Any) -> dict[str, Any]:
    """A readiness report as a dict; ``ready`` and ``time_to_ready_s`` are what the tables use."""
    return dict(jsonable(report))


def _timestamp(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    return None


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _str(value: Any) -> str | None:
    return None if value is None else str(jsonable(value))


def _field(obj: Any, name: str, default: Any = None) -> Any:
    return obj.get(name, default) if isinstance(obj, Mapping) else getattr(obj, name, default)


def metric_row_dict(row: Any) -> dict[str, Any]:
    """A MetricRow (or dict with kind/values/timestamp/rank/line_no) as stored."""
    return {
        "kind": str(_field(row, "kind", "metric")),
        "values": jsonable(_field(row, "values", {}) or {}),
        "timestamp": _timestamp(_field(row, "timestamp")),
        "rank": _str(_field(row, "rank")),
        "line_no": _int(_field(row, "line_no")),
    }


def log_line_dict(event: Any) -> dict[str, Any]:
    """A LogEvent, a dict with text/line_no/..., or a bare string, as stored."""
    if isinstance(event, str):
        return {"line_no": None, "text": event, "rank": None, "level": None, "verdict": None,
                "rule": None, "timestamp": None}
    text = _field(event, "raw") or _field(event, "text") or ""  # raw keeps the time and rank prefix
    verdict = _field(event, "verdict")  # an Enum (logs.Verdict) or a string
    return {
        "line_no": _int(_field(event, "line_no")),
        "text": str(text),
        "rank": _str(_field(event, "rank")),
        "level": _str(_field(event, "level")),
        "verdict": _str(verdict),
        "rule": _str(_field(event, "rule")),
        "timestamp": _timestamp(_field(event, "timestamp")),
    }


def host_names(host: Any) -> list[str]:
    """A Host, a name, or several of them, as a list of names."""
    if host is None:
        return []
    if isinstance(host, str):
        return [host]
    if hasattr(host, "name"):
        return [str(host.name)]
    if isinstance(host, Iterable):
        return [name for item in host for name in host_names(item)]
    return [str(host)]
