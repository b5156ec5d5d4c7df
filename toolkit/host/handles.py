"""What a started command or process leaves in the caller's hand (pure data), and where a server lives.

Results, handles, stop reports and the :class:`Place` protocol sit here, below both ``Host`` and
the seam (:mod:`toolkit.host.place`), so that neither imports the other's types back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from toolkit.host.placement import Placement
from toolkit.host.procs import ProcessInfo
from toolkit.host.streams import ByteStream

__all__ = ["CommandResult", "ProcessHandle", "StopReport", "Place", "PlacedProcess", "LogElsewhere"]


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it exited, on which host."""

    host: str
    command: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class StopReport:
    """How a stop went. ``survivors`` is always () on return: if anything survives, stop raises."""

    host: str
    pid: int
    already_stopped: bool
    sigkill_sent: bool
    survivors: tuple[int, ...] = ()
    signalled: tuple[int, ...] = ()
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class ProcessHandle:
    """A detached process leading its own group, writing ``log_path``; ``start_ticks`` tells it from a later
    process that reuses its pid, so a stale handle never signals a stranger."""

    host: str
    pid: int
    log_path: str
    command: str
    started_at: float
    start_ticks: int | None = None


class Place(Protocol):
    """Where a started server lives: its liveness, its stop, its processes, and where its log is read."""

    @property
    def name(self) -> str:
        """How errors and the journal name it (``root@gpu-a:22``, ``gpu-a (slurm job 42)``)."""

    @property
    def address(self) -> str:
        """Where HTTP reaches a server here."""

    def run(self, command: str, /, *, check: bool = True, timeout_s: float | None = None) -> CommandResult:
        """Run bash where the server's log file is (the login node of a Slurm cluster)."""

    def expand_user(self, path: str, /) -> str:
        """``~`` as an absolute path where :meth:`run` runs."""

    def read_file(self, path: str, /, *, max_bytes: int | None = None,
                  timeout_s: float | None = None) -> bytes:
        """A regular file's bytes, read where :meth:`run` runs (a profile's traces are fetched so), at most
        ``max_bytes`` of them within ``timeout_s`` (both enforced on the host)."""

    def open_stream(self, command: str, /) -> ByteStream:
        """A long-lived stream (``tail -F`` of the log), where :meth:`run` runs."""

    def is_alive(self, handle: ProcessHandle, /) -> bool: ...

    def stop(self, handle: ProcessHandle, /, *, grace_s: float = 10.0) -> StopReport:
        """Stop everything the handle started, verified; idempotent."""

    def process_tree(self, pid: int, /) -> list[ProcessInfo]:
        """``pid`` and its descendants with argv and exec-time environment, where they run."""

    def port_holder(self, port: int, /) -> tuple[int, str] | None: ...


class LogElsewhere:
    """A place whose server log is written on ``log_host`` (a Slurm login node, a container's host): the
    log's shell calls go there, while processes are read where the server runs."""

    log_host: Place

    def run(self, command: str, /, *, check: bool = True, timeout_s: float | None = None) -> CommandResult:
        return self.log_host.run(command, check=check, timeout_s=timeout_s)

    def expand_user(self, path: str, /) -> str:
        return self.log_host.expand_user(path)

    def read_file(self, path: str, /, *, max_bytes: int | None = None,
                  timeout_s: float | None = None) -> bytes:
        return self.log_host.read_file(path, max_bytes=max_bytes, timeout_s=timeout_s)

    def open_stream(self, command: str, /) -> ByteStream:
        return self.log_host.open_stream(command)


@dataclass(frozen=True, eq=False)
class PlacedProcess(ProcessHandle):
    """A started server process with the place it landed on and its placement (job, nodes, container)."""

    place: Place = field(kw_only=True)
    placement: Placement = field(kw_only=True)
