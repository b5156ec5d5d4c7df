"""What NCCL itself says it read: the ``NCCL_DEBUG=INFO`` echoes of each rank, compared, pure.

``/proc/PID/environ`` shows what a process was started with; NCCL may still read something else (a
variable set in-process, a config file), and with ``NCCL_DEBUG=INFO`` each rank echoes what it read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pandas as pd

from toolkit.host.shell import quote_path
from toolkit.moves.envcheck.overrides import override_reason
from toolkit.moves.envcheck.roles import ProcessRole, Role

__all__ = ["NcclEnvEcho", "parse_nccl_env", "nccl_env_frame", "nccl_lines_script"]

# "gpu-a:1234:1240 [3] NCCL INFO NCCL_ALGO set by environment to Ring": host, pid, tid,
# CUDA device. Anything may precede it (timestamps, vLLM's "(VllmWorker rank=1 pid=..)").
_NCCL_PREFIX = r"(?P<host>[^\s:\[\]()]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<device>\d+)\] NCCL INFO "
_NCCL_ECHO = re.compile(
    _NCCL_PREFIX + r"(?P<variable>NCCL_[A-Z0-9_]+) set (?:by environment )?to (?P<value>.*?)\s*$"
)
_NCCL_ANY = re.compile(_NCCL_PREFIX)
# NCCL 2.27 prints "ncclCommInitRank comm 0x.. rank 7 nranks 16", 2.28 "ncclCommInitRankConfig comm ...".
_NCCL_COMM = re.compile(r"ncclCommInitRank(?:Config|Scalable)? comm \S+ rank (?P<rank>\d+) nranks (?P<nranks>\d+)")
# NCCL reads these case-insensitively (NCCL_ALGO=ring and Ring are the same request).
_CASE_INSENSITIVE = frozenset({"NCCL_ALGO", "NCCL_PROTO"})
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_COLUMNS = ["host", "pid", "device", "nccl_rank", "role", "rank", "variable", "log_value", "expected",
            "status", "reason"]


@dataclass(frozen=True)
class NcclEnvEcho:
    """One ``NCCL_X set by environment to V`` line: which process read which value."""

    host: str
    pid: int
    tid: int
    device: int
    variable: str
    value: str
    line_no: int


def parse_nccl_env(lines: Iterable[str]) -> list[NcclEnvEcho]:
    """Every NCCL environment echo in a log (``NCCL_DEBUG=INFO``), in order.

    Integer parameters end with a period (``NCCL_IB_DISABLE set by environment to 0.``): it is dropped.
    """
    echoes = []
    for line_no, line in enumerate(lines, start=1):
        match = _NCCL_ECHO.search(_ANSI.sub("", line).rstrip("\r\n"))
        if match is None:
            continue
        value = match.group("value")
        if value.endswith(".") and value[:-1].lstrip("-").isdigit():
            value = value[:-1]
        echoes.append(NcclEnvEcho(match.group("host"), int(match.group("pid")), int(match.group("tid")),
                                  int(match.group("device")), match.group("variable"), value, line_no))
    return echoes


def nccl_env_frame(lines: Iterable[str], expected: Mapping[str, str | None], *,
                   roles: Mapping[tuple[str, int], ProcessRole] | None = None, host: str | None = None,
                   version: str | None = None) -> pd.DataFrame:
    """One row per (process that logged NCCL INFO, expected ``NCCL_*`` variable): echoed value and status.

    ``not_logged``: the process logged NCCL INFO but never echoed the variable, so NCCL did not see it.
    ``roles`` (``EnvReport.roles()``) adds role, rank and override reasons (for release ``version``);
    ``host`` names the lines' host as the report does, instead of the hostname NCCL printed.

    >>> line = "gpu-a:7:7 [0] NCCL INFO NCCL_ALGO set by environment to Tree"
    >>> nccl_env_frame([line], {"NCCL_ALGO": "Ring"})[["pid", "log_value", "status"]].values.tolist()
    [[7, 'Tree', 'overridden']]
    """
    wanted = {name: value for name, value in expected.items()
              if name.startswith("NCCL_") and not name.startswith("NCCL_DEBUG")}
    seen: dict[tuple[str, int], dict[str, object]] = {}
    values: dict[tuple[str, int, str], str] = {}
    for line in lines:
        text = _ANSI.sub("", line)
        head = _NCCL_ANY.search(text)
        if head is None:
            continue
        key = (host or head.group("host"), int(head.group("pid")))
        process = seen.setdefault(key, {"device": int(head.group("device")), "nccl_rank": None})
        comm = _NCCL_COMM.search(text)
        if comm and process["nccl_rank"] is None:
            process["nccl_rank"] = f"{comm.group('rank')}/{comm.group('nranks')}"
        for echo in parse_nccl_env([text]):
            values.setdefault((host or echo.host, echo.pid, echo.variable), echo.value)
    known = dict(roles or {})
    records = []
    for (host, pid), process in seen.items():
        role = known.get((host, pid), ProcessRole(Role.OTHER))
        for variable, want in wanted.items():
            got = values.get((host, pid, variable))
            if got is None:
                status, reason = "not_logged", None
            elif want is None or got == want or (variable in _CASE_INSENSITIVE
                                                 and got.lower() == want.lower()):
                status, reason = "ok", None
            else:
                status, reason = "overridden", override_reason(role, variable, got, version, seen_by="nccl")
            records.append([host, pid, process["device"], process["nccl_rank"],
                            str(role.role) if (host, pid) in known else None, role.rank, variable, got, want,
                            status, reason])
    frame = pd.DataFrame(records, columns=_COLUMNS)
    return frame.sort_values(["host", "device", "pid", "variable"], kind="stable").reset_index(drop=True)


# One line per process (its first NCCL INFO line) plus every echo and communicator line:
# an NCCL_DEBUG=INFO log holds thousands of topology lines per rank that say nothing here.
_AWK_FILTER = (
    r"/ NCCL INFO / { if (match($0, /[A-Za-z0-9._-]+:[0-9]+:[0-9]+ \[[0-9]+\] NCCL INFO /)) {"
    r" k = substr($0, RSTART, RLENGTH);"
    r" if (!(k in seen) || / set (by environment )?to / || /ncclCommInitRank/) { seen[k] = 1; print } } }"
)


def nccl_lines_script(log_path: str, *, max_lines: int = 20000) -> str:
    """Bash that prints the lines of ``log_path`` that :func:`nccl_env_frame` needs, on the host.

    Filtering where the log lives keeps a multi-gigabyte log from crossing SSH; POSIX awk, any host.
    """
    awk = _AWK_FILTER.replace("'", "")
    return f"[ -r {quote_path(log_path)} ] && awk '{awk}' {quote_path(log_path)} | head -n {int(max_lines)} || true"
