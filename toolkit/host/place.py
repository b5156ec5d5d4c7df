"""Where a server runs: the seam between ``launch`` and plain hosts, Slurm jobs and containers.

- a :class:`Place` is where a *started* server lives: liveness, verified stop, process tree, and the
  shell that reads its log (a ``Host``; one node of a Slurm job; a container).
- a :data:`Target` is what ``launch(target, spec)`` is given (a ``Host``, a ``SlurmTarget``, a
  ``ContainerTarget``): it answers ``--help`` and the port check, and ``start_server`` returns a
  :class:`PlacedProcess` with its place and ``Placement``. Code above never asks which kind it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, TypeAlias

from toolkit.host.handles import CommandResult, Place, PlacedProcess
from toolkit.host.host import Host

__all__ = ["Place", "ServerTarget", "Target", "PlacedProcess"]


class ServerTarget(Protocol):
    """What ``launch`` is given (a host, Slurm, a container engine): told the command and port, it starts the server."""

    @property
    def name(self) -> str: ...

    def expand_user(self, path: str, /) -> str:
        """``~/x`` as an absolute path where the log is written."""

    def run(self, command: str, /, *, check: bool = True, timeout_s: float | None = None) -> CommandResult:
        """Run bash where the engine is installed (its ``--help`` is read here before a launch)."""

    def port_holder(self, port: int, /) -> tuple[int, str] | None:
        """Who holds ``port`` where the server will listen; None if free or not knowable before the start."""

    @property
    def registry_host(self) -> Host | None:
        """The host whose launch registry records servers started here; None where a scheduler or a container
        engine lists them (``squeue``, ``docker ps``)."""

    def start_server(self, command: str, /, *, log_path: str, port: int, check_port: bool = True,
                     env: Mapping[str, str] | None = None) -> PlacedProcess:
        """Start ``command`` (bash) writing ``log_path``, serving on ``port``; return where it landed.
        ``check_port``: refuse where ``port`` is held, once the place is known; ``env``: the launch marker."""


#: What launch accepts: a Host, a SlurmTarget, a ContainerTarget, all spoken to the same way.
Target: TypeAlias = ServerTarget


if TYPE_CHECKING:  # mypy proves here that a Host is a Place and a Target, unchanged

    def _host_is_a_place(host: Host) -> Place:
        return host

    def _host_is_a_target(host: Host) -> Target:
        return host
