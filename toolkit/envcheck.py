"""Did every rank get the environment we meant to give it?

In the EAGLE-3 investigation, NCCL tuning variables were "propagated to the TP
worker processes" and then ruled out, which is only sound if each worker's actual
environment was read. This module turns the process tree of a server (each process's
``/proc/PID/environ`` and command line, collected by ``Host.process_tree``) into one
row per process and variable: expected, actual, and a status that names the cause.

Why workers and the launcher can disagree: ``/proc/PID/environ`` holds the
environment a process was *exec'd* with. SGLang's ``_set_envs_and_config`` and
vLLM's ``env_override`` write ``os.environ`` in the launcher after it started, so the
launcher still shows what the user exported while the spawned schedulers and workers
show what the engine wrote. An ``ok`` launcher beside ``overridden`` workers is that
signature, and the row's ``reason`` names the engine code responsible.

Statuses: ``ok`` (equal to expected, or present when any value is expected),
``missing``, ``overridden`` (present with another value) and ``unreadable`` (the
process could not be read: it exited, or belongs to another user).

The same check also runs on a log: with ``NCCL_DEBUG=INFO`` each rank echoes the
NCCL variables it read (``gpu-a:1234:1234 [0] NCCL INFO NCCL_ALGO set by environment
to Ring``); :func:`nccl_env_frame` compares those echoes with what was expected.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

import pandas as pd

__all__ = [
    "ProcessLike",
    "Role",
    "ProcessRole",
    "KnownOverride",
    "KNOWN_OVERRIDES",
    "STATUS_CODES",
    "EnvReport",
    "NcclEnvEcho",
    "classify_process",
    "check_env",
    "parse_nccl_env",
    "nccl_env_frame",
]


class ProcessLike(Protocol):
    """What :func:`check_env` reads from a process; ``toolkit.hosts.ProcessInfo`` fits."""

    @property
    def host(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def ppid(self) -> int: ...
    @property
    def cmdline(self) -> tuple[str, ...]: ...
    @property
    def environ(self) -> Mapping[str, str] | None: ...
    @property
    def error(self) -> str | None: ...


class Role(StrEnum):
    SERVER = "server"  # the engine's HTTP entry point: sglang.launch_server, vllm serve
    LAUNCHER = "launcher"  # torchrun and friends: start ranks, serve nothing
    WORKER = "worker"  # owns a GPU rank: sglang::scheduler_TP3, VLLM::Worker_TP1
    ENGINE_CORE = "engine_core"  # VLLM::EngineCore
    API_SERVER = "api_server"  # VLLM::APIServer_0 (vLLM with several API processes)
    TOKENIZER = "tokenizer"
    DETOKENIZER = "detokenizer"
    DP_CONTROLLER = "dp_controller"  # sglang::data_parallel_controller, VLLM::DPCoordinator
    HELPER = "helper"  # multiprocessing resource tracker, timeout, tee
    SHELL = "shell"  # bash -c wrappers: their environment is not the engine's
    OTHER = "other"


@dataclass(frozen=True)
class ProcessRole:
    """What a process is, from its command line (and, for torchrun ranks, its environment).

    ``rank`` is a label in the engine's own spelling, as its logs print it ("TP3",
    "DP1 TP3", "RANK2"); ``ranks`` holds the numbers for sorting.
    """

    role: Role
    engine: str | None = None
    rank: str | None = None
    ranks: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class KnownOverride:
    """An engine that writes a variable into its children's environment, and where."""

    engine: str
    variable: str
    writes: str  # the value, or how it is computed
    when: str  # the condition, in the engine's terms
    where: str  # the code that does it, for the reader who wants to check

    def reason(self, role: Role) -> str:
        who = {"sglang": "SGLang", "vllm": "vLLM"}.get(self.engine, self.engine)
        if self.engine == "sglang" and role == Role.WORKER:
            procs = "scheduler processes"
        elif role == Role.OTHER:
            procs = "processes it spawns"
        else:
            procs = f"{role} processes"
        return f"{who}'s {self.where} sets {self.variable} in the {procs} ({self.writes}; {self.when})"


# Sources: SGLang python/sglang/srt/entrypoints/engine.py::_set_envs_and_config (0.5.23
# wheel; older releases through public forks of it, e.g. verl's patched copy citing
# sgl-project/sglang#6723), srt/arg_groups/attention_hook.py, srt/utils/common.py;
# vLLM vllm/env_override.py (vllm-project/vllm, several releases),
# vllm/v1/executor/multiproc_executor.py, vllm/utils/system_utils.py (0.33.0 wheel).
KNOWN_OVERRIDES: tuple[KnownOverride, ...] = (
    KnownOverride(
        "sglang",
        "NCCL_CUMEM_ENABLE",
        "'0' or str(int(--enable-symm-mem))",
        "always up to 0.4.x; from 0.5 when unset or with --enable-symm-mem",
        "_set_envs_and_config",
    ),
    KnownOverride(
        "sglang",
        "NCCL_NVLS_ENABLE",
        "str(int(--enable-nccl-nvls or --enable-symm-mem))",
        "always up to 0.4.x; later when unset or either flag is given",
        "_set_envs_and_config",
    ),
    KnownOverride(
        "sglang", "CUDA_DEVICE_MAX_CONNECTIONS", "'4', '8' since 0.5.x", "always", "_set_envs_and_config"
    ),
    KnownOverride(
        "sglang", "TORCH_NCCL_AVOID_RECORD_STREAMS", "'1'", "always, up to 0.5.x", "_set_envs_and_config"
    ),
    KnownOverride("sglang", "CUDA_MODULE_LOADING", "'AUTO'", "always, up to 0.5.x", "_set_envs_and_config"),
    KnownOverride("sglang", "TF_CPP_MIN_LOG_LEVEL", "'3'", "always, up to 0.5.x", "_set_envs_and_config"),
    KnownOverride(
        "sglang", "NCCL_GRAPH_MIXING_SUPPORT", "'0'", "when unset and --dcp-size > 1", "_set_envs_and_config"
    ),
    KnownOverride("sglang", "TRTLLM_ENABLE_PDL", "'1'", "unless it is set to '0'", "_set_envs_and_config"),
    KnownOverride(
        "sglang",
        "NCCL_ALGO",
        "'allreduce:tree'",
        "with --enable-deterministic-inference and TP > 1",
        "_handle_deterministic_inference",
    ),
    KnownOverride(
        "sglang",
        "NCCL_MIN_NCHANNELS",
        "SGLANG_DETERMINISTIC_NCCL_NCHANNELS",
        "with --enable-deterministic-inference and TP > 1",
        "_handle_deterministic_inference",
    ),
    KnownOverride(
        "sglang",
        "NCCL_MAX_NCHANNELS",
        "SGLANG_DETERMINISTIC_NCCL_NCHANNELS",
        "with --enable-deterministic-inference and TP > 1",
        "_handle_deterministic_inference",
    ),
    KnownOverride(
        "sglang",
        "CUDA_VISIBLE_DEVICES",
        "the one GPU of the rank",
        "with SGLANG_ONE_VISIBLE_DEVICE_PER_PROCESS=1",
        "maybe_reindex_device_id",
    ),
    KnownOverride(
        "vllm",
        "NCCL_CUMEM_ENABLE",
        "'0'",
        "on `import vllm` (always in 0.6-0.8; later only when unset and no multi-node NVLink)",
        "env_override.py",
    ),
    KnownOverride(
        "vllm", "TORCHINDUCTOR_COMPILE_THREADS", "'1'", "on `import vllm`, always", "env_override.py"
    ),
    KnownOverride(
        "vllm", "PYTORCH_NVML_BASED_CUDA_CHECK", "'1'", "on `import vllm`, always", "env_override.py"
    ),
    KnownOverride(
        "vllm",
        "VLLM_WORKER_MULTIPROC_METHOD",
        "'spawn'",
        "when unset, or when CUDA is already initialised",
        "_maybe_force_spawn",
    ),
    KnownOverride(
        "vllm",
        "OMP_NUM_THREADS",
        "a per-worker thread count",
        "when unset, before starting workers",
        "set_multiprocessing_worker_envs",
    ),
)

_OVERRIDE_INDEX: dict[tuple[str, str], KnownOverride] = {(o.engine, o.variable): o for o in KNOWN_OVERRIDES}
# Processes an engine spawns after writing os.environ: these inherit its overrides.
_SPAWNED_ROLES = frozenset(
    {Role.WORKER, Role.ENGINE_CORE, Role.DETOKENIZER, Role.TOKENIZER, Role.DP_CONTROLLER, Role.OTHER}
)
# The summary names the most telling finding first: an engine rewrote it, then absent.
_SEVERITY = {"overridden": 3, "missing": 2, "unreadable": 1, "ok": 0}

STATUS_CODES: Mapping[str, int] = {"ok": 0, "overridden": 1, "missing": 2, "unreadable": 3}
_FRAME_COLUMNS = [
    "host",
    "pid",
    "ppid",
    "role",
    "engine",
    "rank",
    "process",
    "variable",
    "expected",
    "actual",
    "status",
    "reason",
]
_ROLE_ORDER = {role: i for i, role in enumerate(Role)}

# --- classification --------------------------------------------------------------

_RANK_PART = re.compile(r"(ATTN_CP|MOE_DP|PCP|DCP|DP|PP|TP|EP)(\d+)")
_SGLANG_TITLE = re.compile(r"^sglang::(?P<what>[a-z_]+)(?:[_:](?P<rest>.*))?$")
_VLLM_TITLE = re.compile(
    r"^(?P<prefix>[A-Za-z0-9_]+)::(?P<what>Worker|EngineCore|APIServer|DPCoordinator)(?:_(?P<rest>.*))?$"
)
_VLLM_OLD_WORKER = re.compile(r"VllmWorker[ _-]?(?:rank[=_ ]?)?(?P<rank>\d+)")
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "fish"})
_HELPERS = frozenset({"timeout", "tee", "stdbuf", "script", "setsid", "nohup", "env", "sudo"})


def classify_process(cmdline: Sequence[str], environ: Mapping[str, str] | None = None) -> ProcessRole:
    """Name a process's role, engine and rank from its command line.

    >>> classify_process(("sglang::scheduler_DP1_TP3",)).rank
    'DP1 TP3'
    >>> classify_process(("python", "-m", "sglang.launch_server", "--tp", "8")).role
    <Role.SERVER: 'server'>
    """
    argv = [arg for arg in cmdline if arg.strip()]
    if not argv:
        return ProcessRole(Role.OTHER)
    # setproctitle leaves the title in argv[0], padded with spaces or NULs.
    title = " ".join(argv).strip() if len(argv) == 1 else argv[0].strip()
    titled = _classify_title(title)
    if titled is not None:
        return titled
    program = argv[0].rsplit("/", 1)[-1]
    if program in _SHELLS:
        return ProcessRole(Role.SHELL)
    if program in _HELPERS:
        return ProcessRole(Role.HELPER)
    module = _python_module(argv)
    rest = argv[1:]
    if module == "multiprocessing.resource_tracker" or (
        module is None and _runs_code(argv, "resource_tracker")
    ):
        return ProcessRole(Role.HELPER)
    if module in ("sglang.launch_server",) or (program == "sglang" and rest[:1] == ["serve"]):
        return ProcessRole(Role.SERVER, "sglang")
    if module in ("vllm.entrypoints.openai.api_server",) or (
        (program == "vllm" or module == "vllm.entrypoints.cli.main") and "serve" in rest
    ):
        return ProcessRole(Role.SERVER, "vllm")
    if program == "transformers" and rest[:1] == ["serve"]:
        return ProcessRole(Role.SERVER, "transformers")
    if program == "torchrun" or module in ("torch.distributed.run", "torch.distributed.launch"):
        return ProcessRole(Role.LAUNCHER, "torchrun")
    if module is not None and module.startswith("toolkit.sim"):
        # Our simulator imitates an engine (sglang by default), overrides included.
        engine = _option(argv, "--engine") or "sglang"
        if module != "toolkit.sim.worker":
            return ProcessRole(Role.SERVER, engine)
        if _option(argv, "--role") == "engine-core":
            return ProcessRole(Role.ENGINE_CORE, engine)
        return _ranked(Role.WORKER, engine, argv, environ)
    ranked = _ranked(Role.WORKER, None, argv, environ)
    if ranked.rank is not None:
        return ranked
    return ProcessRole(Role.OTHER)


def _classify_title(title: str) -> ProcessRole | None:
    sglang = _SGLANG_TITLE.match(title)
    if sglang:
        what = sglang.group("what")
        if what == "scheduler":
            return _from_rank_parts(Role.WORKER, "sglang", sglang.group("rest") or "")
        role = {
            "detokenizer": Role.DETOKENIZER,
            "detokenizer_router": Role.DETOKENIZER,
            "tokenizer_worker": Role.TOKENIZER,
            "data_parallel_controller": Role.DP_CONTROLLER,
        }.get(what, Role.OTHER)
        return ProcessRole(role, "sglang")
    vllm = _VLLM_TITLE.match(title)
    if vllm and vllm.group("prefix") != "sglang":
        role = {
            "Worker": Role.WORKER,
            "EngineCore": Role.ENGINE_CORE,
            "APIServer": Role.API_SERVER,
            "DPCoordinator": Role.DP_CONTROLLER,
        }[vllm.group("what")]
        rest = vllm.group("rest") or ""
        if role == Role.API_SERVER and rest.isdigit():
            return ProcessRole(role, "vllm", f"API{rest}", (("API", int(rest)),))
        return _from_rank_parts(role, "vllm", rest)
    old = _VLLM_OLD_WORKER.search(title)
    if old:
        rank = int(old.group("rank"))
        return ProcessRole(Role.WORKER, "vllm", f"RANK{rank}", (("RANK", rank),))
    return None


def _from_rank_parts(role: Role, engine: str, text: str) -> ProcessRole:
    parts = tuple((kind, int(number)) for kind, number in _RANK_PART.findall(text))
    label = " ".join(f"{kind}{number}" for kind, number in parts) or None
    return ProcessRole(role, engine, label, parts)


def _ranked(
    role: Role, engine: str | None, argv: Sequence[str], environ: Mapping[str, str] | None
) -> ProcessRole:
    """Our simulator's --tp-rank/--rank, torch's --local-rank, or torchrun's RANK/LOCAL_RANK."""
    for option, kind in (
        ("--tp-rank", "TP"),
        ("--rank", "RANK"),
        ("--local-rank", "LOCAL_RANK"),
        ("--local_rank", "LOCAL_RANK"),
    ):
        value = _option(argv, option)
        if value is not None and value.isdigit():
            return ProcessRole(role, engine, f"{kind}{value}", ((kind, int(value)),))
    for variable in ("RANK", "LOCAL_RANK"):
        value = (environ or {}).get(variable)
        if value is not None and value.isdigit():
            return ProcessRole(role, engine or "torchrun", f"{variable}{value}", ((variable, int(value)),))
    return ProcessRole(role, engine)


def _python_module(argv: Sequence[str]) -> str | None:
    if "-m" in argv[:-1] and argv[0].rsplit("/", 1)[-1].startswith("python"):
        return argv[argv.index("-m") + 1]
    return None


def _runs_code(argv: Sequence[str], needle: str) -> bool:
    return "-c" in argv[:-1] and needle in argv[argv.index("-c") + 1]


def _option(argv: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


# --- the report ------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EnvReport:
    """Expected versus actual environment, one row per (process, variable).

    ``frame`` columns: host, pid, ppid, role, engine, rank, process (a column label
    such as ``"TP3 [4242]"``), variable, expected, actual, status, reason.
    ``nccl`` is the log comparison added by :meth:`with_nccl_log`, if any.
    """

    frame: pd.DataFrame
    expected: tuple[tuple[str, str | None], ...]
    nccl: pd.DataFrame | None = None

    def problems(self) -> pd.DataFrame:
        """The rows that are not ``ok``."""
        return self.frame[self.frame["status"] != "ok"].reset_index(drop=True)

    @property
    def ok(self) -> bool:
        nccl_ok = self.nccl is None or bool((self.nccl["status"] == "ok").all())
        return bool((self.frame["status"] == "ok").all()) and nccl_ok

    def by_rank(self) -> pd.DataFrame:
        """Variable x process table of actual values (``<missing>``, ``<unreadable>``)."""
        shown = self.frame.assign(
            value=self.frame["actual"].where(
                self.frame["status"].isin(["ok", "overridden"]), "<" + self.frame["status"] + ">"
            )
        )
        return self._pivot(shown, "value")

    def heatmap_frame(self) -> pd.DataFrame:
        """Variable x process table of :data:`STATUS_CODES`, for ``plots.py`` to colour.

        ``.attrs["status_codes"]`` carries the code legend.
        """
        coded = self.frame.assign(code=self.frame["status"].map(STATUS_CODES))
        table = self._pivot(coded, "code").astype("int64")
        table.attrs["status_codes"] = dict(STATUS_CODES)
        return table

    def _pivot(self, frame: pd.DataFrame, values: str) -> pd.DataFrame:
        processes = list(dict.fromkeys(frame["process"]))
        variables = [name for name, _ in self.expected]
        table = frame.pivot(index="variable", columns="process", values=values)
        return table.reindex(index=variables, columns=processes).rename_axis(
            index="variable", columns="process"
        )

    def with_nccl_log(self, lines: Iterable[str]) -> EnvReport:
        """This report plus the NCCL log comparison (see :func:`nccl_env_frame`)."""
        return replace(self, nccl=nccl_env_frame(lines, dict(self.expected), report=self))

    def summary(self) -> str:
        """One line: counts by status and the worst finding."""
        frame = self.frame
        hosts = sorted(set(frame["host"]))
        counts = frame["status"].value_counts()
        parts = [f"{int(counts.get(status, 0))} {status}" for status in STATUS_CODES]
        processes = frame["pid"].nunique()
        text = (
            f"env check of {_count(processes, 'process', 'processes')} x {_count(len(self.expected), 'variable')} on "
            f"{', '.join(hosts) or 'no host'}: {', '.join(parts)}"
        )
        worst = self.problems()
        if len(worst):
            grouped = worst.groupby(["status", "variable"], sort=False).size().reset_index(name="n")
            grouped["severity"] = grouped["status"].map(_SEVERITY)
            top = grouped.sort_values(["severity", "n"], ascending=False, kind="stable").iloc[0]
            text += f"; {top['variable']} {top['status']} in {top['n']} of {processes}"
        if self.nccl is not None:
            good = int((self.nccl["status"] == "ok").sum())
            text += f"; NCCL log: {good} of {len(self.nccl)} echoes as expected"
        return text

    def __str__(self) -> str:
        problems = self.problems()
        lines = [self.summary()]
        if len(problems):
            columns = ["process", "variable", "expected", "actual", "status", "reason"]
            lines.append(problems[columns].fillna("").to_string(index=False))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        table = self.by_rank()
        status = self._pivot(self.frame, "status")
        colours = {"ok": "#e6f4ea", "overridden": "#fff4ce", "missing": "#fde2e1", "unreadable": "#eeeeee"}
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
        rows = []
        for variable in table.index:
            cells = "".join(
                f'<td style="background:{colours.get(str(status.at[variable, c]), "#fff")}">'
                f"{html.escape(str(table.at[variable, c]))}</td>"
                for c in table.columns
            )
            rows.append(f"<tr><th>{html.escape(str(variable))}</th>{cells}</tr>")
        return (
            f"<p>{html.escape(self.summary())}</p>"
            f"<table><thead><tr><th>variable</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def check_env(
    processes: Iterable[ProcessLike],
    expected: Mapping[str, str | None],
    *,
    skip_roles: Iterable[Role | str] = (Role.HELPER, Role.SHELL),
) -> EnvReport:
    """Compare each process's environment with ``expected`` (``None``: any value, but set).

    Shell wrappers and helpers are skipped by default: ``bash -c 'NCCL_ALGO=Ring python
    ...'`` never has the variable itself, so it would read as ``missing`` and hide the
    real rows.

    >>> from types import SimpleNamespace as P
    >>> worker = P(host="gpu-a", pid=11, ppid=10, cmdline=("sglang::scheduler_TP0",),
    ...            environ={"NCCL_NVLS_ENABLE": "0"}, error=None)
    >>> check_env([worker], {"NCCL_NVLS_ENABLE": "1"}).frame["status"].tolist()
    ['overridden']
    """
    skipped = {Role(role) for role in skip_roles}
    infos = list(processes)
    roles = _roles_with_inherited_engine(infos)
    multi_host = len({info.host for info in infos}) > 1
    records = []
    for info in infos:
        role = roles[(info.host, info.pid)]
        if role.role in skipped:
            continue
        label = f"{info.host} " if multi_host else ""
        label += f"{role.rank or role.role} [{info.pid}]"
        for variable, want in expected.items():
            actual, status, reason = _judge(info, role, variable, want)
            records.append(
                {
                    "host": info.host,
                    "pid": info.pid,
                    "ppid": info.ppid,
                    "role": str(role.role),
                    "engine": role.engine,
                    "rank": role.rank,
                    "process": label,
                    "variable": variable,
                    "expected": want,
                    "actual": actual,
                    "status": status,
                    "reason": reason,
                    "_order": (_ROLE_ORDER[role.role], tuple(n for _, n in role.ranks), info.pid),
                }
            )
    records.sort(key=lambda r: (r["host"], r["_order"]))
    frame = pd.DataFrame(records, columns=[*_FRAME_COLUMNS, "_order"]).drop(columns="_order")
    return EnvReport(frame=frame, expected=tuple(expected.items()))


def _roles_with_inherited_engine(infos: Sequence[ProcessLike]) -> dict[tuple[str, int], ProcessRole]:
    """Classify each process; a child with no engine of its own inherits its parent's."""
    roles = {(p.host, p.pid): classify_process(p.cmdline, p.environ) for p in infos}
    parents = {(p.host, p.pid): (p.host, p.ppid) for p in infos}
    for key, role in roles.items():
        seen = {key}
        parent = parents.get(key)
        while role.engine is None and parent in roles and parent not in seen:
            seen.add(parent)
            if roles[parent].engine is not None:
                roles[key] = role = replace(role, engine=roles[parent].engine)
            parent = parents.get(parent)
    return roles


def _judge(
    info: ProcessLike, role: ProcessRole, variable: str, want: str | None
) -> tuple[str | None, str, str | None]:
    # A zombie reads as an empty environment with an error: unreadable, not "missing".
    if info.environ is None or (info.error and not info.environ):
        return None, "unreadable", info.error or "the environment could not be read"
    actual = info.environ.get(variable)
    if actual is None:
        return None, "missing", None
    if want is None or actual == want:
        return actual, "ok", None
    return actual, "overridden", _override_reason(role, variable)


def _override_reason(role: ProcessRole, variable: str) -> str | None:
    known = _OVERRIDE_INDEX.get((role.engine or "", variable))
    if known is None or role.role not in _SPAWNED_ROLES:
        return None
    return known.reason(role.role)


# --- NCCL_DEBUG=INFO echoes ------------------------------------------------------

# "gpu-a:1234:1240 [3] NCCL INFO NCCL_ALGO set by environment to Ring": host, pid, tid,
# CUDA device. Anything may precede it (timestamps, vLLM's "(VllmWorker rank=1 pid=..)").
_NCCL_PREFIX = r"(?P<host>[^\s:\[\]()]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<device>\d+)\] NCCL INFO "
_NCCL_ECHO = re.compile(
    _NCCL_PREFIX + r"(?P<variable>NCCL_[A-Z0-9_]+) set (?:by environment )?to (?P<value>.*?)\s*$"
)
_NCCL_ANY = re.compile(_NCCL_PREFIX)
_NCCL_COMM = re.compile(r"ncclCommInitRank comm \S+ rank (?P<rank>\d+) nranks (?P<nranks>\d+)")
# NCCL reads these case-insensitively (NCCL_ALGO=ring and Ring are the same request).
_CASE_INSENSITIVE = frozenset({"NCCL_ALGO", "NCCL_PROTO"})
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


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

    Integer parameters end with a period (``NCCL_IB_DISABLE set by environment to
    0.``), string ones do not; the period is not part of the value.
    """
    echoes = []
    for line_no, line in enumerate(lines, start=1):
        match = _NCCL_ECHO.search(_ANSI.sub("", line).rstrip("\r\n"))
        if match is None:
            continue
        value = match.group("value")
        if value.endswith(".") and value[:-1].lstrip("-").isdigit():
            value = value[:-1]
        echoes.append(
            NcclEnvEcho(
                match.group("host"),
                int(match.group("pid")),
                int(match.group("tid")),
                int(match.group("device")),
                match.group("variable"),
                value,
                line_no,
            )
        )
    return echoes


def nccl_env_frame(
    lines: Iterable[str], expected: Mapping[str, str | None], *, report: EnvReport | None = None
) -> pd.DataFrame:
    """Compare each NCCL process's echoed variables with ``expected``.

    One row per (process that logged NCCL INFO, expected ``NCCL_*`` variable), with
    columns host, pid, device, nccl_rank, role, rank, variable, log_value, expected,
    status, reason. ``missing`` means the process logged NCCL INFO lines but never
    echoed the variable: NCCL did not see it. ``report`` (an :class:`EnvReport`) adds
    role and rank by host and pid, and override reasons.
    """
    wanted = {
        name: value
        for name, value in expected.items()
        if name.startswith("NCCL_") and not name.startswith("NCCL_DEBUG")
    }
    seen: dict[tuple[str, int], dict[str, object]] = {}
    values: dict[tuple[str, int, str], str] = {}
    for line in lines:
        text = _ANSI.sub("", line)
        head = _NCCL_ANY.search(text)
        if head is None:
            continue
        key = (head.group("host"), int(head.group("pid")))
        process = seen.setdefault(key, {"device": int(head.group("device")), "nccl_rank": None})
        comm = _NCCL_COMM.search(text)
        if comm and process["nccl_rank"] is None:
            process["nccl_rank"] = f"{comm.group('rank')}/{comm.group('nranks')}"
        for echo in parse_nccl_env([text]):
            values.setdefault((echo.host, echo.pid, echo.variable), echo.value)
    known = _report_roles(report)
    records = []
    for (host, pid), process in seen.items():
        role = known.get((host, pid), ProcessRole(Role.OTHER))
        for variable, want in wanted.items():
            got = values.get((host, pid, variable))
            if got is None:
                status, reason = "not_logged", None
            elif (
                want is None or got == want or (variable in _CASE_INSENSITIVE and got.lower() == want.lower())
            ):
                status, reason = "ok", None
            else:
                status, reason = "overridden", _override_reason(role, variable)
            records.append(
                {
                    "host": host,
                    "pid": pid,
                    "device": process["device"],
                    "nccl_rank": process["nccl_rank"],
                    "role": str(role.role) if (host, pid) in known else None,
                    "rank": role.rank,
                    "variable": variable,
                    "log_value": got,
                    "expected": want,
                    "status": status,
                    "reason": reason,
                }
            )
    columns = [
        "host",
        "pid",
        "device",
        "nccl_rank",
        "role",
        "rank",
        "variable",
        "log_value",
        "expected",
        "status",
        "reason",
    ]
    frame = pd.DataFrame(records, columns=columns)
    return frame.sort_values(["host", "device", "pid", "variable"], kind="stable").reset_index(drop=True)


def _report_roles(report: EnvReport | None) -> dict[tuple[str, int], ProcessRole]:
    if report is None:
        return {}
    rows = report.frame.drop_duplicates(["host", "pid"])
    return {
        (row.host, int(row.pid)): ProcessRole(
            Role(row.role), _text_or_none(row.engine), _text_or_none(row.rank)
        )
        for row in rows.itertuples(index=False)
    }


def _text_or_none(value: object) -> str | None:
    """pandas stores a missing string as NaN; give it back as None."""
    return value if isinstance(value, str) else None
