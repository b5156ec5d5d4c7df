"""Who runs a step, so that a step left ``running`` by a kernel killed mid-step is found on the next open."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProcessIdentity"]


@dataclass(frozen=True)
class ProcessIdentity:
    """pid, hostname and a start token (boot id + start time): a reused pid is not the original."""

    pid: int
    hostname: str
    token: str | None

    @classmethod
    def current(cls) -> ProcessIdentity:
        return cls(os.getpid(), socket.gethostname(), _start_token(os.getpid()))

    def is_gone(self) -> bool | None:
        """True when the process no longer exists; None when it runs on another host (unknowable)."""
        if self.hostname != socket.gethostname() or self.pid <= 0:
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # exists, owned by someone else
        fields = _proc_stat_fields(self.pid)
        if fields and fields[0] in ("Z", "X"):  # a zombie
            return True
        current = _start_token(self.pid)
        return self.token is not None and current is not None and current != self.token


def _proc_stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()  # fields from "state" on; comm may hold spaces


def _start_token(pid: int) -> str | None:
    fields = _proc_stat_fields(pid)
    if not fields or len(fields) < 20:
        return None
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot_id = "?"
    return f"{boot_id}:{fields[19]}"  # field 22 of stat: start time in clock ticks since boot
