"""Errors that say what happened, show the evidence (host, port, command, log lines), and say what to do.

An error is shown, pasted and journaled, so what it quotes is redacted where it is made;
:meth:`ToolkitError.redacted` passes the whole error through a Server's redactor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:  # a type only: the readiness report an error carries (no import at run time)
    from toolkit.server.readiness import ReadinessReport

__all__ = [
    "ToolkitError", "HostError", "HostUnreachable", "AuthenticationFailed", "UnknownHostKey",
    "ChangedHostKey", "CommandFailed", "CommandNotFound", "PortInUse", "UnsafeLogDir", "ProcessDied",
    "JobNotStarted", "ServerDied", "ExtensionMismatch", "ReadinessTimeout", "ServerHung", "InvalidFlag",
    "BenchmarkFailed", "MalformedResponse", "JournalError",
]


class ToolkitError(Exception):
    """Base class: a message in full sentences, the evidence behind it, and a hint."""

    def __init__(self, message: str, *, evidence: Sequence[str] = (), hint: str | None = None) -> None:
        self.message = message
        self.evidence = tuple(evidence)
        self.hint = hint
        super().__init__(self._render())

    def redacted(self, redact: Callable[[str], str]) -> Self:
        """This error with ``redact`` applied to its message, evidence and hint (in place); returns it.

        >>> err = ToolkitError("login failed for key Xk9s3cr3tpass")
        >>> str(err.redacted(lambda text: text.replace("Xk9s3cr3tpass", "[REDACTED]")))
        'login failed for key [REDACTED]'
        """
        self.message = redact(self.message)
        self.evidence = tuple(redact(line) for line in self.evidence)
        self.hint = None if self.hint is None else redact(self.hint)
        self.args = (self._render(),)
        return self

    def _render(self) -> str:
        parts = [self.message]
        if self.evidence:
            parts.append("evidence:\n" + "\n".join(f"  | {line}" for line in self.evidence))
        if self.hint:
            parts.append(f"what to do: {self.hint}")
        return "\n".join(parts)


class HostError(ToolkitError):
    """Something about reaching or using a host went wrong."""

    def __init__(self, message: str, *, host: str, evidence: Sequence[str] = (), hint: str | None = None) -> None:
        self.host = host
        super().__init__(message, evidence=evidence, hint=hint)


class HostUnreachable(HostError):
    """No SSH session could be opened within the connect bound."""


class AuthenticationFailed(HostError):
    """The host answered but refused our credentials."""


class UnknownHostKey(HostError):
    """The host's key is not in known_hosts; we never trust silently."""


class ChangedHostKey(HostError):
    """The host's key differs from the one recorded: possibly a different machine."""


class CommandFailed(HostError):
    """A command run on a host exited non-zero."""

    def __init__(self, message: str, *, host: str, command: str, exit_code: int, stderr: str = "",
                 hint: str | None = None) -> None:
        self.command = command
        self.exit_code = exit_code
        self.stderr = stderr
        tail = [line for line in stderr.strip().splitlines()[-8:] if line.strip()]
        super().__init__(message, host=host, evidence=tail, hint=hint)


class CommandNotFound(CommandFailed):
    """The program is not installed (or not on PATH) on the host."""


class PortInUse(HostError):
    """A port the server needs is already held by another process on the host."""

    def __init__(self, message: str, *, host: str, port: int, pid: int | None = None,
                 holder: str | None = None, hint: str | None = None) -> None:
        self.port = port
        self.pid = pid
        self.holder = holder
        evidence = [f"pid {pid}: {holder}"] if pid is not None else []
        super().__init__(message, host=host, evidence=evidence, hint=hint)


class UnsafeLogDir(HostError):
    """The server log folder on the host could be read or changed by another user: refused before a launch."""


class ProcessDied(HostError):
    """A process we started exited when it should still be running."""


class JobNotStarted(HostError):
    """A scheduler job did not start within the bound (``state``/``reason``: Slurm's own words); it was cancelled."""

    def __init__(self, message: str, *, host: str, job_id: str, state: str, reason: str,
                 evidence: Sequence[str] = (), hint: str | None = None) -> None:
        self.job_id = job_id
        self.state = state
        self.reason = reason
        super().__init__(message, host=host, evidence=evidence, hint=hint)


class _Reported(HostError):
    """A server error that carries its readiness report (``report``: how far the server got)."""

    def __init__(self, message: str, *, host: str, evidence: Sequence[str] = (), hint: str | None = None,
                 report: ReadinessReport | None = None) -> None:
        self.report = report
        super().__init__(message, host=host, evidence=evidence, hint=hint)


class ServerDied(_Reported, ProcessDied):
    """The server failed during start-up or serving; the evidence quotes the decisive log lines."""


class ExtensionMismatch(ServerDied):
    """A commit's compiled parts (SGLang's kernel wheel, vLLM's ``_C``) do not fit the code: it cannot run.

    Raised by the source check or from the engine's words in the log; a bisection skips such a commit.
    """


class ReadinessTimeout(_Reported):
    """The server neither became ready nor failed within the time allowed."""


class ServerHung(ReadinessTimeout):
    """The server is alive but printed nothing and made no progress for too long."""


class InvalidFlag(ToolkitError):
    """A flag or flag value the engine does not accept, caught before a long launch."""


class MalformedResponse(ToolkitError):
    """A server answered with something that is not what the protocol promises (a count out of range, a wrong shape)."""


class BenchmarkFailed(ToolkitError):
    """A benchmark run stopped itself: the warm-up, or its first requests, all failed."""


class JournalError(ToolkitError):
    """The journal file cannot be opened or written."""
