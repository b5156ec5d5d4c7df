"""A renamed process's environment, read from a source that survived the rename, pure.

vLLM renames its engine core with setproctitle (``VLLM::EngineCore``: vllm 0.25.0
vllm/v1/engine/core.py:1166-1171 through vllm/utils/system_utils.py:184-198) and its TP
workers (``VLLM::Worker_TP1``: vllm/v1/executor/multiproc_executor.py:1036-1043); SGLang its
schedulers (``sglang::scheduler_TP0``). setproctitle writes the title over argv *and* the
environment, so ``/proc/PID/environ`` shows NULs or the title's tail while ``os.environ`` (what
NCCL reads) keeps every variable. On the first real vLLM run (issue 23) the toolkit read that as
"NCCL_ALGO missing in the engine core", which was false. So an absence there is never evidence:
:func:`surviving_environ` reads an unrenamed sibling (vLLM's resource tracker beside its engine
core), else the parent, plus the release's writes on the way (``toolkit.engines``); NCCL's own
``NCCL_DEBUG=INFO`` echo outranks both for ``NCCL_*`` (:meth:`EnvReport.with_nccl_logs`).

>>> from types import SimpleNamespace as P
>>> core = P(host="h", pid=11, ppid=10, cmdline=("VLLM::EngineCore",), environ={}, error=None)
>>> server = P(host="h", pid=10, ppid=1, cmdline=("vllm", "serve", "m"), environ={"NCCL_ALGO": "Ring"}, error=None)
>>> overwritten(core, server)
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from toolkit.moves.envcheck.overrides import predicted_environ
from toolkit.moves.envcheck.roles import ProcessLike, ProcessRole, Role, is_titled

__all__ = ["Surviving", "OVERWRITTEN", "overwritten", "surviving_environ"]

#: What a row says when the process's /proc environment is the title's memory.
OVERWRITTEN = ("its /proc/PID/environ was partly overwritten when the engine renamed the process with setproctitle, "
               "so a variable's absence there says nothing")
# Roles whose processes the engine did not rename and that start from the parent's environment.
_PLAIN_ROLES = frozenset({Role.HELPER, Role.OTHER})


@dataclass(frozen=True)
class Surviving:
    """An environment read from somewhere other than the process's own ``/proc``, and from where."""

    environ: Mapping[str, str]
    source: str  # "sibling 4243", "parent 4240": the row's ``source`` column


def overwritten(info: ProcessLike, parent: ProcessLike | None) -> bool:
    """Whether ``info``'s ``/proc`` environment may be, in part, its process title's memory.

    Every titled process: on real vLLM 0.25.0 (the H200 field run, issue 23) the engine core's environ
    began with 4,576 NUL bytes, then held the later variables intact; how much is lost depends on the
    lengths of argv and environment, so no size rule can tell. ``parent`` is kept for callers that judge
    a chain; an untitled process with an empty environment (``env -i``) is taken at its word.
    """
    del parent  # the title alone decides (see above)
    return info.environ is not None and is_titled(info.cmdline)


def surviving_environ(info: ProcessLike, role: ProcessRole, infos: Sequence[ProcessLike],
                      roles: Mapping[tuple[str, int], ProcessRole], release: str | None) -> Surviving | None:
    """The best surviving source of ``info``'s environment (see the module), or None when there is none."""
    by_key = {(p.host, p.pid): p for p in infos}
    parent = by_key.get((info.host, info.ppid))
    for sibling in infos:
        if (sibling.host == info.host and sibling.ppid == info.ppid and sibling.pid != info.pid
                and sibling.environ and roles[(sibling.host, sibling.pid)].role in _PLAIN_ROLES
                and not overwritten(sibling, parent)):
            return Surviving(predicted_environ(role, sibling.environ, release), f"sibling {sibling.pid}")
    if parent is not None and parent.environ and not overwritten(parent, by_key.get((parent.host, parent.ppid))):
        return Surviving(predicted_environ(role, parent.environ, release), f"parent {parent.pid}")
    return None
