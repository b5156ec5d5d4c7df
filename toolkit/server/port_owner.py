"""Whose process holds a port: yours (and launched by the toolkit?) or someone else's, for PortInUse's hint.

Most often it is the user's own server from an earlier cell or a crashed kernel (issue 20): the hint
says "it is yours (pid N, launched by the toolkit, log ...)", read from ``/proc/PID/fd/1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolkit.host.place import Target

__all__ = ["whose", "HolderOwner", "holder_owner", "parse", "hint"]

_TOOLKIT_LOG = re.compile(r"-\d{8}-\d{6}-\d{3}\.log$")


@dataclass(frozen=True)
class HolderOwner:
    """The holder's owner, the asking user, and the file its stdout writes (None: unknown)."""

    holder_uid: int
    my_uid: int
    stdout: str | None

    @property
    def mine(self) -> bool:
        return self.holder_uid == self.my_uid

    @property
    def toolkit_log(self) -> str | None:
        """The toolkit log file the holder writes, when the toolkit launched it."""
        return self.stdout if self.stdout and _TOOLKIT_LOG.search(self.stdout) else None


def parse(text: str) -> HolderOwner | None:
    """From ``HOLDER_UID\\nMY_UID\\nSTDOUT_TARGET``; None when the holder could not be read."""
    lines = text.splitlines()
    if len(lines) < 2 or not lines[0].strip().isdigit() or not lines[1].strip().isdigit():
        return None
    return HolderOwner(int(lines[0]), int(lines[1]), lines[2].strip() if len(lines) > 2 and lines[2].strip() else None)


def holder_owner(target: Target, pid: int) -> HolderOwner | None:
    """Ask the host who owns ``pid`` and where its output goes (None when it cannot say)."""
    try:
        result = target.run(f"stat -c %u /proc/{int(pid)} && id -u && readlink /proc/{int(pid)}/fd/1",
                            check=False, timeout_s=10)
    except Exception:  # the hint is a courtesy: never hide the PortInUse behind a second failure
        return None
    return parse(result.stdout)


def whose(pid: int, owner: HolderOwner | None) -> str | None:
    """"it is yours (pid N, launched by the toolkit, log PATH)", or another user's, or None when unknown."""
    if owner is not None and owner.mine:
        launched = f", launched by the toolkit, log {owner.toolkit_log}" if owner.toolkit_log else ""
        return f"it is yours (pid {pid}{launched})"
    if owner is not None:
        return f"it belongs to another user (uid {owner.holder_uid})"
    return None


def hint(port: int, pid: int, owner: HolderOwner | None) -> str:
    """What to do about the holder: stop your own server, or choose another port."""
    other_port = (f"or choose another port: ServerSpec.sglang(..., port={port + 1}) or "
                  f"spec.with_flags({{'--port': {port + 1}}})")
    if owner is not None and owner.mine:
        return (f"{whose(pid, owner)}: an earlier server still running, perhaps from a cell or a "
                f"kernel that ended without stopping it; stop it with host.stop({pid}) (or `kill {pid}` on the "
                f"host), {other_port}")
    if owner is not None:
        return f"{whose(pid, owner)}: ask them, or {other_port}"
    return f"stop the holder (host.stop({pid}) if it is ours, or `kill {pid}` on the host), {other_port}"
