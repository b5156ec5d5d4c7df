"""Read a running server's environment where it runs: every process of every node, and NCCL's echoes.

One ``Host.process_tree`` round trip per node (all nodes at once), the ``NCCL_DEBUG=INFO`` lines
filtered on the host itself. A node that cannot be reached, or a process that exited or belongs to
another user, becomes an ``unreadable`` row whose ``reason`` says which, never a silent gap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from toolkit.errors import HostError
from toolkit.host.place import Place
from toolkit.host.procs import ProcessInfo
from toolkit.journal import Journal
from toolkit.moves.envcheck.nccl import nccl_lines_script
from toolkit.moves.envcheck.report import EnvReport, check_env
from toolkit.moves.envcheck.roles import Role, classify_tree
from toolkit.server.server import MultiNodeServer, Server

__all__ = ["env_report"]

Expected = Mapping[str, "str | None"] | Iterable[str]
# Roles worth reading on a host that is searched rather than walked from a known pid.
_ENGINE_ROLES = frozenset({Role.SERVER, Role.WORKER, Role.ENGINE_CORE, Role.API_SERVER, Role.DP_CONTROLLER,
                           Role.LAUNCHER, Role.TOKENIZER, Role.DETOKENIZER})


def env_report(server: Server | MultiNodeServer, expected: Expected, *, nccl_log: bool = True,
               hosts: Sequence[Place] | None = None, journal: Journal | None = None, title: str | None = None,
               hypothesis: str | None = None) -> EnvReport:
    """Expected versus actual environment of every process of ``server``, per host, pid and rank.

    ``expected`` maps variables to values (``None``: any value, but set), or lists names. Each node
    is read where it runs (``srun`` into a Slurm job, ``docker exec``); ``hosts`` adds hosts whose
    engine processes are outside the tree (vLLM workers that Ray started elsewhere). With ``nccl_log``,
    NCCL's echoes are compared too (``report.nccl``); with ``journal``, the report is a ``nccl_env``
    step. Call it once the server is ready: ranks that have not started cannot be read.

    >>> spec = ServerSpec.simulator(tp=2).with_env({"NCCL_ALGO": "Ring"})  # doctest: +SKIP
    >>> with launch(Host.local(), spec) as server:  # doctest: +SKIP
    ...     server.wait_ready(timeout_s=60)
    ...     report = env_report(server, {"NCCL_ALGO": "Ring", "NCCL_CUMEM_ENABLE": "1"})
    >>> report.summary()  # doctest: +SKIP
    'env check of 3 processes x 2 variables on localhost: 4 ok, 2 overridden, 0 missing, 0 unreadable; ...'
    """
    wanted = _expected(expected)
    nodes: list[Server] = list(server.nodes) if isinstance(server, MultiNodeServer) else [server]
    engine = nodes[0].spec.engine
    jobs = [(node.host, lambda node=node: _tree(node.host, node.pid)) for node in nodes]
    jobs += [(host, lambda host=host: _search(host, engine)) for host in hosts or ()]
    with ThreadPoolExecutor(max_workers=min(len(jobs), 8)) as pool:
        infos = [info for found in pool.map(lambda job: job[1](), jobs) for info in found]
        logs = list(pool.map(_nccl_lines, nodes)) if nccl_log else []
    release = nodes[0].release()  # asked once per host and build (toolkit.server.release)
    report = check_env(infos, wanted, release=release.version)
    by_host: dict[str, list[str]] = {}
    for node, lines in zip(nodes, logs, strict=False):
        by_host.setdefault(node.host.name, []).extend(lines)
    if any(by_host.values()):
        report = report.with_nccl_logs({host: lines for host, lines in by_host.items() if lines})
    if journal is not None:
        _record(journal, report, nodes, hosts or (), title, hypothesis)
    return report


def _expected(expected: Expected) -> dict[str, str | None]:
    if isinstance(expected, Mapping):
        return {str(k): None if v is None else str(v) for k, v in expected.items()}
    if isinstance(expected, str):
        raise TypeError("expected is a mapping {name: value} or a list of names, not one string")
    return {str(name): None for name in expected}


def _unreadable(host: Place, pid: int, why: str) -> list[ProcessInfo]:
    return [ProcessInfo(host.name, pid, 0, (), None, why)]


def _tree(host: Place, pid: int) -> list[ProcessInfo]:
    """The server's tree on one node; a host that cannot be read is one unreadable row, not an exception."""
    try:
        return host.process_tree(pid)
    except HostError as exc:
        return _unreadable(host, pid, f"could not read the process tree of pid {pid} on {host.name}: {exc.message}")


def _search(host: Place, engine: str) -> list[ProcessInfo]:
    """Processes of ``engine`` anywhere on ``host`` (not descendants of a known pid)."""
    try:
        every = host.process_tree(1)
    except HostError as exc:
        return _unreadable(host, 1, f"could not list the processes on {host.name}: {exc.message}")
    roles = classify_tree(every)
    return [info for info in every if roles[(info.host, info.pid)].role in _ENGINE_ROLES
            and roles[(info.host, info.pid)].engine in (engine, "torchrun")]


def _nccl_lines(node: Server) -> list[str]:
    try:
        result = node.host.run(nccl_lines_script(node.log_path), check=False, timeout_s=60)
    except HostError:
        return []  # the tree rows already say the host cannot be read
    return result.stdout.splitlines() if result.ok else []


def _record(journal: Journal, report: EnvReport, nodes: Sequence[Any], hosts: Sequence[Place],
            title: str | None, hypothesis: str | None) -> None:
    spec = nodes[0].spec
    names = list(dict.fromkeys([node.host.name for node in nodes] + [host.name for host in hosts]))
    with journal.step("nccl_env", title or f"environment of {spec.describe()} ({', '.join(names)})",
                      hypothesis=hypothesis or "every process of the server got the expected environment",
                      spec=spec, host=names) as step:
        step.note(str(report))
        if report.nccl is not None:
            shown = report.nccl[report.nccl["status"] != "ok"]
            columns = ["host", "pid", "rank", "variable", "log_value", "expected", "status", "reason"]
            step.note("NCCL echoes not as expected:\n" + (shown[columns].to_string(index=False) if len(shown) else "none"))
        step.set_verdict("confirmed" if report.ok else "refuted", note=report.summary())
