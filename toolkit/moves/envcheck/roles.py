"""What is this process? Role, engine and rank from its command line (process titles), pure.

SGLang and vLLM set process titles (``sglang::scheduler_DP1_TP3``, ``VLLM::Worker_TP1``), torchrun
ranks carry ``RANK``, our simulator ``--tp-rank``; a child with no title inherits its parent's engine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

__all__ = ["ProcessLike", "Role", "ProcessRole", "classify_process", "classify_tree", "is_titled"]


class ProcessLike(Protocol):
    """What :func:`check_env` reads from a process; ``toolkit.host.host.ProcessInfo`` fits."""

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
    """What a process is; ``rank`` as the engine spells it ("TP3", "DP1 TP3", "RANK2"), ``ranks`` to sort."""

    role: Role
    engine: str | None = None
    rank: str | None = None
    ranks: tuple[tuple[str, int], ...] = ()


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
    >>> classify_process(("/venv/bin/python3", "/venv/bin/vllm", "serve", "Qwen/Qwen3-8B")).engine
    'vllm'
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
    if program.startswith("python") and len(argv) > 1 and not argv[1].startswith("-"):
        # A console script runs through its #! line: /proc shows `python /venv/bin/torchrun ...`.
        argv = argv[1:]
        program = argv[0].rsplit("/", 1)[-1]
    if program in _SHELLS:
        return ProcessRole(Role.SHELL)
    if program in _HELPERS:
        return ProcessRole(Role.HELPER)
    module = _python_module(argv)
    rest = argv[1:]
    if module == "multiprocessing.resource_tracker" or (
            module is None and _runs_code(argv, "resource_tracker")):
        return ProcessRole(Role.HELPER)
    if module == "sglang.launch_server" or (program == "sglang" and rest[:1] == ["serve"]):
        return ProcessRole(Role.SERVER, "sglang")
    if module == "vllm.entrypoints.openai.api_server" or (
            (program == "vllm" or module == "vllm.entrypoints.cli.main") and "serve" in rest):
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
    return ranked if ranked.rank is not None else ProcessRole(Role.OTHER)


def is_titled(cmdline: Sequence[str]) -> bool:
    """Whether the process renamed itself with an engine's title (setproctitle leaves one word).

    >>> is_titled(("VLLM::EngineCore",)), is_titled(("python", "-m", "vllm.entrypoints.cli.main", "serve"))
    (True, False)
    """
    argv = [arg for arg in cmdline if arg.strip()]
    return len(argv) == 1 and _classify_title(argv[0].strip()) is not None


def _classify_title(title: str) -> ProcessRole | None:
    sglang = _SGLANG_TITLE.match(title)
    if sglang:
        what = sglang.group("what")
        if what == "scheduler":
            return _from_rank_parts(Role.WORKER, "sglang", sglang.group("rest") or "")
        role = {"detokenizer": Role.DETOKENIZER, "detokenizer_router": Role.DETOKENIZER,
                "tokenizer_worker": Role.TOKENIZER, "data_parallel_controller": Role.DP_CONTROLLER,
                }.get(what, Role.OTHER)
        return ProcessRole(role, "sglang")
    vllm = _VLLM_TITLE.match(title)
    if vllm and vllm.group("prefix") != "sglang":
        role = {"Worker": Role.WORKER, "EngineCore": Role.ENGINE_CORE, "APIServer": Role.API_SERVER,
                "DPCoordinator": Role.DP_CONTROLLER}[vllm.group("what")]
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


def _ranked(role: Role, engine: str | None, argv: Sequence[str], environ: Mapping[str, str] | None
            ) -> ProcessRole:
    """Our simulator's --tp-rank/--rank, torch's --local-rank, or torchrun's RANK/LOCAL_RANK."""
    for option, kind in (("--tp-rank", "TP"), ("--rank", "RANK"), ("--local-rank", "LOCAL_RANK"),
                         ("--local_rank", "LOCAL_RANK")):
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


def classify_tree(infos: Sequence[ProcessLike]) -> dict[tuple[str, int], ProcessRole]:
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
