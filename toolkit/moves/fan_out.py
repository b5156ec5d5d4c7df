"""Fan a move out over several hosts: one server per host at a time, the hosts side by side.

Each host works through its own queue on its own thread while the calling thread draws the progress bars.
A job's exception is kept with the job; Ctrl-C stops every running server so blocked benchmarks end at
once, and the pool re-raises it once every thread has been joined.

>>> pool = HostPool([Host.local()])
>>> [done.result for done in pool.run([[1, 2]], lambda lane, job: job * 10, progress=False)[0]]
[10, 20]
"""

from __future__ import annotations

import contextlib
import queue
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from toolkit.host.container import ContainerTarget
from toolkit.host.group import HostGroup
from toolkit.host.host import Host
from toolkit.host.place import Target
from toolkit.host.slurm import SlurmTarget
from toolkit.progress import progress_bar, short_desc
from toolkit.redaction import redact_text
from toolkit.server import exit_guard
from toolkit.server.launch import DEFAULT_LOG_DIR
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec

__all__ = ["Hosts", "SpecForHost", "HostPool", "Lane", "Done", "host_tuple"]

#: One host (or Slurm or container target), a :class:`~toolkit.host.group.HostGroup`, or a list of them.
Hosts = Target | HostGroup | Sequence[Target]
#: Adapts a move's spec to one host (its port, its GPUs, its checkout): ``(host, spec) -> spec``.
SpecForHost = Callable[[Target, ServerSpec], ServerSpec]
_TARGETS = (Host, SlurmTarget, ContainerTarget)

J = TypeVar("J")
R = TypeVar("R")


def host_tuple(hosts: Hosts) -> tuple[Target, ...]:
    """The hosts as a tuple, checked: at least one, each a Host (or Slurm or container target), none twice."""
    items: tuple[object, ...] = tuple(hosts) if isinstance(hosts, HostGroup | Sequence) else (hosts,)
    if not items:
        raise ValueError("no hosts given: pass a Host, a HostGroup or a list of hosts")
    strangers = [repr(h) for h in items if not isinstance(h, _TARGETS)]
    if strangers:
        raise TypeError(f"hosts must be Host, SlurmTarget or ContainerTarget objects, got {', '.join(strangers[:3])}; "
                        "make them with tk.Host('gpu-a', user=...), tk.Host.local() or tk.SlurmTarget(...)")
    chosen = tuple(h for h in items if isinstance(h, _TARGETS))
    names = [h.name for h in chosen]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{', '.join(twice)} given more than once: a host runs one server at a time; "
                         "to run several servers on one machine, give distinct hosts (e.g. its addresses)")
    return chosen


@dataclass(frozen=True)
class Done(Generic[J, R]):
    """One job as it ended on one host: its result, or the exception it raised."""

    lane: int
    host: str
    job: J
    result: R | None = None
    error: BaseException | None = None


class Lane:
    """One host of a pool, as a job sees it: the host, its spec adaptation, its progress, the stop signal."""

    def __init__(self, pool: HostPool, index: int, host: Target) -> None:
        self.pool, self.index, self.host = pool, index, host
        self._server: Server | None = None

    def __repr__(self) -> str:
        return f"Lane({self.index}: {self.host.name})"

    def spec(self, spec: ServerSpec) -> ServerSpec:
        """``spec`` as it must run on this host (the pool's ``spec_for_host``, if any)."""
        return spec if self.pool.spec_for_host is None else self.pool.spec_for_host(self.host, spec)

    def log_dir(self, log_dir: str | None) -> str | None:
        """A log folder per host when there are several: "hosts" 127.0.0.1, .2, .3 share one /tmp."""
        if len(self.pool) == 1:
            return log_dir
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", self.host.name).strip("-.") or f"host{self.index}"
        return f"{(log_dir or DEFAULT_LOG_DIR).rstrip('/')}/{slug}"

    def watch(self, server: Server | None) -> None:
        """Hand to :func:`~toolkit.moves.trial.run_launch` as ``on_server``: the pool can stop it on Ctrl-C."""
        self._server = server
        if server is not None and self.pool.interrupted:
            raise KeyboardInterrupt(f"the host pool was interrupted before {server.where} could be used")

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Inside a journal step: an error caused by the pool's interrupt becomes the interrupt itself."""
        try:
            yield
        except Exception as exc:
            if self.pool.interrupted:
                raise KeyboardInterrupt(f"interrupted on {self.host.name}: its server was stopped") from exc
            raise

    def status(self, text: str) -> None:
        """What this host does now, shown in its progress bar."""
        self.pool.post(self.index, "status", text)

    def advance(self, units: int = 1, postfix: str | None = None) -> None:
        """Count ``units`` of this host's work as done (runs, probes), with an optional last value."""
        self.pool.post(self.index, "advance", units)
        if postfix is not None:
            self.pool.post(self.index, "postfix", postfix)

    def stop_server(self) -> None:
        if (server := self._server) is not None:
            with contextlib.suppress(Exception):  # it may be stopping on its own already
                server.stop()


class HostPool:
    """Hosts that run one job at a time each, side by side; ``spec_for_host`` adapts a spec to each host."""

    def __init__(self, hosts: Hosts, *, spec_for_host: SpecForHost | None = None) -> None:
        self.hosts = host_tuple(hosts)
        self.spec_for_host = spec_for_host
        self.lanes = tuple(Lane(self, i, host) for i, host in enumerate(self.hosts))
        self.interrupted = self.stopping = False
        self._cause: BaseException | None = None  # the first interrupt: the one re-raised
        self._cause_lock = threading.Lock()
        self._events: queue.SimpleQueue[tuple[int, str, object]] = queue.SimpleQueue()
        self._threaded = False
        self._bars: list[Any] = []
        self._desc = ""

    def __len__(self) -> int:
        return len(self.hosts)

    def __repr__(self) -> str:
        return f"HostPool({', '.join(h.name for h in self.hosts)})"

    @contextlib.contextmanager
    def progress(self, desc: str = "", *, unit: str = "run", enabled: bool = True) -> Iterator[None]:
        """One progress bar per host, kept open over several :meth:`run` calls (a bisection's rounds)."""
        opened = not self._bars
        if opened:
            self._desc = desc
            self._bars = [progress_bar(total=0, desc=redact_text(f"{host.name}: {desc}"), unit=unit,
                                       position=i if len(self.hosts) > 1 else None, disable=not enabled)
                          for i, host in enumerate(self.hosts)]
        try:
            yield
        finally:
            if opened:
                for bar in self._bars:
                    bar.close()
                self._bars = []

    def post(self, lane: int, kind: str, value: object) -> None:
        if self._threaded:
            self._events.put((lane, kind, value))
        else:
            self._draw(lane, kind, value)

    def _draw(self, lane: int, kind: str, value: object) -> None:
        if lane >= len(self._bars):
            return
        bar = self._bars[lane]
        name = self.hosts[lane].name
        if kind == "advance" and isinstance(value, int):
            bar.update(value)
        elif kind == "status":
            short_loop = self._desc not in ("", "sweep") and len(self._desc) <= 16  # "concurrency 32", "round 3"
            where = f"{name}: {self._desc} · {value}" if short_loop else f"{name}: {value}"
            bar.set_description_str(short_desc(redact_text(where)))  # a label may quote a flag value
        elif kind == "postfix":
            bar.set_postfix_str(redact_text(str(value)))
        elif kind == "total" and isinstance(value, int):
            bar.total += value
            bar.refresh()

    def _drain(self) -> None:
        while not self._events.empty():
            self._draw(*self._events.get_nowait())

    def run(self, queues: Sequence[Sequence[J]], work: Callable[[Lane, J], R], *,
            units: Callable[[J], int] | None = None, desc: str = "", unit: str = "run", progress: bool = True,
            stop_on_error: bool = False) -> list[list[Done[J, R]]]:
        """Run ``queues[i]`` on host i in order, the hosts in parallel; ``units(job)`` sizes the bars."""
        if len(queues) != len(self.hosts):
            raise ValueError(f"{len(queues)} queues for {len(self.hosts)} hosts")
        self.interrupted = self.stopping = False
        self._cause = None
        results: list[list[Done[J, R]]] = [[] for _ in self.hosts]
        busy = [i for i, jobs in enumerate(queues) if jobs]
        with self.progress(desc, unit=unit, enabled=progress):
            for i, jobs in enumerate(queues):
                self._draw(i, "total", sum(units(j) if units else 1 for j in jobs))
            self._threaded = len(busy) > 1
            try:
                if not self._threaded:
                    for i in busy:
                        self._work_through(self.lanes[i], queues[i], work, results[i], stop_on_error)
                else:
                    self._run_threads(busy, queues, work, results, stop_on_error)
            finally:
                self._drain()
                self._threaded = False
        if self._cause is not None:
            raise self._cause
        return results

    def _run_threads(self, busy: list[int], queues: Sequence[Sequence[J]], work: Callable[[Lane, J], R],
                     results: list[list[Done[J, R]]], stop_on_error: bool) -> None:
        exit_guard.arm()  # the lanes launch from worker threads, which cannot install the SIGTERM handlers
        threads = [threading.Thread(target=self._work_through, name=f"toolkit-pool-{self.hosts[i].name}",
                                    args=(self.lanes[i], queues[i], work, results[i], stop_on_error),
                                    daemon=True) for i in busy]
        for thread in threads:
            thread.start()
        try:
            while alive := [t for t in threads if t.is_alive()]:
                self._drain()
                alive[0].join(0.1)
        except BaseException as exc:  # Ctrl-C here, in the caller's thread: stop the servers, wait for the hosts
            self.interrupt(exc)
            for thread in threads:
                thread.join()
            raise

    def _work_through(self, lane: Lane, jobs: Sequence[J], work: Callable[[Lane, J], R],
                      out: list[Done[J, R]], stop_on_error: bool) -> None:
        for job in jobs:
            if self.stopping:
                return
            try:
                out.append(Done(lane.index, lane.host.name, job, work(lane, job)))
            except BaseException as exc:  # kept with its job; the caller decides
                out.append(Done(lane.index, lane.host.name, job, None, exc))
                if not isinstance(exc, Exception):
                    self.interrupt(exc)
                elif stop_on_error:
                    self.stopping = True

    def interrupt(self, cause: BaseException | None = None) -> None:
        """Stop handing out jobs and stop every server running now (their jobs then fail as interrupted)."""
        with self._cause_lock:
            if self._cause is None and cause is not None:
                self._cause = cause
        self.interrupted = self.stopping = True
        for lane in self.lanes:
            lane.stop_server()
