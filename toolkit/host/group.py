"""HostGroup: one command on several hosts at once, each through its own `Host` (its persistent shell,
host-key checks and errors); the group only runs them side by side on threads.

>>> HostGroup([Host.local()]).run("echo hi")["localhost"].stdout
'hi\\n'
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from toolkit.errors import CommandFailed
from toolkit.host.host import CommandResult, Host, short_command

__all__ = ["HostGroup"]


class HostGroup:
    """Several hosts, keyed by name (a host given twice runs once)."""

    def __init__(self, hosts: Iterable[Host]) -> None:
        unique: dict[str, Host] = {}
        for host in hosts:
            unique.setdefault(host.name, host)
        self.hosts = tuple(unique.values())

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def __repr__(self) -> str:
        return f"HostGroup({', '.join(h.name for h in self.hosts)})"

    def run(self, command: str, *, check: bool = True, timeout_s: float | None = None) -> dict[str, CommandResult]:
        """``{host.name: CommandResult}`` in host order; with ``check``, CommandFailed names every failure.

        A host that cannot be reached raises its own error (HostUnreachable, UnknownHostKey...).
        """
        with ThreadPoolExecutor(max_workers=max(len(self.hosts), 1)) as pool:
            futures = [pool.submit(host.run, command, check=False, timeout_s=timeout_s) for host in self.hosts]
            ordered = {host.name: future.result() for host, future in zip(self.hosts, futures, strict=True)}
        failed = [r for r in ordered.values() if not r.ok]
        if check and failed:
            first = failed[0]
            raise CommandFailed(
                f"`{short_command(command)}` failed on {len(failed)} of {len(ordered)} hosts: "
                + ", ".join(f"{r.host} (exit {r.exit_code})" for r in failed),
                host=first.host, command=command, exit_code=first.exit_code, stderr=first.stderr,
                hint="the evidence is the stderr of the first failing host; run with check=False to see all")
        return ordered

    def close(self) -> None:
        for host in self.hosts:
            host.close()
