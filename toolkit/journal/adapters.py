"""One adapter per type the journal records: the typed value in, the plain rows the store keeps out.

The recorder picks an adapter with ``isinstance``, so a change on either side is a type error, not a
silently empty column. Nothing here redacts: the store does, at its one gate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from toolkit.benchmark.result import BenchResult
from toolkit.errors import CommandFailed, HostError, InvalidFlag, PortInUse, ToolkitError
from toolkit.host.group import HostGroup
from toolkit.host.place import Target
from toolkit.logs.caused import REQUEST, STOP, is_toolkit_request
from toolkit.logs.classify import LogEvent, classify_lines
from toolkit.logs.metric_lines import MetricRow, MetricValue
from toolkit.server.naming import ENV_PREFIX
from toolkit.server.spec import ServerSpec

__all__ = ["Hosts", "SpecRow", "BenchRun", "LogLineRow", "MetricLineRow", "spec_row", "stored_spec",
           "spec_columns", "spec_parameters", "column_name", "bench_runs", "log_line_row",
           "judge_text", "judged_line", "ready_line_of", "metric_line_row", "host_names", "error_evidence",
           "FLAG_PREFIX", "SourceRepo", "clone_url"]

#: where a step ran: a Host, a HostGroup, a name, or several hosts or names
Hosts = Target | HostGroup | str | Iterable[Target | str]
#: result columns of flags are ``flag:--name``; variables keep naming's ``env:NAME``
FLAG_PREFIX = "flag:"


@dataclass(frozen=True)
class SpecRow:
    """A spec as stored: its dict (``to_dict``), its shell command line and its label (unredacted here)."""

    data: dict[str, Any]
    command: str
    label: str


def spec_row(spec: ServerSpec) -> SpecRow:
    return SpecRow(spec.to_dict(), spec.command(), spec.describe())


def stored_spec(data: Mapping[str, Any] | None) -> ServerSpec | None:
    """The spec a stored dict describes (secret values read ``[REDACTED]``); None when it cannot be rebuilt."""
    if not data:
        return None
    try:
        return ServerSpec.from_dict(data)
    except (InvalidFlag, TypeError, ValueError):  # a hand-edited row, or one an older toolkit wrote
        return None


def spec_parameters(data: Mapping[str, Any] | None) -> dict[str, str]:
    """A stored spec's :meth:`ServerSpec.parameters` (``--flag``, ``env:NAME``, ``commit``); {} if none."""
    spec = stored_spec(data)
    return {} if spec is None else spec.parameters()


def column_name(parameter: str) -> str:
    """The results column of a parameter: ``--x`` -> ``flag:--x``; ``env:X`` and ``commit`` stay."""
    return parameter if parameter.startswith(ENV_PREFIX) or parameter == "commit" else FLAG_PREFIX + parameter


def spec_columns(data: Mapping[str, Any] | None) -> dict[str, Any]:
    """engine, model, commit, launcher, and one ``flag:--name`` / ``env:NAME`` entry per flag and variable."""
    spec = stored_spec(data)
    if spec is None:
        return {}
    flat: dict[str, Any] = {"engine": spec.engine, "model": spec.model, "commit": spec.commit,
                            "launcher": " ".join(spec.launcher)}
    flat.update({column_name(name): value for name, value in spec.parameters().items() if name != "commit"})
    return flat


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_LOGIN_SCHEMES = frozenset({"ssh", "git+ssh", "ssh+git"})  # their user is a login name (git@), not a credential


def clone_url(url: str) -> str:
    """``url`` as a person may clone it and a journal may keep it: the credentials in it removed.

    A checkout cloned with a token keeps it in its ``origin``; an ssh URL keeps its login name.

    >>> clone_url("https://oauth2:glpat-abc@gitlab.example/team/sglang.git")
    'https://gitlab.example/team/sglang.git'
    >>> clone_url("ssh://git:pw@host:2222/x.git"), clone_url("git@github.com:sgl-project/sglang.git")
    ('ssh://git@host:2222/x.git', 'git@github.com:sgl-project/sglang.git')
    """
    url = url.strip()
    if not _SCHEME.match(url):
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL urllib reads (an unmatched "[" in its host): cut any user part and query by hand
        scheme, _, rest = url.partition("://")
        authority, slash, path = rest.partition("/")
        return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path.partition('?')[0]}"
    userinfo, _, netloc = parts.netloc.rpartition("@")  # host[:port] as written
    login = userinfo.partition(":")[0]
    if login and parts.scheme.lower() in _LOGIN_SCHEMES:
        netloc = f"{login}@{netloc}"
    query = "" if parts.scheme.lower() in ("http", "https") else parts.query
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


@dataclass(frozen=True)
class SourceRepo:
    """The git checkout a commit step's commit came from, for the post-mortem's reproduce block.

    ``origin`` is kept as :func:`clone_url` gives it: a token in it never reaches the journal.
    """

    repo_dir: str
    origin: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "origin", clone_url(self.origin) if self.origin and self.origin.strip() else None)


@dataclass(frozen=True)
class BenchRun:
    """One benchmark run split the way it is stored: summary, per-request rows, the rest (JSON-safe)."""

    summary: dict[str, Any]
    requests: list[dict[str, Any]]
    extra: dict[str, Any]


def bench_runs(result: BenchResult) -> list[BenchRun]:
    """One run per repeat (``result.runs``), or the result itself when it is one run."""
    return [_bench_run(run) for run in (result.runs or (result,))]


def _bench_run(run: BenchResult) -> BenchRun:
    data = run.to_dict(requests=True)  # JSON-safe: NaN and numpy values already converted
    summary, rows = data.pop("summary"), data.pop("requests", [])
    # The frame has ITL aggregates per request; the ECDF of ITL needs every gap (ms), which the
    # records hold: gaps between streamed chunks, the vLLM/SGLang definition of ITL.
    if len(run.records) == len(rows):
        for row, record in zip(rows, run.records, strict=True):
            row["itl_ms"] = [gap * 1000.0 for gap in record.itl_s]
    return BenchRun(summary, rows, data)


@dataclass(frozen=True)
class LogLineRow:
    line_no: int | None
    text: str
    rank: str | None
    level: str | None
    verdict: str | None
    rule: str | None
    timestamp: float | None
    caused: str | None = None  # LogEvent.caused: "request", "stop", or None (the engine's own)


def log_line_row(event: LogEvent | str) -> LogLineRow:
    """A line as stored, with its verdict: a line pasted as text is judged now (:func:`judge_text`)."""
    if isinstance(event, str):
        return judge_text(event)
    return LogLineRow(event.line_no, event.raw, event.rank, event.level, event.verdict.value, event.rule,
                      _epoch(event.timestamp), event.caused)


def judge_text(text: str, engine: str = "auto") -> LogLineRow:
    """A line pasted from a terminal, classified alone: a pasted ``glmasr`` line is stored as benign."""
    events = classify_lines([text], engine=engine)
    if not events:
        return LogLineRow(None, text, None, None, None, None, None)
    event = events[0]
    caused = STOP if event.verdict.value == "shutdown" else event.caused
    return LogLineRow(None, text, event.rank, event.level, event.verdict.value, event.rule, _epoch(event.timestamp),
                      caused)


def judged_line(verdict: str | None, text: str, engine: str) -> tuple[str | None, str | None, str | None, str | None]:
    """(verdict, rule, rank, caused) of a line stored before schema 3 (run once per line by the migration)."""
    if verdict:
        caused = STOP if verdict == "shutdown" else REQUEST if is_toolkit_request(text) else None
        return verdict, None, None, caused
    row = judge_text(text, engine)
    return row.verdict, row.rule, row.rank, row.caused


def ready_line_of(last_lines: Iterable[str], engine: str) -> dict[str, object] | None:
    """The ready line among a start-up's last lines, as ``ReadinessReport.to_dict`` stores it (schema 3 migration)."""
    lines = [str(line) for line in last_lines]
    ready = [e for e in classify_lines(lines, engine=engine) if e.verdict.value == "ready" and e.caused is None]
    return {"line_no": None, "raw": ready[0].raw.rstrip("\n")} if ready else None


@dataclass(frozen=True)
class MetricLineRow:
    line_no: int
    kind: str
    rank: str | None
    timestamp: float | None
    values: dict[str, Any]


def metric_line_row(row: MetricRow) -> MetricLineRow:
    values = {name: _metric_value(value) for name, value in row.values.items()}
    return MetricLineRow(row.line_no, row.kind, row.rank, _epoch(row.timestamp), values)


def _metric_value(value: MetricValue) -> Any:
    if isinstance(value, tuple):
        return [_finite(v) for v in value]
    return value if isinstance(value, bool | int) else _finite(value)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None  # JSON has no NaN


def _epoch(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def host_names(hosts: Hosts | None) -> list[str]:
    """A Host (or Slurm or container target), a HostGroup, a name, or several of them, as names."""
    if hosts is None:
        return []
    if isinstance(hosts, str):
        return [hosts]
    if isinstance(hosts, HostGroup):
        return [host.name for host in hosts]
    if isinstance(hosts, Iterable):
        return [name for item in hosts for name in host_names(item)]
    return [hosts.name]  # a Host, a Slurm or a container target


def error_evidence(exc: BaseException) -> dict[str, Any]:
    """What an error carries beyond its text (evidence lines, hint, host, command, port), kept with its step."""
    out: dict[str, Any] = {"type": type(exc).__name__}
    if isinstance(exc, ToolkitError):
        out |= {"evidence": list(exc.evidence)} if exc.evidence else {}
        out |= {"hint": exc.hint} if exc.hint is not None else {}
    if isinstance(exc, HostError):
        out["host"] = exc.host
    if isinstance(exc, CommandFailed):
        out |= {"command": exc.command, "exit_code": exc.exit_code}
    if isinstance(exc, PortInUse):
        out |= {key: value for key, value in (("port", exc.port), ("pid", exc.pid), ("holder", exc.holder))
                if value is not None}
    return out
