"""Did every rank get the environment we meant to give it? Pure checks, and the probe that reads a server.

- :mod:`~toolkit.envcheck.roles` (pure): a process's role, engine and rank from its
  title or command line (``sglang::scheduler_TP3`` is TP3).
- :mod:`~toolkit.envcheck.overrides` (pure data): the variables SGLang and vLLM write
  into their workers, with the code that does it.
- :mod:`~toolkit.envcheck.report` (pure): :func:`check_env` -> :class:`EnvReport`, one
  row per process and variable: ok, missing, overridden or unreadable, and why.
- :mod:`~toolkit.envcheck.nccl` (pure): what NCCL itself echoed with ``NCCL_DEBUG=INFO``.
- :mod:`~toolkit.envcheck.probe`: :func:`env_report`, which reads a running server's
  process tree (every node of a multi-node server) and its log on the host.

:func:`env_report` is imported on first use, so the pure modules stay importable
without SSH libraries.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from toolkit.envcheck.nccl import NcclEnvEcho, nccl_env_frame, parse_nccl_env
from toolkit.envcheck.overrides import KNOWN_OVERRIDES, KnownOverride
from toolkit.envcheck.report import STATUS_CODES, EnvReport, check_env
from toolkit.envcheck.roles import ProcessLike, ProcessRole, Role, classify_process

if TYPE_CHECKING:
    from toolkit.envcheck.probe import env_report

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
    "env_report",
]


def __getattr__(name: str) -> Any:
    if name == "env_report":
        value = importlib.import_module("toolkit.envcheck.probe").env_report
        globals()[name] = value
        return value
    raise AttributeError(f"module 'toolkit.envcheck' has no attribute {name!r}")
