"""Placement: where one server process ran (host, Slurm job and nodes, or container), as data.

Pure. What a later reader needs to find the run again (the job id for ``sacct``, the node for its
``dmesg``, the container for ``docker logs``) is recorded once the server has started.

>>> Placement.on_host("root@gpu-a:22", "10.0.0.5", 4242).describe()
'root@gpu-a:22 (pid 4242)'
>>> p = Placement("slurm", "slurm debug via login", ("gpu-a", "gpu-b"), "10.0.0.5", 77, job_id="4242",
...               node_rank=0)
>>> p.describe()
'slurm job 4242 on gpu-a,gpu-b (node 0 of 2, pid 77)'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

__all__ = ["Placement", "PlacementKind"]

PlacementKind = Literal["host", "slurm", "container"]


@dataclass(frozen=True)
class Placement:
    """Where a server (or one node of it) runs. ``target``: the name of what launch was given; ``nodes``:
    node 0 first; ``address``: where HTTP reaches it; ``command``: the exact line that started it."""

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
        return {**asdict(self), "nodes": list(self.nodes)}
