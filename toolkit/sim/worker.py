"""`python -m toolkit.sim.worker`: one simulated engine process (SGLang TP scheduler, vLLM EngineCore or
Worker_TPn). It plays its start-up script, reports "ready" or "failed" over a pipe, then idles; like SGLang's
`kill_itself_when_parent_died` it dies with its parent (PR_SET_PDEATHSIG, plus polling).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Mapping

import setproctitle

from toolkit.sim import faults
from toolkit.sim.args import SimConfig, parse_server_args
from toolkit.sim.logs import LogWriter, record, vllm_label, vllm_plain
from toolkit.sim.release import role_of
from toolkit.sim.release_logs import watchdog_lines
from toolkit.sim.startup import Line, Script, phases, sglang_worker_script
from toolkit.sim.startup_vllm import vllm_engine_script, vllm_worker_script

__all__ = ["main"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the parent poll below still applies
    if os.getppid() != parent_pid:
        os._exit(0)  # the parent died before prctl took effect


class _Process:
    """This process's identity and how it formats its lines."""

    def __init__(self, config: SimConfig, role: str, rank: int) -> None:
        self.config, self.role, self.rank, self.pid = config, role, rank, os.getpid()
        self.writer = LogWriter(1, config.log_level)
        self.vllm_label = vllm_label(role, rank, self.pid)

    def format(self, line: Line) -> str:
        engine, label = self.config.engine, self.vllm_label
        if line.style != "plain":
            rank = self.rank if self.config.tp_size > 1 else None
            return record(engine, time.time(), line.text, label, line.level, line.source, rank)
        if engine == "sglang":
            return line.text
        return "\n".join(vllm_plain(label, p) for p in line.text.split("\n"))

    def write(self, line: Line) -> None:
        self.writer.write(self.format(line), line.level)

    def script(self) -> Script:
        if self.config.engine == "sglang":
            return sglang_worker_script(self.config, self.rank, self.pid)
        if self.role == "engine-core":
            return vllm_engine_script(self.config, self.pid)
        return vllm_worker_script(self.config, self.rank, self.pid)


def process_title(engine: str, role: str, rank: int, tp_size: int) -> str:
    """The title the imitated engine gives this process with setproctitle.

    vLLM 0.25.0: ``VLLM::EngineCore`` (vllm/v1/engine/core.py:1166-1171, vllm/utils/system_utils.py:184-198)
    and ``VLLM::Worker_TP{r}`` when tp > 1 (vllm/v1/executor/multiproc_executor.py:1036-1043); SGLang:
    ``sglang::scheduler_TP{r}``. setproctitle writes over argv *and* environ: ``/proc/<pid>/environ`` then
    reads as NUL bytes although ``os.environ`` holds every variable (issue 23).
    """
    if engine == "vllm":
        if role == "engine-core":
            return "VLLM::EngineCore"
        return f"VLLM::Worker_TP{rank}" if tp_size > 1 else "VLLM::Worker"
    return f"sglang::scheduler_TP{rank}"


def nccl_echo_lines(env: Mapping[str, str], rank: int, pid: int, at_s: float, host: str) -> list[Line]:
    """NCCL's echo of the variables it read from os.environ (``NCCL_DEBUG=INFO``), as NCCL 2.2x prints it:
    integers end with a period (the H200 torchrun log tests/data/logs/127)."""
    if env.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        return []
    return [Line(at_s, f"{host}:{pid}:{pid} [{rank}] NCCL INFO {name} set by environment to {value}"
                       + ("." if value.isdigit() else ""), style="plain")
            for name, value in sorted(env.items())
            if name.startswith("NCCL_") and not name.startswith("NCCL_DEBUG")]


def _sleep_until(deadline: float, parent_pid: int) -> None:
    while (remaining := deadline - time.monotonic()) > 0:
        time.sleep(min(remaining, 0.5))
        if os.getppid() != parent_pid:
            os._exit(0)


def _report(fd: int, word: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, (word + "\n").encode())


def _crash(proc: _Process, parent_pid: int, ready_fd: int) -> int:
    """crash-while-serving: the fatal traceback, then the engine's way of telling the server."""
    speculative = proc.config.speculation is not None
    if proc.config.engine == "sglang":
        text = "Scheduler hit an exception: " + "\n".join(faults.sglang_crash_traceback(speculative))
        proc.write(Line(0.0, text, level="error"))
        return _wait_for_death(parent_pid, sigquit=True)
    core, _ = faults.vllm_engine_dead_traceback()
    proc.write(Line(0.0, "\n".join(["EngineCore encountered a fatal error.", *core]), level="error",
                    source="core.py:944"))
    _report(ready_fd, "failed")
    return 1


def _stall(proc: _Process, parent_pid: int) -> int:
    """A forward step that never returns: after --watchdog-timeout the watchdog logs, waits 5 s and sends
    SIGQUIT (0.4.10 managers/scheduler.py:2010-2017; 0.5.23 utils/watchdog.py:147-166)."""
    timeout = float(str(proc.config.namespace.get("watchdog_timeout") or 300))
    time.sleep(timeout)
    for text in watchdog_lines(proc.config.release, timeout):
        proc.write(Line(0.0, text, level="error"))
    time.sleep(5)
    return _wait_for_death(parent_pid, sigquit=proc.config.engine == "sglang")


def _wait_for_death(parent_pid: int, sigquit: bool) -> int:
    """Stay, like SGLang's scheduler, until the server kills the tree (``sigquit``: after a SIGQUIT to it)."""
    if sigquit:
        os.kill(parent_pid, signal.SIGQUIT)
    while os.getppid() == parent_pid:
        time.sleep(0.2)
    return 1


def _idle(proc: _Process, parent_pid: int, ready_fd: int, command_fd: int) -> int:
    """Stay alive until the server goes away or sends a command ("crash", "stall" or "exit")."""
    buffer = b""
    while True:
        readable, _, _ = select.select([command_fd], [], [], 0.5)
        if os.getppid() != parent_pid:
            return 0
        if not readable:
            continue
        data = os.read(command_fd, 256)
        if not data:
            return 0  # the server closed our pipe: it is shutting down
        buffer += data
        while b"\n" in buffer:
            word, buffer = buffer.split(b"\n", 1)
            if word == b"crash":
                return _crash(proc, parent_pid, ready_fd)
            if word == b"stall":
                return _stall(proc, parent_pid)
            if word == b"exit":
                return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    cut = args.index("--") if "--" in args else len(args)
    own, server_argv = args[:cut], args[cut + 1:]
    parser = argparse.ArgumentParser(prog="toolkit.sim.worker", description=__doc__)
    parser.add_argument("--engine", choices=["sglang", "vllm"], required=True)
    parser.add_argument("--role", choices=["scheduler", "engine-core", "worker"], required=True)
    for flag in ("--tp-rank", "--parent-pid", "--ready-fd", "--command-fd"):
        parser.add_argument(flag, type=int, required=True)
    parser.add_argument("--t0", type=float, default=None, help="time.monotonic() at spawn, shared by all ranks")
    ns = parser.parse_args(own)
    _die_with_parent(ns.parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the server decides
    config = parse_server_args(server_argv)
    # what the release writes in this process itself (or before a fork): in os.environ, never in /proc
    os.environ.update(config.release.child_environment(os.environ, ns.role, config.env_context)[1])
    setproctitle.setproctitle(process_title(ns.engine, ns.role, ns.tp_rank, config.tp_size))
    proc = _Process(config, ns.role, ns.tp_rank)
    script = proc.script()
    if config.tp_size > 1 and role_of(config.engine, ns.role) == "worker":
        echoes = nccl_echo_lines(os.environ, ns.tp_rank, proc.pid, phases(config).dist * 0.9, socket.gethostname())
        script = Script(tuple(sorted((*script.lines, *echoes), key=lambda line: line.at_s)), script.outcome,
                        script.outcome_at_s)
    start = time.monotonic() if ns.t0 is None else ns.t0
    for line in script.lines:
        _sleep_until(start + line.at_s, ns.parent_pid)
        proc.write(line)
    _sleep_until(start + script.outcome_at_s, ns.parent_pid)
    if script.outcome == "fail":
        if proc.config.engine == "sglang":
            return _wait_for_death(ns.parent_pid, sigquit=True)
        _report(ns.ready_fd, "failed")
        return 1
    if script.outcome == "ready":
        _report(ns.ready_fd, "ready")
    return _idle(proc, ns.parent_pid, ns.ready_fd, ns.command_fd)


if __name__ == "__main__":
    raise SystemExit(main())
