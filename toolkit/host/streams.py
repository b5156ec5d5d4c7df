r"""ByteStream: one long-lived stream of a command's output, from a local pipe or one SSH channel.

A log follower reads one ``tail -F`` for hours (the seed's ``ssh ... grep`` every 75 s saw the log
late); reads return large chunks, and closing the stream ends the command, here or remotely.

>>> from toolkit.host.host import Host
>>> with Host.local().open_stream("echo hello") as stream:
...     stream.read(5.0)
b'hello\n'
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess

import paramiko

__all__ = ["ByteStream", "PipeStream", "ChannelStream", "CHUNK", "close_quietly", "kill_group"]

CHUNK = 1 << 20


class ByteStream:
    """``read(timeout_s)``: the bytes available (up to 1 MiB), ``b""`` at the end, None if none came."""

    def read(self, timeout_s: float) -> bytes | None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    @property
    def exit_code(self) -> int | None:
        """The command's exit status once it ended, else None."""
        raise NotImplementedError

    def __enter__(self) -> ByteStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class PipeStream(ByteStream):
    def __init__(self, command: str) -> None:
        # stdin is a pipe we never write, closed with the stream: a command that forwards its stdin
        # (`docker exec -i`, `srun`) carries that EOF to a watcher on the far side, as an SSH channel does.
        self._proc = subprocess.Popen(["bash", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, start_new_session=True, bufsize=0)
        assert self._proc.stdout is not None
        self._fd = self._proc.stdout.fileno()
        self._eof = False

    def read(self, timeout_s: float) -> bytes | None:
        if self._eof or self._proc.stdout is None or self._proc.stdout.closed:
            return b""
        try:
            ready, _, _ = select.select([self._fd], [], [], max(timeout_s, 0))
            if not ready:
                return None
            data = os.read(self._fd, CHUNK)
        except (OSError, ValueError):  # closed by another thread while we waited: the stream has ended
            self._eof = True
            return b""
        if not data:
            self._eof = True
            self._proc.wait()
        return data

    def close(self) -> None:
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        if self._proc.poll() is None:
            kill_group(self._proc)
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    @property
    def exit_code(self) -> int | None:
        return self._proc.poll()


class ChannelStream(ByteStream):
    def __init__(self, channel: paramiko.Channel) -> None:
        self._channel = channel

    def read(self, timeout_s: float) -> bytes | None:
        self._channel.settimeout(max(timeout_s, 0.0))
        try:
            return bytes(self._channel.recv(CHUNK))
        except TimeoutError:
            return None

    def close(self) -> None:
        close_quietly(self._channel)  # the remote watcher sees EOF on stdin and ends the command

    @property
    def exit_code(self) -> int | None:
        return self._channel.exit_status if self._channel.exit_status_ready() else None


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = 2.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=grace_s)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            pass


def close_quietly(channel: paramiko.Channel) -> None:
    """Close a channel; on a connection that already died there is nothing left to tell the peer."""
    with contextlib.suppress(EOFError, OSError, paramiko.SSHException):
        channel.close()
