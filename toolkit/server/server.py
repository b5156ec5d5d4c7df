"""A launched server: where it answers, its process tree, its log, and its one state.

A `Server` owns one log follower (however many views watch) and one `ServerState` that the
follower, `wait_ready` and `stop` feed; leaving the ``with`` block stops every process it started.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import InitVar, dataclass, field

from toolkit.errors import HostError, ToolkitError
from toolkit.host import launches
from toolkit.host.host import ProcessHandle, StopReport
from toolkit.host.launches import LaunchRecord
from toolkit.host.place import Place
from toolkit.host.placement import Placement
from toolkit.logs import log_engine
from toolkit.logs.window import LogLedger
from toolkit.redaction import Redactor
from toolkit.server import exit_guard, registry
from toolkit.server.follow import LogFollower
from toolkit.server.http import ProbeOutcome, probe_server
from toolkit.server.logfile import count_lines, tail_lines
from toolkit.server.readiness import ReadinessReport
from toolkit.server.release import DetectedRelease, detect_release
from toolkit.server.spec import ServerSpec
from toolkit.server.state import ServerState, ServerStatus
from toolkit.server.wait import StartupWatch, wait_ready

__all__ = ["Server", "MultiNodeServer"]

@dataclass(eq=False)
class Server:
    """A launched server: where it answers (``url``), its process, its log. Stops on ``with`` exit."""

    host: Place
    spec: ServerSpec
    process: ProcessHandle
    url: str
    log_path: str
    placed: InitVar[Placement | None] = None
    placement: Placement = field(init=False, repr=False)
    state: ServerState = field(init=False, repr=False)
    stop_report: StopReport | None = field(default=None, init=False, repr=False)
    #: its record in the host's launch registry (None: not recorded, e.g. a Slurm job)
    recorded: LaunchRecord | None = field(default=None, init=False, repr=False)
    #: the value of TOOLKIT_LAUNCH in its environment (``launches.LAUNCH_MARKER``), to find what escaped its group
    marker: str | None = field(default=None, init=False, repr=False)
    _follower: LogFollower | None = field(default=None, init=False, repr=False)
    _ledger: LogLedger | None = field(default=None, init=False, repr=False)
    redactor: Redactor = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self, placed: Placement | None) -> None:
        self.placement = placed if placed is not None else Placement.on_host(
            self.host.name, self.host.address, self.process.pid, self.process.command)
        self.state = ServerState(started_at=self.process.started_at)
        # The server's own lines may quote its secrets in any form (SGLang to 0.5.23 logs api_key='...').
        self.redactor = Redactor.of(self.spec.secrets())

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def started_at(self) -> float:
        return self.process.started_at

    @property
    def where(self) -> str:
        """`sim EAGLE3 on localhost (pid 4242, log /tmp/...)`: what an error says of this server."""
        if self.placement.kind == "host":
            return f"{self.spec.describe()} on {self.host.name} (pid {self.pid}, log {self.log_path})"
        return f"{self.spec.describe()} in {self.placement.describe()} (log {self.log_path})"

    def status(self) -> ServerStatus:
        """The server's state now (starting, ready, failed, stopping, stopped, and why)."""
        return self.state.status()

    @property
    def readiness(self) -> ReadinessReport:
        """The readiness report as the server's state has it now."""
        return self.state.readiness()

    def is_alive(self) -> bool:
        """Whether the launched process still runs (it may still be loading, or hung)."""
        return self.host.is_alive(self.process)

    def log_tail(self, lines: int = 50) -> list[str]:
        """The last ``lines`` lines of the server log, redacted (they end up in errors and notes)."""
        return [self.redactor.text(line) for line in tail_lines(self.host, self.log_path, lines)]

    def follow(self) -> LogFollower:
        """The server's one log follower, started; it feeds the server's state and is stopped with the server."""
        with self._lock:
            follower = self._follower
            if follower is None or follower.finished.is_set():
                follower = self._follower = LogFollower(self.host, self.log_path, engine=log_engine(self.spec.engine),
                                                              redact=self.redactor.text)
                follower.subscribe(lambda events: self.state.observe(events, time.time()), replay=True)
                self._ledger = LogLedger()  # hears every line from the first: the ring buffer may drop the early ones
                follower.subscribe(self._ledger)
                follower.start()
            return follower

    @property
    def ledger(self) -> LogLedger:
        """What a journal step keeps of this server's log (metric rows, ready, benign, fatal lines), uncut."""
        self.follow()
        assert self._ledger is not None
        return self._ledger

    def release(self) -> DetectedRelease:
        """The engine release this server runs, and its profile (asked on the host once per build)."""
        return detect_release(self.host, self.spec)

    def probe(self, timeout_s: float = 5.0) -> ProbeOutcome:
        """One readiness probe, as this release answers (see :func:`toolkit.server.http.probe_server`)."""
        model = self.spec.model if self.spec.engine == "transformers" else None
        profile = self.release().profile
        profile = profile.under_env(dict(self.spec.env)) if profile is not None else None  # a bypassed health check
        return probe_server(self.url, profile, api_key=self.spec.api_key(), model=model, timeout_s=timeout_s)

    def wait_ready(self, *, timeout_s: float = 900.0, hang_after_s: float = 300.0, probe_interval_s: float = 1.0,
                   fast_probe_interval_s: float = 0.25, probe_timeout_s: float = 5.0,
                   alive_interval_s: float = 0.25) -> ReadinessReport:
        """Block until the server is ready or has failed: see :func:`toolkit.server.wait.wait_ready`."""
        release = self.release()
        self.state.use_release(release.engine, release.version, release.problem())
        watch = StartupWatch(
            state=self.state, follower=self.follow(), probe=self.probe, is_alive=self.is_alive,
            count_log_lines=lambda: count_lines(self.host, self.log_path), where=self.where,
            host_name=self.host.name, from_source=self.spec.source is not None)
        try:
            return wait_ready(watch, timeout_s=timeout_s, hang_after_s=hang_after_s,
                              probe_interval_s=probe_interval_s, fast_probe_interval_s=fast_probe_interval_s,
                              probe_timeout_s=probe_timeout_s, alive_interval_s=alive_interval_s)
        except ToolkitError as exc:  # quoted answers and lines: no secret of this launch in any form
            exc.redacted(self.redactor.text)
            raise

    def stop(self, *, grace_s: float = 10.0) -> StopReport:
        """Stop the server's whole process tree (SIGTERM, SIGKILL after ``grace_s``); idempotent."""
        self.state.stop_requested(time.time())
        follower = self._follower
        if follower is not None:
            follower.stop_requested()  # the lines the ranks write while dying reach views as `shutdown` lines
        report = self.host.stop(self.process, grace_s=grace_s)
        if follower is not None:
            follower.stop()
        self._check_nothing_escaped()
        if self.recorded is not None:
            registry.forget(self.host, self.recorded, id(self))
            self.recorded = None
        exit_guard.release(id(self))  # (a Slurm job or a container is held by the exit guard alone)
        if self.stop_report is None:
            self.stop_report = report
            self.state.stopped(sigkill_sent=report.sigkill_sent, already_stopped=report.already_stopped,
                               at=time.time())
        return report

    def _check_nothing_escaped(self) -> None:
        """Raise HostError naming what the server started that left its process group and session."""
        if self.marker is None:
            return
        escaped = launches.parse_marked(self.host.run(launches.marked_script(self.marker), check=False, timeout_s=30).stdout)
        if escaped:
            pids = " ".join(str(pid) for pid, _ in escaped)
            raise HostError(f"{len(escaped)} process(es) {self.where} started left its process group and session and "
                            "still run after its stop (a helper that double-forked into its own session)",
                            host=self.host.name, evidence=[f"pid {pid}: {args[:200]}" for pid, args in escaped],
                            hint=f"stop them with `kill {pids}` (they carry {launches.LAUNCH_MARKER}={self.marker})")

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass(eq=False)
class MultiNodeServer:
    """One server spread over several hosts (SGLang ``--nnodes``); node 0 serves HTTP."""

    nodes: tuple[Server, ...]
    # node 0's, fixed at its launch: it serves HTTP (and its state says ready) once every node has joined
    head: Server = field(init=False, repr=False)
    url: str = field(init=False, repr=False)
    spec: ServerSpec = field(init=False, repr=False)
    host: Place = field(init=False, repr=False)
    placement: Placement = field(init=False, repr=False)
    pid: int = field(init=False, repr=False)
    state: ServerState = field(init=False, repr=False)
    redactor: Redactor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        head = self.head = self.nodes[0]
        self.url, self.spec, self.host, self.placement = head.url, head.spec, head.host, head.placement
        self.pid, self.state, self.redactor = head.pid, head.state, head.redactor

    def follow(self) -> LogFollower:
        return self.head.follow()

    @property
    def ledger(self) -> LogLedger:
        return self.head.ledger

    def is_alive(self) -> bool:
        """True only if every node still runs: one dead node stalls the others' collectives."""
        return all(node.is_alive() for node in self.nodes)

    def stop(self, *, grace_s: float = 10.0) -> tuple[StopReport, ...]:
        """Stop every node, in parallel (each may wait ``grace_s`` for SIGTERM); idempotent."""
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            return tuple(pool.map(lambda node: node.stop(grace_s=grace_s), self.nodes))

    def wait_ready(self, **kwargs: float) -> ReadinessReport:
        """Wait for node 0, which serves HTTP once all nodes joined: see :meth:`Server.wait_ready`."""
        return self.head.wait_ready(**kwargs)

    def __enter__(self) -> MultiNodeServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
