"""Placement: where one server process ran, as the journal and an error name it.

Pure. A launch on a plain host ran *on that host*; a launch through Slurm ran in a job, on
nodes the scheduler chose; a launch into a container ran in a named container of a host.
What a later reader needs to find the run again (the job id for ``sacct``, the node for its
``dmesg``, the container for ``docker logs``) is recorded here, as data, once the server
has started.

>>> Placement.on_host("root@gpu-a:22", "10.0.0.5", 4242).describe()
'root@gpu-a:22 (pid 4242)'
>>> p = Placement("slurm", "slurm debug via login", ("gpu-a", "gpu-b"), "10.0.0.5", 77, job_id="4242",
...               node_rank=0)
>>> p.describe()
'slurm job 4242 on gpu-a,gpu-b (node 0 of 2, pid 77)'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Placement", "PlacementKind"]

PlacementKind = Literal["host", "slurm", "container"]


@dataclass(frozen=True)
class Placement:
    """Where a server (or one node of it) runs: the target, the machines, the job or the container.

    ``target`` is the name of what the launch was given (a host, a Slurm target, a container
    target); ``nodes`` the machines the server's processes run on (node 0 first); ``address``
    where HTTP reaches it; ``command`` the exact command line that started it (the ``sbatch``
    or ``docker run`` line, the detached command on a host), shown and recorded as it ran.
    """

    kind: PlacementKind
    target: str
    nodes: tuple[str, ...]
    address: str
    pid: int | None = None
    job_id: str | None = None
    node_rank: int | None = None
    container: str | None = None
    engine: str | None = None
    command: str | None = None

    @classmethod
    def on_host(cls, name: str, address: str, pid: int | None, command: str | None = None) -> Placement:
        """A process started directly on a host (local or SSH)."""
        return cls("host", name, (name,), address, pid, command=command)

    def describe(self) -> str:
        """One line for notes, errors and widgets: ``slurm job 42 on gpu-a (pid 77)``."""
        pid = f"pid {self.pid}" if self.pid else ""
        if self.kind == "slurm":
            rank = f"node {self.node_rank} of {len(self.nodes)}" if self.node_rank is not None and len(self.nodes) > 1 \
                else ""
            detail = ", ".join(part for part in (rank, pid) if part)
            return f"slurm job {self.job_id} on {','.join(self.nodes)}" + (f" ({detail})" if detail else "")
        if self.kind == "container":
            on = ",".join(self.nodes)
            return f"container {self.container} ({self.engine}) on {on}" + (f" ({pid})" if pid else "")
        return f"{self.target} ({pid})" if pid else self.target

    def as_dict(self) -> dict[str, object]:
        """JSON-safe, stable keys (None where a kind has no such part): what a journal column stores."""
        return {
            "kind": self.kind,
            "target": self.target,
            "nodes": list(self.nodes),
            "address": self.address,
            "pid": self.pid,
            "job_id": self.job_id,
            "node_rank": self.node_rank,
            "container": self.container,
            "engine": self.engine,
            "command": self.command,
        }
