"""Where a server runs: the seam between ``launch`` and plain hosts, Slurm jobs and containers.

- a :class:`Place` is where a *started* server lives, as its ``Server`` sees it: whether it is
  alive, how to stop it (verified), its process tree (the env check), and the shell on which
  its log file is read. A :class:`~toolkit.host.host.Host` is one as it is; so are one node of
  a Slurm job (its processes through ``srun``, its log on the login node) and a container
  (through ``docker exec``).
- a :data:`Target` (a :class:`ServerTarget`) is what ``launch(target, spec)`` is given: a ``Host``,
  a :class:`~toolkit.host.slurm.SlurmTarget` or a :class:`~toolkit.host.container.ContainerTarget`.
  Each answers the engine's ``--help`` before a launch (``run``), the port check
  (``port_holder``), and starts a server when told its command, log file and port
  (``start_server``): a host starts it itself, Slurm finds the nodes, a container engine
  creates the container.

``start_server`` returns a :class:`PlacedProcess`: the handle of what it started, with the
place it landed on and its :class:`~toolkit.host.placement.Placement` (job id, nodes,
container, the exact command), which the server carries for the journal. Code above this seam
never asks which kind it holds: a notebook step reads the same against any of them.
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
        ...

    def run(self, command: str, /, *, check: bool = True, timeout_s: float | None = None) -> CommandResult:
        """Run bash where the engine is installed (its ``--help`` is read here before a launch)."""
        ...

    def port_holder(self, port: int, /) -> tuple[int, str] | None:
        """Who holds ``port`` where the server will listen; None if free or not knowable before the start."""
        ...

    @property
    def registry_host(self) -> Host | None:
        """The host whose launch registry records servers started here (``python -m toolkit ps``, orphans).

        None where a scheduler or a container engine lists them (``squeue``, ``docker ps``).
        """
        ...

    def start_server(self, command: str, /, *, log_path: str, port: int, check_port: bool = True,
                     env: Mapping[str, str] | None = None) -> PlacedProcess:
        """Start ``command`` (bash) writing ``log_path``, serving on ``port``; return where it landed.

        ``check_port``: refuse to start where ``port`` is held, once the place is known (a Slurm
        node checks it itself, before the server loads anything). ``env``: added to the server's
        environment (the launch marker that finds what escaped its process group at stop).
        """
        ...


#: What launch accepts: a Host, a SlurmTarget, a ContainerTarget, all spoken to the same way.
Target: TypeAlias = ServerTarget


if TYPE_CHECKING:  # mypy proves here that a Host is a Place and a Target, unchanged

    def _host_is_a_place(host: Host) -> Place:
        return host

    def _host_is_a_target(host: Host) -> Target:
        return host
