"""Host: one API for this machine and for SSH hosts, with host keys checked.

The same calls run, start and stop processes locally or over one fabric connection, so every
notebook and test runs unchanged on either; decisions live in :mod:`toolkit.host.procs`. Stops
take the group *and* the tree: killing only SGLang's launcher leaves TP ranks holding GPU memory,
and the next launch fails with CUDA out-of-memory far from the cause.

>>> host = Host.local()
>>> host.run("echo hello").stdout
'hello\\n'
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence

from toolkit.errors import CommandFailed, CommandNotFound, HostError, ToolkitError
from toolkit.host import procs
from toolkit.host import ssh as _ssh
from toolkit.host.handles import CommandResult, PlacedProcess, ProcessHandle, StopReport
from toolkit.host.placement import Placement
from toolkit.host.procs import ProcessInfo
from toolkit.host.shell import quote_path
from toolkit.host.streams import ByteStream
from toolkit.host.transport import (
    TIMED_OUT,
    Completed,
    LocalTransport,
    SshTransport,
    Transport,
    WrappedTransport,
)
from toolkit.redaction import redact_text

__all__ = ["Host", "CommandResult", "ProcessHandle", "ProcessInfo", "StopReport", "ByteStream"]


def short_command(command: str, limit: int = 120) -> str:
    """One line of at most ``limit`` characters, redacted: errors quote it (``--api-key K``, ``HF_TOKEN=...``)."""
    one_line = " ".join(redact_text(command).split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


class Host:
    """A machine to run commands and servers on: ``Host.local()`` or ``Host("gpu-a", user="root")``.

    SSH hosts honour ``~/.ssh/config`` (or ``ssh_config``). Host keys are checked against
    ``known_hosts`` (default ``~/.ssh/known_hosts`` plus ``/etc/ssh/ssh_known_hosts``): an unknown key
    raises UnknownHostKey unless ``trust_on_first_use=True`` (which records it), a changed key always
    raises ChangedHostKey. ``gateway``: a jump host (a Host or ``user@host:port``). Connects on first use.

    >>> with Host.local() as host:
    ...     host.run("exit 3", check=False).exit_code
    3
    """

    def __init__(self, hostname: str, *, user: str | None = None, port: int | None = None,
                 key_filename: str | None = None, gateway: Host | str | None = None,
                 known_hosts: str | None = None, trust_on_first_use: bool = False,
                 connect_timeout_s: float = 10.0, ssh_config: str | None = None) -> None:
        settings = _ssh.SshSettings(hostname, user, port, key_filename, known_hosts, trust_on_first_use,
                                    connect_timeout_s, ssh_config)
        if isinstance(gateway, str):
            gateway = Host(gateway, key_filename=key_filename, known_hosts=known_hosts,
                           trust_on_first_use=trust_on_first_use, connect_timeout_s=connect_timeout_s,
                           ssh_config=ssh_config)
        hop = None
        if gateway is not None:
            if not isinstance(gateway._transport, SshTransport):
                raise ToolkitError("gateway must be an SSH host: Host.local() cannot forward connections")
            hop = gateway._transport.connection
        self.gateway = gateway
        self._transport: Transport = SshTransport(settings, hop)
        self._home: str | None = None

    @classmethod
    def _over(cls, transport: Transport) -> Host:
        host = cls.__new__(cls)
        host.gateway = None
        host._transport = transport
        host._home = None
        return host

    @classmethod
    def local(cls) -> Host:
        """This machine, through subprocess: no SSH, same API."""
        return cls._over(LocalTransport())

    def inside(self, prefix: Sequence[str], *, name: str, address: str | None = None) -> Host:
        """A Host whose commands run through ``prefix`` on this one (a container, a Slurm node).

        ``prefix`` runs ``bash -c SCRIPT`` over there and forwards stdin (``docker exec -i sglang``,
        ``srun --overlap``); closing the new Host leaves this one open.

        >>> Host.local().inside(["env", "X=1"], name="with X").run("echo $X").stdout
        '1\\n'
        """
        return Host._over(WrappedTransport(self._transport, prefix, name=name, address=address))

    # -- identity -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """``localhost`` or ``user@host:port``: how errors and journals name this host."""
        return self._transport.name

    @property
    def address(self) -> str:
        """Where HTTP reaches servers on this host: 127.0.0.1 or the SSH HostName."""
        return self._transport.address

    @property
    def is_local(self) -> bool:
        return self._transport.is_local

    def __repr__(self) -> str:
        return f"Host({self.name!r})" if not self.is_local else "Host.local()"

    def expand_user(self, path: str) -> str:
        """``~`` and ``~/x`` as absolute paths on this host (other paths unchanged), so that a path handed to
        several commands means the same file to all of them, however each quotes it."""
        if path != "~" and not path.startswith("~/"):
            return path
        if self._home is None:
            self._home = self.run('printf %s "$HOME"').stdout.rstrip("/") or "/"
        return self._home + path[1:]

    # -- commands -------------------------------------------------------------------------
    def connect(self) -> Host:
        """Open the SSH connection now (it otherwise opens on first use); raises HostError kinds."""
        if isinstance(self._transport, SshTransport):
            self._transport.transport()
        return self

    def run(self, command: str, *, check: bool = True, timeout_s: float | None = None) -> CommandResult:
        """Run ``command`` with ``bash -c``; raise CommandFailed/CommandNotFound if ``check`` and it fails.
        ``timeout_s`` is enforced on the host (coreutils ``timeout``, exit 124)."""
        done = self._transport.execute(command, timeout_s=timeout_s)
        result = CommandResult(self.name, command, done.exit_code, done.stdout.decode("utf-8", "replace"),
                               done.stderr.decode("utf-8", "replace"))
        if check and not result.ok:
            raise self._failure(result, timeout_s)
        return result

    def _failure(self, result: CommandResult, timeout_s: float | None) -> CommandFailed:
        shown = short_command(result.command)
        kind: type[CommandFailed] = CommandFailed
        if result.exit_code == 127:
            kind = CommandNotFound
            message = f"`{shown}` on {self.name}: command not found (exit 127)"
            hint = ("the program is not on the PATH of a non-interactive shell on that host: use its "
                    "absolute path (e.g. /root/venv/bin/python), or set PATH before the interactive guard of "
                    "~/.bashrc")
        elif result.exit_code == TIMED_OUT and timeout_s is not None:
            message = f"`{shown}` on {self.name} did not finish within {timeout_s:g} s and was stopped"
            hint = "raise timeout_s, or start long-running work with start_detached()"
        else:
            message = f"`{shown}` on {self.name} exited with status {result.exit_code}"
            hint = "the evidence is the end of its stderr; run it with check=False to inspect the result"
        return kind(message, host=self.name, command=result.command, exit_code=result.exit_code,
                    stderr=result.stderr, hint=hint)

    def _checked(self, label: str, done: Completed, timeout_s: float | None = None) -> bytes:
        if done.exit_code != 0:
            stderr = done.stderr.decode("utf-8", "replace")
            raise self._failure(CommandResult(self.name, label, done.exit_code, "", stderr), timeout_s)
        return done.stdout

    def read_file(self, path: str, /, *, max_bytes: int | None = None,
                  timeout_s: float | None = None) -> bytes:
        """A regular file's bytes (``~/``: remote home), ``max_bytes`` (``head -c``) and ``timeout_s`` enforced on the host."""
        target, read = quote_path(path), "cat --" if max_bytes is None else f"head -c {int(max_bytes) + 1} --"
        script = f"[ -f {target} ] || {{ echo 'not a regular file' >&2; exit 3; }}; exec {read} {target}"
        data = self._checked(f"read {path}", self._transport.execute(script, timeout_s=timeout_s), timeout_s)
        if max_bytes is not None and len(data) > max_bytes:
            raise HostError(f"{path} on {self.name} holds more than max_bytes={max_bytes:,} bytes: not fetched", host=self.name)
        return data

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write a file atomically (temp file + rename), creating its directory."""
        payload = data.encode("utf-8") if isinstance(data, str) else data
        target = quote_path(path)
        tmp = quote_path(f"{path}.tmp-{os.getpid()}-{time.monotonic_ns()}")
        parent = quote_path(path.rsplit("/", 1)[0]) if "/" in path.lstrip("/") else "."
        script = f"mkdir -p -- {parent} && cat > {tmp} && mv -f -- {tmp} {target}"
        self._checked(f"write {path}", self._transport.execute(script, stdin=payload))

    def open_stream(self, command: str) -> ByteStream:
        """One long-lived stream of ``command``'s stdout+stderr; closing it ends the command."""
        return self._transport.open_stream(command)

    # -- processes ------------------------------------------------------------------------
    def start_detached(self, command: str, *, log_path: str, env: Mapping[str, str] | None = None,
                       cwd: str | None = None) -> ProcessHandle:
        """Start ``command`` (bash) in its own session, output to ``log_path``; it outlives this connection,
        and the returned pid leads the process group of everything it starts."""
        started_at = time.time()
        result = self.run(procs.detach_script(command, log_path=log_path, env=env, cwd=cwd))
        pid, ticks = procs.parse_detached(result.stdout)
        return ProcessHandle(self.name, pid, log_path, command, started_at, ticks)

    def start_server(self, command: str, /, *, log_path: str, port: int, check_port: bool = True,
                     env: Mapping[str, str] | None = None) -> PlacedProcess:
        """The seam's start: ``command`` detached here (``launch`` has checked the port already)."""
        handle = self.start_detached(command, log_path=log_path, env=env)
        return PlacedProcess(handle.host, handle.pid, log_path, command, handle.started_at, handle.start_ticks,
                             place=self, placement=Placement.on_host(self.name, self.address, handle.pid, command))

    @property
    def registry_host(self) -> Host:
        """Launches here are recorded on this host's launch registry (``python -m toolkit ps``)."""
        return self

    def _table(self, pids: Iterable[int] | None = None) -> dict[int, procs.ProcRow]:
        script = procs.PROCESS_TABLE_SCRIPT if pids is None else procs.stat_script(pids)
        return procs.parse_process_table(self.run(script).stdout)

    def is_alive(self, handle_or_pid: ProcessHandle | int) -> bool:
        """Whether the process (not a zombie, not a later process with the same pid) still runs."""
        pid, ticks = self._pid_ticks(handle_or_pid)
        row = self._table([pid]).get(pid)
        return row is not None and row.alive and (ticks is None or row.start_ticks == ticks)

    def stop(self, handle: ProcessHandle | int, *, grace_s: float = 10.0) -> StopReport:
        """SIGTERM the process group and every descendant, SIGKILL after ``grace_s``, verify none is left.
        Idempotent (``already_stopped=True``); raises HostError naming whatever outlives SIGKILL."""
        pid, ticks = self._pid_ticks(handle)
        self._refuse_own(pid)
        t0 = time.monotonic()
        table = self._table()
        plan = procs.plan_stop(table, pid, ticks)
        alive = procs.survivors(table, plan)
        if not alive:
            return StopReport(self.name, pid, True, False, elapsed_s=time.monotonic() - t0)
        signalled = tuple(row.pid for row in alive)
        left = self._signal_until_gone(plan, alive, "TERM", grace_s)
        sigkill = bool(left)
        if left:
            left = self._signal_until_gone(plan, left, "KILL", 5.0)
        if left:
            raise HostError(
                f"{len(left)} process(es) of pid {pid} on {self.name} survived SIGKILL", host=self.name,
                evidence=[f"pid {row.pid} ppid {row.ppid} pgid {row.pgid} state {row.state}" for row in left],
                hint="a process in state D waits on the kernel (often a GPU driver or NFS); "
                     "check `ps -o pid,stat,wchan`")
        return StopReport(self.name, pid, False, sigkill, (), signalled, time.monotonic() - t0)

    def _signal_until_gone(self, plan: procs.StopPlan, alive: tuple[procs.ProcRow, ...], signal: str,
                           wait_s: float) -> tuple[procs.ProcRow, ...]:
        """Signal ``alive`` (and children forked meanwhile) until the table shows none of the plan, or
        ``wait_s``; each signal is one round trip (:func:`procs.signal_script`)."""
        deadline = time.monotonic() + wait_s
        sent: set[int] = set()
        pause = 0.05
        while True:
            fresh = tuple(row.pid for row in alive if row.pid not in sent)
            if fresh:  # first round, and children forked during shutdown
                groups = plan.pgids | {row.pid for row in alive if row.pgid == row.pid}
                settle_s = min(1.0, max(deadline - time.monotonic(), 0))
                table = procs.parse_process_table(
                    self.run(procs.signal_script(signal, fresh, frozenset(groups), settle_s=settle_s)).stdout)
                sent.update(fresh)
            elif time.monotonic() >= deadline:
                return alive
            else:
                time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
                pause = min(pause * 1.5, 0.5)
                table = self._table()
            alive = procs.survivors(table, plan)
            if not alive:
                return ()

    def _refuse_own(self, pid: int) -> None:
        if pid <= 1 or (self.is_local and pid in (os.getpid(), os.getpgid(0))):
            raise ToolkitError(f"refusing to stop pid {pid} on {self.name}: it is init or this Python "
                               "process", hint="pass the handle returned by start_detached() or launch()")

    def process_tree(self, pid: int) -> list[ProcessInfo]:
        """``pid`` and all its descendants with argv and exec-time environment, in one round trip; one that
        cannot be read carries ``error``."""
        return procs.parse_process_tree(self.run(procs.process_tree_script(pid)).stdout, host=self.name)

    def port_holder(self, port: int) -> tuple[int, str] | None:
        """``(pid, command line)`` of the process listening on TCP ``port``, or None if the port is free."""
        return procs.parse_port_holder(self.run(procs.port_holder_script(port)).stdout)

    def _pid_ticks(self, handle_or_pid: ProcessHandle | int) -> tuple[int, int | None]:
        if not isinstance(handle_or_pid, ProcessHandle):
            return int(handle_or_pid), None
        if handle_or_pid.host != self.name:  # a pid means nothing on another machine
            raise ToolkitError(f"process {handle_or_pid.pid} was started on {handle_or_pid.host}, not on "
                               f"{self.name}", hint=f"use the Host that started it ({handle_or_pid.host})")
        return handle_or_pid.pid, handle_or_pid.start_ticks

    # -- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the SSH connection (detached processes keep running). Reopens on next use."""
        self._transport.close()
        if self.gateway is not None:
            self.gateway.close()

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
