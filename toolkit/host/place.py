"""Where a server runs: the seam between ``launch`` and plain hosts, Slurm jobs and containers.

- a :class:`Place` is where a *started* server lives, as its ``Server`` sees it: whether it is
  alive, how to stop it (verified), its process tree (the env check), and the shell on which
  its log file is read. A :class:`~toolkit.host.host.Host` is one as it is; so are one node of
  a Slurm job (its processes through ``srun``, its log on the login node) and a container
  (through ``docker exec``).
- a :data:`Target` is what ``launch(target, spec)`` is given: a ``Host``, which starts the
  command itself, or a :class:`ServerTarget` (:class:`~toolkit.host.slurm.SlurmTarget`,
  :class:`~toolkit.host.container.ContainerTarget`), which is told the port and finds the
  place: the nodes Slurm chose, the container it created. Both answer the engine's ``--help``
  before a launch (``run``) and the port check (``port_holder``).

A server target returns a :class:`PlacedProcess`: the handle of what it started, with the
place it landed on and its :class:`~toolkit.host.placement.Placement` (job id, nodes,
container, the exact command), which the server carries for the journal. Code above this seam
never asks which kind it holds: a notebook step reads the same against any of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeAlias

from toolkit.host.host import CommandResult, Host, ProcessHandle, StopReport
from toolkit.host.placement import Placement
from toolkit.host.procs import ProcessInfo
from toolkit.host.streams import ByteStream

__all__ = ["Place", "ServerTarget", "Target", "PlacedProcess"]


class Place(Protocol):
    """Where a started server lives: its liveness, its stop, its processes, and where its log is read."""

    @property
    def name(self) -> str:
        """How errors and the journal name it (``root@gpu-a:22``, ``gpu-a (slurm job 42)``)."""
        ...

    @property
    def address(self) -> str:
        """Where HTTP reaches a server here."""
        ...

    def run(self, command: str, /, *, check: bool = True, timeout_s: float | None = None) -> CommandResult:
        """Run bash where the server's log file is (the login node of a Slurm cluster)."""
        ...

    def expand_user(self, path: str, /) -> str:
        """``~`` as an absolute path where :meth:`run` runs."""
        ...

    def read_file(self, path: str, /, *, max_bytes: int | None = None, timeout_s: float | None = None) -> bytes:
        """A regular file's bytes, read where :meth:`run` runs (the log's side: a profile's traces are fetched
        so), at most ``max_bytes`` of them within ``timeout_s`` (both enforced on the host)."""
        ...

    def open_stream(self, command: str, /) -> ByteStream:
        """A long-lived stream (``tail -F`` of the log), where :meth:`run` runs."""
        ...

    def is_alive(self, handle: ProcessHandle, /) -> bool: ...

    def stop(self, handle: ProcessHandle, /, *, grace_s: float = 10.0) -> StopReport:
        """Stop everything the handle started, verified; idempotent."""
        ...

    def process_tree(self, pid: int, /) -> list[ProcessInfo]:
        """``pid`` and its descendants with argv and exec-time environment, where they run."""
        ...

    def port_holder(self, port: int, /) -> tuple[int, str] | None: ...


class ServerTarget(Protocol):
    """A target that starts servers itself (Slurm, containers): told the port, it finds where the server lands."""

    @property
    def name(self) -> str: ...

    def expand_user(self, path: str, /) -> str:
        """``~/x`` as an absolute path where the log is written."""
        ...

    def run(self, command: str, /, *, check: bool = True, timeout_s: float | None = None) -> CommandResult:
        """Run bash where the engine is installed (its ``--help`` is read here before a launch)."""
        ...

    def port_holder(self, port: int, /) -> tuple[int, str] | None:
        """Who holds ``port`` where the server will listen; None if free or not knowable before the start."""
        ...

    def start_server(self, command: str, /, *, log_path: str, port: int, check_port: bool = True) -> PlacedProcess:
        """Start ``command`` (bash) writing ``log_path``, serving on ``port``; return where it landed.

        ``check_port``: refuse to start where ``port`` is held, once the place is known (a Slurm
        node checks it itself, before the server loads anything).
        """
        ...


#: What launch accepts: a Host starts the command itself; a ServerTarget is told the port.
Target: TypeAlias = Host | ServerTarget


@dataclass(frozen=True, eq=False)
class PlacedProcess(ProcessHandle):
    """A started server process with the place it landed on and its placement (job, nodes, container)."""

    place: Place = field(kw_only=True)
    placement: Placement = field(kw_only=True)


if TYPE_CHECKING:  # mypy proves here that a Host is a Place, unchanged

    def _host_is_a_place(host: Host) -> Place:
        return host
