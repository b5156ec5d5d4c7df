"""Did every rank get the environment we meant to give it? Pure checks, and the probe that reads a server.

- :mod:`~toolkit.moves.envcheck.roles` (pure): a process's role, engine and rank from its
  title or command line (``sglang::scheduler_TP3`` is TP3).
- :mod:`~toolkit.moves.envcheck.overrides` (pure): why a variable differs, from the engine
  profiles' writes (release, condition, source line), and what ``/proc`` cannot show.
- :mod:`~toolkit.moves.envcheck.report` (pure): :func:`check_env` -> :class:`EnvReport`, one
  row per process and variable: ok, missing, overridden or unreadable, and why.
- :mod:`~toolkit.moves.envcheck.nccl` (pure): what NCCL itself echoed with ``NCCL_DEBUG=INFO``.
- :mod:`~toolkit.moves.envcheck.probe`: :func:`env_report`, which reads a running server's
  process tree (every node of a multi-node server) and its log on the host.

"""

from __future__ import annotations

from toolkit.moves.envcheck.nccl import NcclEnvEcho, nccl_env_frame, parse_nccl_env
from toolkit.moves.envcheck.overrides import KNOWN_OVERRIDES, KnownOverride
from toolkit.moves.envcheck.probe import env_report
from toolkit.moves.envcheck.report import STATUS_CODES, EnvReport, check_env
from toolkit.moves.envcheck.roles import ProcessLike, ProcessRole, Role, classify_process

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
