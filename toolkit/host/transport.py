"""The seam under :class:`toolkit.host.host.Host`: run bash on this machine or over one SSH connection.

A transport runs a script to completion (bytes in, bytes out, exit code), opens one long-lived
stream, and closes: local and SSH hosts then share every decision. Over SSH we drive paramiko
channels directly rather than ``Connection.run``: bytes stay bytes, nothing reads our stdin, and a
stream reads in large chunks (a log follower must keep up with 100k lines/s).
"""

from __future__ import annotations

import base64
import os
import select
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import paramiko
from fabric import Connection

from toolkit.errors import HostUnreachable
from toolkit.host import ssh as _ssh
from toolkit.host.procs import stream_script, timeout_script
from toolkit.host.shell import join, quote
from toolkit.host.streams import CHUNK, ByteStream, ChannelStream, PipeStream, close_quietly, kill_group

__all__ = ["Completed", "Transport", "LocalTransport", "SshTransport", "WrappedTransport", "TIMED_OUT"]

TIMED_OUT = 124  # what coreutils `timeout` exits with; used on both sides
# A log stream asks for a 16 MiB window and 256 KiB packets (paramiko: 2 MiB, 32 KiB): on
# loopback that is ~0.9M log lines/s instead of ~0.2M, well above the follower's 100k.
_SSH_WINDOW = 16 << 20
_SSH_PACKET = 256 << 10


@dataclass(frozen=True)
class Completed:
    exit_code: int
    stdout: bytes
    stderr: bytes


class Transport:
    """Where bash runs. ``name`` labels errors; ``address`` is where HTTP reaches the host."""

    name: str
    address: str
    is_local: bool

    def execute(self, script: str, *, stdin: bytes | None = None,
                timeout_s: float | None = None) -> Completed:
        raise NotImplementedError

    def open_stream(self, command: str) -> ByteStream:
        raise NotImplementedError

    def close(self) -> None:
        pass


class LocalTransport(Transport):
    name = "localhost"
    address = "127.0.0.1"
    is_local = True

    def execute(self, script: str, *, stdin: bytes | None = None,
                timeout_s: float | None = None) -> Completed:
        # Files, not pipes: a command that leaves a background child running returns when it ends, as
        # over SSH. Its own session: a timeout ends the command's children too.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(["bash", "-c", script], stdout=out, stderr=err, start_new_session=True,
                                    stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE)
            timed_out = False
            try:
                proc.communicate(stdin, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(proc, grace_s=0.5)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        if timed_out:
            return Completed(TIMED_OUT, stdout, stderr + f"\ntimed out after {timeout_s:g} s".encode())
        return Completed(proc.returncode, stdout, stderr)

    def open_stream(self, command: str) -> ByteStream:
        return PipeStream(command)


# The shell session's side of the protocol: run one base64-encoded script in a child bash,
# then print a header and the exact bytes of its stdout and stderr. Files keep the two
# streams apart and binary-safe; the header's lengths frame them.
_SESSION_PRELUDE = r"""set +m
__tk() {
  local d rc s
  d=$(mktemp -d 2>/dev/null) || {
    s="toolkit: mktemp -d failed on the host (is /tmp full or read-only?)"
    printf '__TKSH__ %s 125 0 %s\n%s' "$1" "${#s}" "$s"; return; }
  s=$(printf %s "$2" | base64 -d)
  if [ "$3" = - ]; then bash -c "$s" </dev/null >"$d/o" 2>"$d/e"
  else timeout -k 2 "$3" bash -c "$s" </dev/null >"$d/o" 2>"$d/e"; fi
  rc=$?
  printf '__TKSH__ %s %s %s %s\n' "$1" "$rc" "$(stat -c %s "$d/o")" "$(stat -c %s "$d/e")"
  cat "$d/o" "$d/e"
  rm -rf "$d"
}
"""


class _ShellSession:
    """One remote bash that runs our scripts one after another over a single channel.

    sshd starts every exec channel through the user's shell, and ``~/.bashrc`` on GPU hosts (conda
    or pyenv init) costs 0.3-1 s per command; the session pays that once.
    """

    def __init__(self, channel: paramiko.Channel) -> None:
        self.channel = channel
        self.channel.exec_command("exec bash --noprofile --norc")
        self.channel.sendall(_SESSION_PRELUDE.encode())
        self._buffer = b""

    @property
    def usable(self) -> bool:
        return not self.channel.closed and not self.channel.exit_status_ready()

    def execute(self, script: str, timeout_s: float | None) -> Completed:
        token = os.urandom(8).hex()
        encoded = base64.b64encode(script.encode()).decode()
        limit = "-" if timeout_s is None else f"{max(timeout_s, 0.001):.3f}"
        self.channel.sendall(f"__tk {token} {encoded} {limit}\n".encode())
        deadline = None if timeout_s is None else time.monotonic() + timeout_s + 5.0
        marker = f"__TKSH__ {token} ".encode()
        while marker not in self._buffer or b"\n" not in self._buffer.split(marker, 1)[1]:
            self._fill(deadline)
        # anything before the marker is noise a startup file printed; drop it
        header, rest = self._buffer.split(marker, 1)[1].split(b"\n", 1)
        rc, out_len, err_len = (int(x) for x in header.split())
        self._buffer = rest
        while len(self._buffer) < out_len + err_len:
            self._fill(deadline)
        out, err = self._buffer[:out_len], self._buffer[out_len : out_len + err_len]
        self._buffer = self._buffer[out_len + err_len :]
        if rc == TIMED_OUT and timeout_s is not None:
            err += f"\ntimed out after {timeout_s:g} s".encode()
        return Completed(rc, out, err)

    def _fill(self, deadline: float | None) -> None:
        while True:
            wait_s = 30.0 if deadline is None else deadline - time.monotonic()
            if wait_s <= 0:
                raise TimeoutError("the shell session stopped answering")
            self.channel.settimeout(min(wait_s, 30.0))
            try:
                data = self.channel.recv(CHUNK)
            except TimeoutError:
                if self.channel.closed or not self.channel.get_transport().is_active():
                    raise EOFError("the connection went away while a command ran") from None
                continue  # a long command without timeout_s: keep waiting while the link lives
            if not data:
                raise EOFError("the shell session ended")
            self._buffer += data
            return

    def close(self) -> None:
        close_quietly(self.channel)


class SshTransport(Transport):
    """One fabric Connection, opened lazily and reopened if it dropped; channels are thread-safe."""

    is_local = False

    def __init__(self, settings: _ssh.SshSettings, gateway: Connection | None = None) -> None:
        self.settings = settings
        self.connection = _ssh.build_connection(settings, gateway)
        self.name = _ssh.describe(self.connection)
        self.address = str(self.connection.host)
        self._lock = threading.Lock()
        self._session_lock = threading.Lock()
        self._shell: _ShellSession | None = None

    def transport(self) -> paramiko.Transport:
        with self._lock:
            live = self.connection.client.get_transport()
            if live is None or not live.is_active():
                _ssh.close_connection(self.connection)
                _ssh.open_connection(self.connection, self.settings.connect_timeout_s)
            live = self.connection.client.get_transport()
            assert live is not None
            return live

    def _session(self, window_size: int | None = None) -> paramiko.Channel:
        live = self.transport()
        try:
            return live.open_session(window_size=window_size, timeout=self.settings.connect_timeout_s,
                                     max_packet_size=_SSH_PACKET if window_size else None)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise self._lost(exc) from exc

    def _lost(self, exc: BaseException) -> HostUnreachable:
        return HostUnreachable(f"the SSH connection to {self.name} failed while in use", host=self.address,
                               evidence=[f"{type(exc).__name__}: {exc}"],
                               hint="check the network and the host; the next call reconnects")

    def execute(self, script: str, *, stdin: bytes | None = None,
                timeout_s: float | None = None) -> Completed:
        # the shell session when it is free; a fresh channel for stdin data or a concurrent call
        if stdin is None and self._session_lock.acquire(blocking=False):
            try:
                return self._in_session(script, timeout_s)
            finally:
                self._session_lock.release()
        return self._in_channel(script, stdin, timeout_s)

    def _in_session(self, script: str, timeout_s: float | None) -> Completed:
        shell = self._shell
        if shell is None or not shell.usable or not self.transport().is_active():
            if shell is not None:
                shell.close()
            shell = self._shell = _ShellSession(self._session())
        try:
            return shell.execute(script, timeout_s)
        except BaseException as exc:
            # mid-protocol (a lost link, or Ctrl-C in the notebook): this session is unusable
            shell.close()
            self._shell = None
            if isinstance(exc, paramiko.SSHException | EOFError | OSError):  # OSError covers TimeoutError
                raise self._lost(exc) from exc
            raise

    def _in_channel(self, script: str, stdin: bytes | None, timeout_s: float | None) -> Completed:
        command = f"bash -c {quote(script)}" if timeout_s is None else timeout_script(script, timeout_s)
        # the remote `timeout` ends the command; this local bound only covers a dead link
        deadline = None if timeout_s is None else time.monotonic() + timeout_s + 5.0
        channel = self._session()
        try:
            channel.exec_command(command)
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
            return _collect(channel, deadline, timeout_s)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise self._lost(exc) from exc
        finally:
            close_quietly(channel)

    def open_stream(self, command: str) -> ByteStream:
        channel = self._session(window_size=_SSH_WINDOW)
        try:
            channel.set_combine_stderr(True)
            channel.exec_command(f"bash -c {quote(stream_script(command))}")
        except (paramiko.SSHException, EOFError, OSError) as exc:
            close_quietly(channel)
            raise self._lost(exc) from exc
        return ChannelStream(channel)

    def close(self) -> None:
        with self._lock:
            if self._shell is not None:
                self._shell.close()
                self._shell = None
            _ssh.close_connection(self.connection)


class WrappedTransport(Transport):
    """Bash run through a command prefix on another transport: ``docker exec -i NAME``, ``srun --jobid J -w NODE``.

    The prefix must forward stdin (``-i`` for docker/podman exec; srun does), so that a stream's
    far-side watcher ends its command when we close. A timeout is enforced inside; the outer bound,
    a little later, only covers a prefix that hangs.
    """

    def __init__(self, outer: Transport, prefix: Sequence[str], *, name: str, address: str | None = None) -> None:
        self.outer = outer
        self.prefix = join(prefix)
        self.name = name
        self.address = address if address is not None else outer.address
        self.is_local = False  # a pid in there is not one of this Python process's

    def execute(self, script: str, *, stdin: bytes | None = None,
                timeout_s: float | None = None) -> Completed:
        if timeout_s is not None:
            script, timeout_s = timeout_script(script, timeout_s), timeout_s + 10.0
        return self.outer.execute(f"{self.prefix} bash -c {quote(script)}", stdin=stdin, timeout_s=timeout_s)

    def open_stream(self, command: str) -> ByteStream:
        return self.outer.open_stream(f"{self.prefix} bash -c {quote(stream_script(command))}")


def _collect(channel: paramiko.Channel, deadline: float | None, timeout_s: float | None) -> Completed:
    out: list[bytes] = []
    err: list[bytes] = []
    while True:
        while channel.recv_ready():
            out.append(channel.recv(CHUNK))
        while channel.recv_stderr_ready():
            err.append(channel.recv_stderr(CHUNK))
        # EOF follows the last data byte (sshd may send the exit status before it)
        if channel.eof_received and channel.exit_status_ready():
            if not channel.recv_ready() and not channel.recv_stderr_ready():
                return Completed(channel.exit_status, b"".join(out), b"".join(err))
            continue
        if channel.closed:
            raise EOFError("the channel closed before the command reported its exit status")
        wait_s = 0.2
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = f"\ntimed out after {timeout_s:g} s".encode()
                return Completed(TIMED_OUT, b"".join(out), b"".join(err) + timed_out)
            wait_s = min(wait_s, left)
        select.select([channel], [], [], wait_s)
