"""Did every rank get the environment we meant to give it? Pure checks, and the probe that reads a server.

Pure: roles, overrides, survivors, report (:func:`check_env`), nccl. Shell: probe (:func:`env_report`).
"""

from __future__ import annotations

from toolkit.moves.envcheck.nccl import NcclEnvEcho, nccl_env_frame, parse_nccl_env
from toolkit.moves.envcheck.overrides import KNOWN_OVERRIDES, KnownOverride
from toolkit.moves.envcheck.probe import env_report
from toolkit.moves.envcheck.report import STATUS_CODES, EnvReport, check_env
from toolkit.moves.envcheck.roles import ProcessLike, ProcessRole, Role, classify_process

__all__ = ["ProcessLike", "Role", "ProcessRole", "KnownOverride", "KNOWN_OVERRIDES", "STATUS_CODES",
           "EnvReport", "NcclEnvEcho", "classify_process", "check_env", "parse_nccl_env", "nccl_env_frame",
           "env_report"]
