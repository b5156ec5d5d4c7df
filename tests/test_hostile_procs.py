"""Issue 25: no process outlives its stop silently. A group whose leader died is still found and stopped;
a record is removed only when nothing of it runs; a pid without a start token is never signalled."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_process import free_port

from toolkit.cli.servers import ps_main, stop_main
from toolkit.errors import HostError
from toolkit.host import launches
from toolkit.host.host import Host, ProcessHandle
from toolkit.host.launches import LaunchRecord, Owner
from toolkit.server import registry
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec


def _gone_driver() -> Owner:
    """The owner a record names after the driver was killed: a process that has exited."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return Owner(socket.gethostname(), int(done.stdout), 1)


def _record(host: Host, handle: ProcessHandle, start_ticks: int | None) -> LaunchRecord:
    record = LaunchRecord(pid=handle.pid, start_ticks=start_ticks, description="sim TP2", port=1,
                          log_path=handle.log_path, host=host.name, owner=_gone_driver(), started_at=time.time())
    host.run(launches.write_script(record))
    return record


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait(condition: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Host:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return Host.local()


def test_a_rank_that_outlives_its_killed_leader_is_found_and_stopped(host: Host, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    handle = host.start_detached("sleep 300 & echo $! > rank.pid; exec sleep 301", log_path=str(tmp_path / "s.log"),
                                 cwd=str(tmp_path))
    _wait(lambda: (tmp_path / "rank.pid").is_file() and (tmp_path / "rank.pid").read_text().strip())
    rank = int((tmp_path / "rank.pid").read_text())
    _record(host, handle, handle.start_ticks)
    os.kill(handle.pid, signal.SIGKILL)  # the OOM killer picks the leader
    _wait(lambda: not _alive(handle.pid))
    try:
        assert ps_main([]) == 0
        out = capsys.readouterr().out
        assert f"{handle.pid}" in out and "orphan" in out and "1 process(es) of its group still run" in out, out
        assert stop_main(["--all-mine"]) == 0
        assert f"pid {handle.pid} on localhost: stopped 1 process(es)" in capsys.readouterr().out
        _wait(lambda: not _alive(rank))
        assert not _alive(rank)
        assert registry.verdicts(host) == []  # removed only now that nothing of it runs
    finally:
        if _alive(rank):
            os.kill(rank, signal.SIGKILL)


def test_a_record_without_a_start_token_is_never_signalled(host: Host, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    handle = host.start_detached("exec sleep 300", log_path=str(tmp_path / "s.log"))
    try:
        _record(host, handle, None)  # as written when /proc/PID/stat could not be read
        [seen] = registry.verdicts(host)
        assert seen.status == "unverified" and "may be another process" in seen.why
        assert stop_main(["--all-mine"]) == 0 and "nothing to stop" in capsys.readouterr().out
        assert stop_main([str(handle.pid)]) == 1
        assert "not stopped: " in capsys.readouterr().err
        assert _alive(handle.pid)
    finally:
        host.stop(handle, grace_s=1)


def test_a_helper_that_double_forks_into_its_own_session_is_reported_by_stop(host: Host, tmp_path: Path) -> None:
    helper = tmp_path / "helper.pid"
    script = f"(setsid sh -c 'echo $$ > {helper}; exec sleep 300' &); exec sleep 300"
    spec = ServerSpec("transformers", ("bash", "-c", script), port=free_port())
    server = launch(host, spec, log_dir=str(tmp_path), check_port=False, validate=False)
    _wait(lambda: helper.is_file() and helper.read_text().strip())
    escaped = int(helper.read_text())
    try:
        with pytest.raises(HostError, match="1 process\\(es\\) .* left its process group and session") as caught:
            server.stop(grace_s=1)
        assert f"kill {escaped}" in str(caught.value) and _alive(escaped)
    finally:
        os.kill(escaped, signal.SIGKILL)
    _wait(lambda: not _alive(escaped))
    assert server.stop(grace_s=1).already_stopped  # nothing left: the stop now ends quietly
