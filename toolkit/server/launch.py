"""Launch a ServerSpec on a Host and hold it as a Server that stops its whole process tree.

``launch`` checks the port first (a stale server on the port makes the new one die after
minutes of model loading, or worse, makes the benchmark hit the old one), starts the
command detached with its own log file, and returns a :class:`Server`. Leaving the
``with`` block stops every process the server started, TP ranks included.

>>> import sys, tempfile
>>> spec = ServerSpec.command([sys.executable, "-c", "import time; time.sleep(60)"], port=18431)
>>> with launch(Host.local(), spec, log_dir=tempfile.mkdtemp()) as server:
...     server.is_alive()
True
>>> server.is_alive()
False
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

from toolkit.errors import InvalidFlag, PortInUse
from toolkit.host.host import Host, ProcessHandle, StopReport
from toolkit.host.shell import quote_path
from toolkit.server.spec import MISSING, ServerSpec

__all__ = [
    "ServerSpec",
    "MISSING",
    "Server",
    "MultiNodeServer",
    "launch",
    "launch_multinode",
    "DEFAULT_LOG_DIR",
]

#: Where server logs go on the host unless ``log_dir`` says otherwise.
DEFAULT_LOG_DIR = "/tmp/toolkit-logs"


def _url(address: str, port: int) -> str:
    return f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}"


def _log_name(spec: ServerSpec, suffix: str = "") -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.describe()).strip("-.")[:60] or "server"
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{time.time_ns() // 1_000_000 % 1000:03d}"
    return f"{spec.engine}-{slug}{suffix}-{stamp}.log"


def _delegate(module: str, name: str) -> Callable[..., Any]:
    """A function of a module imported on first use: readiness and envcheck import launch, not back."""
    return cast("Callable[..., Any]", getattr(importlib.import_module(module), name))


@dataclass
class Server:
    """A launched server: where it answers (``url``), its process, its log. Stops on ``with`` exit."""

    host: Host
    spec: ServerSpec
    process: ProcessHandle
    url: str
    log_path: str
    stop_report: StopReport | None = field(default=None, repr=False)
    #: the last :func:`toolkit.server.wait.wait_ready` report: views read it, so a panel turns
    #: ready whoever waited (a notebook cell, a sweep, a bisect probe)
    readiness: Any = field(default=None, repr=False)
    #: when stop() began: what the ranks log while dying after this is not a failure
    stop_requested_at: float | None = field(default=None, repr=False)
    _follower: Any = field(default=None, repr=False, compare=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def started_at(self) -> float:
        return self.process.started_at

    def is_alive(self) -> bool:
        """Whether the launched process still runs (it may still be loading, or hung)."""
        return self.host.is_alive(self.process)

    def log_tail(self, lines: int = 50) -> list[str]:
        """The last ``lines`` lines of the server log."""
        text = self.host.run(f"tail -n {int(lines)} -- {quote_path(self.log_path)}", check=False).stdout
        return text.splitlines()

    def stop(self, *, grace_s: float = 10.0) -> StopReport:
        """Stop the server's whole process tree (SIGTERM, SIGKILL after ``grace_s``); idempotent."""
        if self.stop_requested_at is None:
            self.stop_requested_at = time.time()
        report = self.host.stop(self.process, grace_s=grace_s)
        if self._follower is not None:
            self._follower.stop()
        if self.stop_report is None:
            self.stop_report = report
        return report

    def wait_ready(self, **kwargs: Any) -> Any:
        """Block until the server is ready or has failed: see :func:`toolkit.server.wait.wait_ready`."""
        return _delegate("toolkit.server.wait", "wait_ready")(self, **kwargs)

    def follow(self) -> Any:
        """The server's one :class:`toolkit.server.follow.LogFollower`, started; shared by wait_ready and widgets.

        One ``tail -F`` channel per server, however many views watch it; it is stopped
        with the server.
        """
        from toolkit.server.follow import LogFollower

        follower = self._follower
        if follower is None or follower.finished.is_set():
            engine = self.spec.engine if self.spec.engine in ("sglang", "vllm") else "auto"
            follower = self._follower = LogFollower(self.host, self.log_path, engine=engine)
            follower.start()
        return follower

    def env_report(self, expected: Any, **kwargs: Any) -> Any:
        """Expected vs observed environment of every process of the server: see :mod:`toolkit.envcheck`."""
        return _delegate("toolkit.envcheck", "env_report")(self, expected, **kwargs)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _check_port(host: Host, port: int) -> None:
    holder = host.port_holder(port)
    if holder is None:
        return
    pid, command = holder
    who = f"pid {pid} ({command})" if pid else command
    raise PortInUse(
        f"port {port} on {host.name} is held by {who}; stop it or pass port=...",
        host=host.name,
        port=port,
        pid=pid or None,
        holder=command,
        hint=(
            f"stop the holder (host.stop({pid}) if it is ours, or `kill {pid}` on the host), or choose another "
            f"port: ServerSpec.sglang(..., port={port + 1}) or spec.with_flags({{'--port': {port + 1}}})"
            if pid
            else f"find the holder as root (`ss -ltnp 'sport = :{port}'`), or choose another port"
        ),
    )


def _start(host: Host, spec: ServerSpec, log_dir: str | None, suffix: str = "") -> Server:
    log_path = f"{(log_dir or DEFAULT_LOG_DIR).rstrip('/')}/{_log_name(spec, suffix)}"
    handle = host.start_detached(spec.command(), log_path=log_path)
    return Server(host, spec, handle, _url(host.address, spec.port), log_path)


def launch(
    host: Host, spec: ServerSpec, *, log_dir: str | None = None, check_port: bool = True, validate: bool = True
) -> Server:
    """Start ``spec`` on ``host``, detached, logging to ``log_dir`` (default /tmp/toolkit-logs on the host).

    Before anything starts: the port is checked, raising PortInUse naming the holder's pid
    and command; then the flags are checked against the engine's own ``--help`` on the host
    (cached per build; ``validate=False`` skips it), raising InvalidFlag with the valid spellings.
    A misspelt flag costs seconds here instead of minutes of weight loading.
    """
    if check_port:
        _check_port(host, spec.port)
    if validate:
        from toolkit.server.preflight import validate_spec

        validate_spec(host, spec)
    return _start(host, spec, log_dir)


@dataclass
class MultiNodeServer:
    """One server spread over several hosts (SGLang ``--nnodes``); node 0 serves HTTP."""

    nodes: tuple[Server, ...]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    @property
    def spec(self) -> ServerSpec:
        return self.nodes[0].spec

    @property
    def host(self) -> Host:
        return self.nodes[0].host

    @property
    def pid(self) -> int:
        return self.nodes[0].pid

    def is_alive(self) -> bool:
        """True only if every node still runs: one dead node stalls the others' collectives."""
        return all(node.is_alive() for node in self.nodes)

    def stop(self, *, grace_s: float = 10.0) -> tuple[StopReport, ...]:
        """Stop every node, in parallel (each may wait ``grace_s`` for SIGTERM); idempotent."""
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            return tuple(pool.map(lambda node: node.stop(grace_s=grace_s), self.nodes))

    def wait_ready(self, **kwargs: Any) -> Any:
        """Wait for node 0, which serves HTTP once all nodes joined: see :func:`toolkit.server.wait.wait_ready`."""
        return self.nodes[0].wait_ready(**kwargs)

    def __enter__(self) -> MultiNodeServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def launch_multinode(
    hosts: Sequence[Host],
    spec: ServerSpec,
    *,
    dist_init_port: int = 20000,
    dist_init_addr: str | None = None,
    log_dir: str | None = None,
    check_port: bool = True,
    validate: bool = True,
) -> MultiNodeServer:
    """Launch ``spec`` on every host with ``--nnodes N --node-rank i --dist-init-addr FIRST:PORT``.

    ``dist_init_addr`` defaults to the first host's address; pass the cluster-internal IP when
    the nodes reach each other by another name. If any node fails to start, the started ones
    are stopped before the error is raised.
    """
    if spec.engine not in ("sglang", "command"):
        raise InvalidFlag(
            f"launch_multinode speaks SGLang's --nnodes/--node-rank/--dist-init-addr, not {spec.engine}",
            hint="vLLM spreads over nodes through a Ray cluster: start Ray on each host, then launch() on the head",
        )
    if not hosts:
        raise InvalidFlag("launch_multinode needs at least one host")
    if validate:
        from toolkit.server.preflight import validate_spec

        validate_spec(hosts[0], spec)
    address = dist_init_addr or hosts[0].address
    init = f"[{address}]:{dist_init_port}" if ":" in address else f"{address}:{dist_init_port}"
    if check_port:
        _check_port(hosts[0], dist_init_port)
        for host in hosts:
            _check_port(host, spec.port)
    started: list[Server] = []
    try:
        for rank, host in enumerate(hosts):
            node_spec = spec.with_flags(
                {"--nnodes": len(hosts), "--node-rank": rank, "--dist-init-addr": init}
            )
            started.append(_start(host, node_spec, log_dir, suffix=f"-node{rank}"))
    except BaseException:
        if started:
            MultiNodeServer(tuple(started)).stop()
        raise
    return MultiNodeServer(tuple(started))
