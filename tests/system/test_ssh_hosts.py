"""Host through a real loopback sshd and on Host.local(): processes, streams, files, host keys.

Every ``any_host`` test runs twice, locally and over SSH, and must behave the same. The
SSH-only tests cover what only SSH has: host keys, unreachable hosts, credentials, jump
hosts, ssh_config, and processes outliving the session.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sim_process import LISTENER, listening_process
from system.sshd import LoopbackSshd

from toolkit.errors import (
    AuthenticationFailed,
    ChangedHostKey,
    CommandFailed,
    CommandNotFound,
    HostUnreachable,
    ToolkitError,
    UnknownHostKey,
)
from toolkit.host.group import HostGroup
from toolkit.host.host import Host, ProcessHandle

MakeSshHost = Callable[..., Host]


def _marker() -> str:
    """A sleep duration no other process on this machine uses, to find ours with ps."""
    return f"{random.randint(10_000, 99_999)}.{random.randint(100, 999)}"


def _live_rows(host: Host) -> list[tuple[int, int]]:
    """(pid, pgid) of every live process, from ``ps`` (not from our own /proc reader)."""
    rows = []
    for line in host.run("ps -eo pid=,pgid=,stat=").stdout.splitlines():
        pid, pgid, stat = line.split()
        if not stat.startswith("Z"):
            rows.append((int(pid), int(pgid)))
    return rows


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


# -- processes ---------------------------------------------------------------------------------
TREE = """\
sleep {m} &
bash -c 'sleep {m} & wait' &
(trap '' TERM; exec sleep {m}) &
setsid sleep {m} &
echo started
wait
"""


def test_stop_ends_the_whole_tree_including_term_ignoring_and_escaped_children(
    any_host: Host, tmp_path: Path
) -> None:
    marker = _marker()
    handle = any_host.start_detached(TREE.format(m=marker), log_path=f"{tmp_path}/tree.log")
    _wait_for(lambda: len(any_host.process_tree(handle.pid)) >= 6)
    tree = {info.pid for info in any_host.process_tree(handle.pid)}
    assert handle.pid in tree

    report = any_host.stop(handle, grace_s=1.0)

    assert not report.already_stopped and report.sigkill_sent  # the TERM-ignoring sleep needed KILL
    assert report.survivors == () and tree <= set(report.signalled)
    left = [(pid, pgid) for pid, pgid in _live_rows(any_host) if pid in tree or pgid == handle.pid]
    assert left == []
    assert marker not in any_host.run("ps -eo args=").stdout
    assert any_host.stop(handle).already_stopped  # idempotent
    assert not any_host.is_alive(handle)


def test_a_gentle_process_stops_on_sigterm_within_the_grace(any_host: Host, tmp_path: Path) -> None:
    handle = any_host.start_detached(f"exec sleep {_marker()}", log_path=f"{tmp_path}/s.log")
    assert any_host.is_alive(handle) and any_host.is_alive(handle.pid)
    report = any_host.stop(handle, grace_s=5.0)
    assert not report.sigkill_sent and report.elapsed_s < 5.0


def test_a_child_forked_by_the_term_handler_is_stopped_too(any_host: Host, tmp_path: Path) -> None:
    # The signal and the wait for its targets travel in one round trip: a process that appears after
    # the signal (a shutdown hook's child, in the server's group) must still be found and signalled.
    marker = _marker()
    script = f"trap '(exec sleep {marker}) & echo forked; exit 0' TERM\necho trapped\nwhile :; do sleep 0.05; done"
    handle = any_host.start_detached(script, log_path=f"{tmp_path}/fork.log")
    assert any_host.is_alive(handle)
    # A TERM that lands before bash has set its trap kills it silently: signal once the trap is set.
    # (the detached shell makes its log file itself: on a busy machine the first look may come before it exists)
    _wait_for(lambda: "trapped" in any_host.run(f"cat {tmp_path}/fork.log", check=False).stdout)

    report = any_host.stop(handle, grace_s=5.0)

    assert "forked" in any_host.run(f"cat {tmp_path}/fork.log").stdout  # the handler ran, then the bash exited
    assert report.survivors == () and not report.sigkill_sent and len(report.signalled) >= 1
    assert marker not in any_host.run("ps -eo args=").stdout


def test_a_stale_handle_never_signals_a_process_that_reused_the_pid(any_host: Host, tmp_path: Path) -> None:
    handle = any_host.start_detached(f"exec sleep {_marker()}", log_path=f"{tmp_path}/s.log")
    stale = ProcessHandle(handle.host, handle.pid, handle.log_path, handle.command, handle.started_at, 1)
    assert not any_host.is_alive(stale)
    assert any_host.stop(stale).already_stopped
    assert any_host.is_alive(handle)
    any_host.stop(handle)


def test_process_tree_reads_descendants_argv_and_environment(any_host: Host, tmp_path: Path) -> None:
    marker = _marker()
    value = "a b\n'c' $HOME \\ ü"
    handle = any_host.start_detached(
        f"TK_CHILD=1 sleep {marker} & wait",
        log_path=f"{tmp_path}/env.log",
        env={"TK_VALUE": value},
        cwd=str(tmp_path),
    )
    try:
        _wait_for(lambda: len(any_host.process_tree(handle.pid)) >= 2)
        root, child = any_host.process_tree(handle.pid)[:2]
        assert root.pid == handle.pid and child.ppid == handle.pid
        assert child.cmdline == ("sleep", marker) and child.error is None
        assert (
            child.environ is not None
            and child.environ["TK_VALUE"] == value
            and child.environ["TK_CHILD"] == "1"
        )
        assert root.environ is not None and "TK_CHILD" not in root.environ
    finally:
        any_host.stop(handle)
    [gone] = any_host.process_tree(handle.pid)
    assert gone.environ is None and "does not exist" in (gone.error or "")


def test_run_errors_and_timeouts(any_host: Host) -> None:
    assert any_host.run("echo $((1+2))").stdout == "3\n"
    with pytest.raises(CommandNotFound):
        any_host.run("no-such-program-tk")
    marker = _marker()
    started = time.monotonic()
    with pytest.raises(CommandFailed, match="did not finish within 0.5 s") as info:
        any_host.run(f"sleep {marker}", timeout_s=0.5)
    assert time.monotonic() - started < 4.0 and info.value.exit_code == 124
    _wait_for(lambda: marker not in any_host.run("ps -eo args=").stdout, timeout_s=5)


def test_a_background_child_does_not_hold_run(any_host: Host) -> None:
    started = time.monotonic()
    pid = int(any_host.run(f"sleep {_marker()} & echo $!").stdout)
    assert time.monotonic() - started < 3.0
    assert any_host.is_alive(pid)
    any_host.run(f"kill {pid}")


def test_files_round_trip_bytes(any_host: Host, tmp_path: Path) -> None:
    data = bytes(range(256)) * 3
    any_host.write_file(f"{tmp_path}/new dir/blob.bin", data)
    assert any_host.read_file(f"{tmp_path}/new dir/blob.bin") == data
    # read_file reads regular files only: a missing path and a directory are refused alike.
    with pytest.raises(CommandFailed, match="exited with status 3(.|\\n)*not a regular file"):
        any_host.read_file(f"{tmp_path}/missing")
    with pytest.raises(CommandFailed, match="not a regular file"):
        any_host.read_file(f"{tmp_path}/new dir")


def test_port_holder_names_the_listening_process(any_host: Host) -> None:
    # The holder is a separate plain python: the xdist worker renames itself (setproctitle).
    with listening_process() as (pid, port):
        holder = any_host.port_holder(port)
        assert holder is not None and holder[0] == pid and "python" in holder[1] and LISTENER[:20] in holder[1]
    assert any_host.port_holder(port) is None


# -- streams -----------------------------------------------------------------------------------
def _drain(stream: object, timeout_s: float = 10.0) -> bytes:
    chunks, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        chunk = stream.read(0.5)  # type: ignore[attr-defined]
        if chunk == b"":
            return b"".join(chunks)
        if chunk:
            chunks.append(chunk)
    raise AssertionError("stream did not end")


def test_stream_reads_to_eof_and_reports_the_exit_code(any_host: Host) -> None:
    with any_host.open_stream("for i in 1 2 3; do echo line $i; done; echo err >&2; exit 3") as stream:
        assert _drain(stream) == b"line 1\nline 2\nline 3\nerr\n"
        _wait_for(lambda: stream.exit_code is not None, timeout_s=5)
        assert stream.exit_code == 3


def test_stream_read_times_out_with_none_and_close_ends_the_command(any_host: Host) -> None:
    marker = _marker()
    stream = any_host.open_stream(f"sleep {marker}")
    assert stream.read(0.2) is None
    _wait_for(lambda: marker in any_host.run("ps -eo args=").stdout)
    stream.close()
    _wait_for(lambda: marker not in any_host.run("ps -eo args=").stdout)


# -- SSH only ----------------------------------------------------------------------------------


@pytest.mark.ssh
def test_a_detached_process_survives_the_ssh_session(make_ssh_host: MakeSshHost, tmp_path: Path) -> None:
    first = make_ssh_host("127.0.0.2")
    handle = first.start_detached(f"exec sleep {_marker()}", log_path=f"{tmp_path}/survivor.log")
    first.close()
    second = make_ssh_host("127.0.0.2")
    assert second.is_alive(handle)
    assert second.stop(handle).already_stopped is False
    assert first.is_alive(handle) is False  # a closed Host reconnects on use


@pytest.mark.ssh
def test_a_dropped_connection_is_reported_then_reopened(make_ssh_host: MakeSshHost) -> None:
    host = make_ssh_host("127.0.0.2")
    # the parent of our shell session is sshd's process for this connection: kill it
    server_side = int(host.run("ps -o ppid= -p $PPID").stdout)
    with pytest.raises(HostUnreachable, match="failed while in use") as info:
        host.run(f"kill -9 {server_side}; sleep 5")
    assert "the next call reconnects" in str(info.value)
    assert host.run("echo back").stdout == "back\n"


@pytest.mark.ssh
def test_ssh_host_identity(ssh_host: Host, sshd: LoopbackSshd) -> None:
    assert ssh_host.name == f"{sshd.user}@127.0.0.1:{sshd.port}"
    assert ssh_host.address == "127.0.0.1" and not ssh_host.is_local
    assert ssh_host.run("echo $SSH_CONNECTION").stdout.split()[2:] == ["127.0.0.1", str(sshd.port)]


@pytest.mark.ssh
def test_an_unknown_host_key_is_refused_with_its_fingerprint_and_the_fix(
    make_ssh_host: MakeSshHost, sshd: LoopbackSshd, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(UnknownHostKey) as info:
        make_ssh_host(known_hosts=str(empty)).run("true")
    message = str(info.value)
    assert sshd.fingerprint() in message
    assert (
        f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {empty}" in message and "trust_on_first_use=True" in message
    )
    assert empty.read_text() == ""


@pytest.mark.ssh
def test_a_changed_host_key_is_refused_even_with_trust_on_first_use(
    make_ssh_host: MakeSshHost, sshd: LoopbackSshd
) -> None:
    for tofu in (False, True):
        with pytest.raises(ChangedHostKey) as info:
            make_ssh_host(known_hosts=str(sshd.wrong_known_hosts), trust_on_first_use=tofu).run("true")
        assert sshd.fingerprint() in str(info.value) and "ssh-keygen -R" in str(info.value)


@pytest.mark.ssh
def test_trust_on_first_use_records_the_key_for_next_time(
    make_ssh_host: MakeSshHost, sshd: LoopbackSshd, tmp_path: Path
) -> None:
    recorded = tmp_path / "ssh" / "known_hosts"  # the directory does not exist yet
    assert make_ssh_host(known_hosts=str(recorded), trust_on_first_use=True).run("echo ok").stdout == "ok\n"
    assert recorded.read_text().split() == sshd.known_hosts.read_text().splitlines()[0].split()
    assert make_ssh_host(known_hosts=str(recorded)).run("echo again").stdout == "again\n"


@pytest.mark.ssh
def test_bad_credentials_are_authentication_failed(make_ssh_host: MakeSshHost, sshd: LoopbackSshd) -> None:
    with pytest.raises(AuthenticationFailed, match="refused our credentials"):
        make_ssh_host(key_filename=str(sshd.root / "impostor_ed25519")).run("true")


@pytest.mark.ssh
def test_a_closed_port_is_unreachable_at_once(make_ssh_host: MakeSshHost) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(HostUnreachable, match="cannot open an SSH session"):
        make_ssh_host(port=closed).run("true")
    assert time.monotonic() - started < 2.0


@pytest.mark.ssh
def test_a_silent_listener_is_unreachable_within_the_connect_timeout(make_ssh_host: MakeSshHost) -> None:
    with socket.socket() as blackhole:  # accepts TCP, never sends an SSH banner
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen()
        started = time.monotonic()
        with pytest.raises(HostUnreachable, match="did not answer as an SSH server within 1 s"):
            make_ssh_host(port=blackhole.getsockname()[1], connect_timeout_s=1.0).run("true")
        assert time.monotonic() - started < 3.0


@pytest.mark.ssh
def test_a_gateway_host_forwards_the_connection(make_ssh_host: MakeSshHost, sshd: LoopbackSshd) -> None:
    behind = make_ssh_host("127.0.0.3", gateway=make_ssh_host("127.0.0.1"))
    assert behind.run("echo $SSH_CONNECTION").stdout.split()[2:] == ["127.0.0.3", str(sshd.port)]


def _ssh_config(sshd: LoopbackSshd, tmp_path: Path) -> Path:
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host tk-jump\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n  IdentityFile {sshd.client_key}\n"
        f"Host tk-node\n  HostName 127.0.0.3\n  Port {sshd.port}\n  User {sshd.user}\n  IdentityFile {sshd.client_key}\n"
        "  ProxyJump tk-jump\n"
    )
    return config


@pytest.mark.ssh
def test_ssh_config_supplies_hostname_port_user_key_and_proxyjump(sshd: LoopbackSshd, tmp_path: Path) -> None:
    with Host(
        "tk-node", ssh_config=str(_ssh_config(sshd, tmp_path)), known_hosts=str(sshd.known_hosts)
    ) as host:
        assert host.name == f"{sshd.user}@127.0.0.3:{sshd.port}" and host.address == "127.0.0.3"
        assert host.run("echo $SSH_CONNECTION").stdout.split()[2] == "127.0.0.3"


@pytest.mark.ssh
def test_the_proxyjump_hop_key_is_checked_too(sshd: LoopbackSshd, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    right = [line for line in sshd.known_hosts.read_text().splitlines() if line.startswith("[127.0.0.3]")]
    wrong = [
        line for line in sshd.wrong_known_hosts.read_text().splitlines() if line.startswith("[127.0.0.1]")
    ]
    known.write_text("\n".join(right + wrong) + "\n")
    with (
        Host("tk-node", ssh_config=str(_ssh_config(sshd, tmp_path)), known_hosts=str(known)) as host,
        pytest.raises(ChangedHostKey, match=r"127\.0\.0\.1"),
    ):
        host.run("true")


@pytest.mark.ssh
def test_host_group_runs_on_ssh_and_local_hosts(ssh_hosts: list[Host], local_host: Host) -> None:
    group = HostGroup([*ssh_hosts, local_host, ssh_hosts[0]])  # a host named twice runs once
    results = group.run("echo ${SSH_CONNECTION:-local}; exit 3", check=False)
    assert list(results) == [h.name for h in [*ssh_hosts, local_host]]
    seen = [r.stdout.split()[-2] if r.host != "localhost" else r.stdout.strip() for r in results.values()]
    assert seen == ["127.0.0.1", "127.0.0.2", "127.0.0.3", "local"]
    assert {r.exit_code for r in results.values()} == {3}
    with pytest.raises(CommandFailed, match=r"failed on 1 of 4 hosts: localhost \(exit 4\)"):
        group.run('[ -n "$SSH_CONNECTION" ] || exit 4')


@pytest.mark.ssh
def test_a_handle_is_only_valid_on_the_host_that_started_it(ssh_host: Host) -> None:
    with pytest.raises(ToolkitError, match="was started on localhost"):
        ssh_host.stop(ProcessHandle("localhost", 12345, "/tmp/x.log", "sleep 1", 0.0))
