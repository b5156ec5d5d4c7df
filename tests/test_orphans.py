"""No orphans: a driver's servers die with it (SIGTERM, exit); after `kill -9` the next session finds and stops them.

Real processes throughout: a driver subprocess launches the simulator (TP ranks are real child
processes), the test signals the driver and reads /proc. Records go to a temporary
XDG_CACHE_HOME locally; over SSH they go to the test user's own cache, so the SSH test
stops only the pid it launched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sim_process import free_port, terminal_signals

from toolkit.errors import PortInUse
from toolkit.host.host import Host
from toolkit.server import registry
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec

DRIVER = """
import json, sys, time
from toolkit.host.host import Host
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec
args = json.loads(sys.argv[1])
host = Host.local() if args["ssh"] is None else Host(args["ssh"].pop("hostname"), **args["ssh"])
spec = ServerSpec.simulator(tp=2, port=args["port"]).with_flags({"--sim-startup-s": 0.5})


def serve(port, host=host):
    with launch(host, spec.with_flags({"--port": port}), log_dir=args["log_dir"], validate=False,
                outlive=args["outlive"]) as server:
        server.wait_ready(timeout_s=120)
        pids = [p.pid for p in host.process_tree(server.pid)]
        print(json.dumps({"pid": server.pid, "tree": pids}), flush=True)
        time.sleep(600)


if args["lanes"]:  # each server launched from a host pool's lane, a worker thread (a fan-out)
    from toolkit.moves.fan_out import HostPool
    second = Host.local().inside(["env"], name="local-2")  # this machine again, under another name: a second lane
    HostPool([host, second]).run([[args["port"]], [args["port"] + 1]], lambda lane, port: serve(port, lane.host),
                                       progress=False)
else:
    serve(args["port"])
"""


def _alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text.rpartition(")")[2].split()[0] not in ("Z", "X")


def _wait_gone(pids: list[int], timeout_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


class Driver:
    """A driver process that launched the simulator; ``tree`` are the server's pids (launcher and TP ranks)."""

    def __init__(self, tmp_path: Path, ssh: dict[str, Any] | None = None, outlive: bool = False,
                 lanes: bool = False) -> None:
        self.cache = tmp_path / "cache"
        self.env = {**os.environ, "XDG_CACHE_HOME": str(self.cache)}
        args = {"ssh": ssh, "port": free_port(), "log_dir": str(tmp_path / "logs"), "outlive": outlive, "lanes": lanes}
        # the signals at their defaults, as a terminal starts it: under nohup (or a script's background) SIGHUP or
        # SIGINT arrive ignored and inherited, and the driver rightly keeps ignoring them
        self.proc = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(args)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=self.env, preexec_fn=terminal_signals)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the driver ended before its server was ready: {self.proc.communicate()[1]}")
        seen = json.loads(line)
        self.port = args["port"]
        self.pid: int = seen["pid"]
        self.tree: list[int] = seen["tree"]
        assert len(self.tree) >= 3, self.tree  # launcher + two TP ranks
        if lanes:  # the second lane's server
            self.tree += json.loads(self.proc.stdout.readline())["tree"]

    def kill(self, signum: int) -> int:
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=60)

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "toolkit", *argv], env=self.env, capture_output=True,
                              text=True, timeout=120)

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()  # reaps it and closes its pipes
        for pid in self.tree:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def driver(tmp_path: Path) -> Any:
    made: list[Driver] = []

    def make(**kwargs: Any) -> Driver:
        made.append(Driver(tmp_path, **kwargs))
        return made[-1]

    yield make
    for each in made:
        each.cleanup()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signalled_driver_takes_its_server_and_ranks_with_it(driver: Any, signum: int) -> None:
    one = driver()
    assert one.kill(signum) == -signum  # the signal still ends the driver, after the stop
    assert _wait_gone(one.tree, timeout_s=5) == []
    assert one.cli("ps").stdout.startswith("no recorded server")


def test_sigterm_takes_the_servers_launched_from_a_pools_lanes_with_it(driver: Any) -> None:
    """A fan-out launches from worker threads, which cannot install signal handlers: the pool arms them first."""
    two = driver(lanes=True)
    assert len(two.tree) >= 6, two.tree  # two servers, each a launcher and two TP ranks
    assert two.kill(signal.SIGTERM) == -signal.SIGTERM
    assert _wait_gone(two.tree, timeout_s=10) == []


def test_after_kill_9_the_next_session_finds_the_orphan_and_stops_it(driver: Any, monkeypatch: Any) -> None:
    one = driver()
    assert one.kill(signal.SIGKILL) == -signal.SIGKILL
    time.sleep(1.0)
    assert all(_alive(p) for p in one.tree)  # kill -9 runs no hook: the server is left behind
    monkeypatch.setenv("XDG_CACHE_HOME", str(one.cache))
    found = registry.leftovers(Host.local())
    assert found["pid"].tolist() == [one.pid]
    assert found["server"].tolist() == ["sim sim-startup-s=0.5"] and "is gone" in found["why"][0]
    listed = one.cli("ps")
    assert f"{one.pid:>8}  orphan" in listed.stdout and "stop --all-mine" in listed.stdout

    with pytest.raises(PortInUse) as held:  # a relaunch on the port names the orphan and the one command
        launch(Host.local(), ServerSpec.simulator(tp=1, port=one.port), validate=False)
    assert "is gone" in str(held.value) and f"python -m toolkit stop {one.pid}" in (held.value.hint or "")

    stopped = one.cli("stop", "--all-mine")
    assert stopped.returncode == 0, stopped.stderr
    assert f"pid {one.pid} on localhost: stopped" in stopped.stdout
    assert _wait_gone(one.tree, timeout_s=5) == []
    assert registry.leftovers(Host.local()).empty
    assert one.cli("stop", "--all-mine").stdout.startswith("nothing to stop")


def test_a_server_launched_to_outlive_its_driver_is_kept_not_orphaned(driver: Any, monkeypatch: Any) -> None:
    one = driver(outlive=True)
    one.kill(signal.SIGTERM)
    time.sleep(0.5)
    assert all(_alive(p) for p in one.tree)
    monkeypatch.setenv("XDG_CACHE_HOME", str(one.cache))
    assert registry.leftovers(Host.local()).empty
    assert [(v.record.pid, v.status) for v in registry.verdicts(Host.local())] == [(one.pid, "kept")]
    refused = one.cli("stop", "4")
    assert refused.returncode == 1 and "no recorded server" in refused.stderr
    assert one.cli("stop", str(one.pid)).returncode == 0
    assert _wait_gone(one.tree, timeout_s=5) == []


@pytest.mark.ssh
def test_over_ssh_kill_9_leaves_an_orphan_that_stop_all_mine_finds(driver: Any, sshd: Any, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(f"Host 127.0.0.1\n  IdentityFile {sshd.client_key}\n  UserKnownHostsFile {sshd.known_hosts}\n")
    ssh = {"hostname": "127.0.0.1", "user": sshd.user, "port": sshd.port, "key_filename": str(sshd.client_key),
           "known_hosts": str(sshd.known_hosts), "ssh_config": str(config)}
    one = driver(ssh=ssh)
    one.kill(signal.SIGKILL)
    target = f"{sshd.user}@127.0.0.1:{sshd.port}"
    listed = one.cli("ps", "--host", target, "--ssh-config", str(config))
    assert listed.returncode == 0, listed.stderr
    assert f"{one.pid:>8}  orphan" in listed.stdout
    stopped = one.cli("stop", str(one.pid), "--host", target, "--ssh-config", str(config))
    assert stopped.returncode == 0, stopped.stderr
    assert _wait_gone(one.tree, timeout_s=5) == []


@pytest.mark.ssh
def test_over_ssh_sigterm_stops_the_remote_server(driver: Any, sshd: Any, tmp_path: Path) -> None:
    ssh = {"hostname": "127.0.0.1", "user": sshd.user, "port": sshd.port, "key_filename": str(sshd.client_key),
           "known_hosts": str(sshd.known_hosts), "ssh_config": str(sshd.ssh_config)}
    one = driver(ssh=ssh)
    assert one.kill(signal.SIGTERM) == -signal.SIGTERM
    assert _wait_gone(one.tree, timeout_s=5) == []
