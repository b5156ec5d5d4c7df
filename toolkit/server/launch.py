"""Launch a ServerSpec on a Host, a Slurm target or a container target, held as a Server.

The port is checked first: a stale server on it makes the new one die after minutes of model
loading, or makes the benchmark hit the old one.

>>> import sys, tempfile
>>> spec = ServerSpec.command([sys.executable, "-c", "import time; time.sleep(60)"], port=18431)
>>> with launch(Host.local(), spec, log_dir=tempfile.mkdtemp()) as server:
...     server.is_alive()
True
>>> server.is_alive()
False
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence

from toolkit.errors import InvalidFlag, PortInUse
from toolkit.host import launches
from toolkit.host.host import Host
from toolkit.host.place import Target
from toolkit.host.slurm import SlurmTarget
from toolkit.host.slurm_script import NodeFlags
from toolkit.server import exit_guard, port_owner, registry
from toolkit.server import log_dir as logs
from toolkit.server.preflight import validate_spec
from toolkit.server.server import MultiNodeServer, Server
from toolkit.server.spec import ServerSpec

__all__ = ["launch", "launch_multinode", "DEFAULT_LOG_DIR"]

#: Where server logs go on the host unless ``log_dir`` says otherwise (private: see toolkit.server.log_dir).
DEFAULT_LOG_DIR = logs.DEFAULT_LOG_DIR


def _url(address: str, spec: ServerSpec) -> str:
    """The host's address, or the loopback address the server binds on this machine (``--host 127.0.0.2``
    listens there only: ``localhost`` would be refused and the wait would time out)."""
    bind = spec.flag("--host")
    if isinstance(bind, str) and bind.startswith("127.") and (address == "localhost" or address.startswith("127.")):
        address = bind
    return f"http://[{address}]:{spec.port}" if ":" in address else f"http://{address}:{spec.port}"


def _log_name(spec: ServerSpec, suffix: str = "") -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.describe()).strip("-.")[:60] or "server"
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{time.time_ns() // 1_000_000 % 1000:03d}"
    return f"{spec.engine}-{slug}{suffix}-{stamp}.log"


def _check_port(host: Target, port: int) -> None:
    holder = host.port_holder(port)
    if holder is None:
        return
    pid, command = holder
    who = f"pid {pid} ({command})" if pid else command
    records = host.registry_host
    recorded = registry.orphan_holding(records, pid) if records is not None else None
    if recorded is not None and records is not None:
        mine = port_owner.whose(pid, port_owner.holder_owner(host, pid))
        raise PortInUse(f"port {port} on {host.name} is held by {who}: {registry.explain(recorded)}",
                        host=host.name, port=port, pid=pid, holder=command,
                        hint=f"{mine}: " * (mine is not None) + registry.stop_hint(recorded, records))
    hint = (port_owner.hint(port, pid, port_owner.holder_owner(host, pid)) if pid
            else f"find the holder as root (`ss -ltnp 'sport = :{port}'`), or choose another port")
    raise PortInUse(f"port {port} on {host.name} is held by {who}; stop it or pass port=...", host=host.name,
                    port=port, pid=pid or None, holder=command, hint=hint)


def _log_path(target: Target, spec: ServerSpec, log_dir: str | None, suffix: str = "") -> str:
    """A new log file, mode 0600, in the checked private folder (UnsafeLogDir if it is not private)."""
    path = f"{logs.prepare(target, log_dir).rstrip('/')}/{_log_name(spec, suffix)}"
    logs.create_log_file(target, path)
    return path


def _start(target: Target, spec: ServerSpec, log_dir: str | None, *, check_port: bool, suffix: str = "",
           outlive: bool = False) -> Server:
    log_path = _log_path(target, spec, log_dir, suffix)
    marker = uuid.uuid4().hex  # in the server's environment: what escapes its group is still found at stop
    placed = target.start_server(spec.command(), log_path=log_path, port=spec.port, check_port=check_port,
                                 env={launches.LAUNCH_MARKER: marker})
    placement = placed.placement
    server = Server(placed.place, spec, placed, _url(placement.address, spec), placed.log_path, placement)
    records = target.registry_host
    if records is not None:  # recorded on its host, stopped when this driver ends (issue 20)
        server.marker = marker
        server.recorded = registry.register(records, placed, spec, key=id(server), stop=server.stop, outlive=outlive)
    elif not outlive:  # a Slurm job or a container: its scheduler or engine lists it; stopped when this driver ends
        exit_guard.hold(id(server), server.stop)
    return server


def launch(host: Target, spec: ServerSpec, *, log_dir: str | None = None, check_port: bool = True,
           validate: bool = True, outlive: bool = False) -> Server:
    """Start ``spec`` on ``host``, detached, logging to ``log_dir`` (default /tmp/toolkit-logs-UID on the host).

    The port and the flags (against the engine's own ``--help``; ``validate=False`` skips it) are checked
    first: a misspelt flag costs seconds, not minutes of weight loading. The launch is recorded on the
    host (``python -m toolkit ps``) and stopped when this driver ends, even by SIGTERM, unless ``outlive``.
    """
    if not isinstance(spec, ServerSpec):  # issue 25: a string here failed deep inside
        raise TypeError(f"launch(host, spec={spec!r:.80}): spec is a ServerSpec, e.g. ServerSpec.sglang('org/model', "
                        "tp=8) or ServerSpec.simulator()")
    if check_port:
        _check_port(host, spec.port)
    if validate:
        validate_spec(host, spec)
    return _start(host, spec, log_dir, check_port=check_port, outlive=outlive)


def launch_multinode(hosts: Sequence[Host] | SlurmTarget, spec: ServerSpec, *, dist_init_port: int = 20000,
                     dist_init_addr: str | None = None, log_dir: str | None = None, check_port: bool = True,
                     validate: bool = True) -> MultiNodeServer:
    """Launch ``spec`` on every node with ``--nnodes N --node-rank i --dist-init-addr FIRST:PORT``.

    ``hosts``: a list (one server each), or a :class:`SlurmTarget` with ``nodes=N`` (one job whose tasks
    fill in their rank from ``SLURM_NODEID``, as SGLang's Slurm recipe does). ``dist_init_addr``
    defaults to the first node's address. If a node fails to start, the started ones are stopped.
    """
    if spec.engine not in ("sglang", "command"):
        raise InvalidFlag(
            f"launch_multinode speaks SGLang's --nnodes/--node-rank/--dist-init-addr, not {spec.engine}",
            hint="vLLM spreads over nodes through a Ray cluster: start Ray on each host, then launch() on the head",
        )
    if not isinstance(hosts, Sequence):  # one Slurm job over N nodes
        return _multinode_job(hosts, spec, NodeFlags(dist_init_port, dist_init_addr, hosts.bind_node_address),
                              log_dir=log_dir, check_port=check_port, validate=validate)
    if not hosts:
        raise InvalidFlag("launch_multinode needs at least one host")
    if validate:
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
            node = spec.with_flags({"--nnodes": len(hosts), "--node-rank": rank, "--dist-init-addr": init})
            started.append(_start(host, node, log_dir, check_port=check_port, suffix=f"-node{rank}"))
    except BaseException:
        if started:
            MultiNodeServer(tuple(started)).stop()
        raise
    return MultiNodeServer(tuple(started))


def _multinode_job(target: SlurmTarget, spec: ServerSpec, flags: NodeFlags, *, log_dir: str | None,
                   check_port: bool, validate: bool) -> MultiNodeServer:
    """One Slurm job over the target's nodes; each fills in its rank and the first node's address."""
    if validate:
        validate_spec(target, spec)
    node_spec = spec.with_flags({"--nnodes": target.request.nodes, "--node-rank": False, "--dist-init-addr": False})
    handles = target.start_job(node_spec.command(), log_path=_log_path(target, spec, log_dir),
                               port=spec.port if check_port else None, node_flags=flags)
    return MultiNodeServer(tuple(Server(h.place, node_spec, h, _url(h.placement.address, node_spec),
                                        h.log_path, h.placement) for h in handles))
