"""The simulator in real podman containers: a new container per launch, and servers exec'd into a running one.

Stopping leaves no container (of our own), no server process, and no ``tail -F`` inside.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_process import free_port
from system.containers import LocalPodman

from toolkit.benchmark import Load, bench
from toolkit.errors import HostError
from toolkit.host.container import ContainerPlace, ContainerTarget
from toolkit.host.host import Host
from toolkit.moves.envcheck import env_report
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec

pytestmark = [pytest.mark.container, pytest.mark.timeout(240)]
BENCH = Load(num_prompts=4, input_len=8, output_len=16, max_concurrency=1)


def _spec(port: int) -> ServerSpec:
    return ServerSpec.simulator(tp=2, port=port, python=sys.executable, sim_startup_s=0.3,
                                sim_warmup_s=0.05).with_env({"NCCL_ALGO": "Ring"})


def _image_target(host: Host, podman: LocalPodman, **options: object) -> ContainerTarget:
    return ContainerTarget(host, engine="podman", rootfs=str(podman.rootfs), gpus=None, network="host",
                           mounts=podman.mounts, run_options=podman.run_options,
                           engine_options=podman.engine_options, **options)  # type: ignore[arg-type]


def _host_pids_serving(port: int) -> list[int]:
    """Pids on this machine whose command line serves ``port`` (the container shares our kernel)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                words = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"toolkit.sim" in words and str(port).encode() in words:
                found.append(int(entry.name))
    return found


def _settled(condition: object, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.1)
    return bool(callable(condition) and condition())


def test_a_server_in_a_new_container_is_read_inside_and_removed_on_stop(
    podman: LocalPodman, tmp_path: Path
) -> None:
    target = _image_target(Host.local(), podman)
    spec = _spec(free_port())
    with launch(target, spec, log_dir=str(tmp_path)) as server:
        placement = server.placement
        assert isinstance(server.host, ContainerPlace) and placement.kind == "container"
        name = placement.container or ""
        assert name.startswith("toolkit-sglang-sim") and name in podman.names()
        assert placement.command is not None and placement.command.startswith(
            f"podman --runtime runc run --name {name} --init --ipc=host --network=host -v {podman.mounts[0]} ")
        assert placement.command.endswith(" bash -c " + shlex.quote(spec.command()))
        assert server.url == f"http://127.0.0.1:{spec.port}"
        server.wait_ready(timeout_s=90)
        assert bench(server, BENCH, progress=False).summary["completed"] == 4
        assert "SIMULATED SGLang server" in Path(server.log_path).read_text()  # the container's output
        [init] = server.host.process_tree(1)[:1]
        assert init.cmdline[0] == "/run/podman-init" and server.pid != 1  # the server is init's child
        tree = server.host.process_tree(server.pid)
        assert [info.cmdline[1:3] for info in tree] == [("-m", "toolkit.sim")] + [()] * 2
        assert [info.cmdline[0] for info in tree[1:]] == ["sglang::scheduler_TP0", "sglang::scheduler_TP1"]
        report = env_report(server, {"NCCL_ALGO": "Ring"})
        assert report.ok and f"on {name} (podman on localhost)" in report.summary()
        assert _host_pids_serving(spec.port)
        stop = server.stop(grace_s=10)
    assert not stop.already_stopped and server.stop().already_stopped
    assert name not in podman.names()
    assert _settled(lambda: not _host_pids_serving(spec.port))
    assert not Host.local().is_alive(server.host.client)


@pytest.mark.parametrize("login", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_a_server_execd_into_a_running_container_stops_and_leaves_the_container(
    login: str, podman: LocalPodman, request: pytest.FixtureRequest
) -> None:
    host: Host = Host.local() if login == "local" else request.getfixturevalue("ssh_host")
    box = podman.start_box()
    target = ContainerTarget(host, engine="podman", container=box, engine_options=podman.engine_options)
    spec = _spec(free_port())
    with launch(target, spec) as server:
        placement = server.placement
        assert placement.container == box and server.host.name == f"{box} (podman on {host.name})"
        assert placement.command is not None and placement.command.startswith(
            f"podman --runtime runc exec -i {box} bash -c ")
        server.wait_ready(timeout_s=90)
        assert bench(server, BENCH, progress=False).summary["completed"] == 4
        assert server.log_path.startswith("/tmp/toolkit-logs-")  # inside the container, per user
        assert "SIMULATED SGLang server" in server.host.run(f"cat {server.log_path}").stdout
        assert env_report(server, {"NCCL_ALGO": "Ring"}).ok
        server.stop(grace_s=10)
    inside = podman.podman("exec", box, "bash", "-c", "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline; "
                                                      "echo; done").stdout
    assert box in podman.names()
    assert _settled(lambda: not _host_pids_serving(spec.port))
    assert "toolkit.sim" not in inside and "tail -n" not in inside, inside


def test_a_container_that_cannot_start_says_why_and_leaves_nothing(podman: LocalPodman, tmp_path: Path) -> None:
    target = ContainerTarget(Host.local(), engine="podman", rootfs=str(tmp_path / "no-such-root"), gpus=None,
                             network="host", run_options=podman.run_options, engine_options=podman.engine_options,
                             name="tk-never-starts")
    with pytest.raises(HostError, match="the container tk-never-starts did not start") as info:
        launch(target, ServerSpec.command(["true"], port=free_port()), log_dir=str(tmp_path))
    assert any("no-such-root" in line for line in info.value.evidence)
    assert "tk-never-starts" not in podman.names()


DRIVER = """
import json, sys, time
from toolkit.host.container import ContainerTarget
from toolkit.host.host import Host
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec
o = json.loads(sys.argv[1])
target = ContainerTarget(Host.local(), engine="podman", rootfs=o["rootfs"], gpus=None, network="host",
                         mounts=tuple(o["mounts"]), run_options=tuple(o["run_options"]),
                         engine_options=tuple(o["engine_options"]))
spec = ServerSpec.simulator(tp=2, port=o["port"], python=sys.executable, sim_startup_s=0.3, sim_warmup_s=0.05)
with launch(target, spec, log_dir=o["log_dir"]) as server:
    server.wait_ready(timeout_s=90)
    print("READY", server.placement.container, flush=True)
    time.sleep(600)
"""


def test_a_container_server_is_stopped_when_its_driver_is_terminated(podman: LocalPodman, tmp_path: Path) -> None:
    """SIGTERM to the driver (papermill, timeout, a kernel shutdown) inside ``with launch(...)``: the container
    goes with it, as a server on a host does (issue 20); a container is no orphan the registry must find."""
    port = free_port()
    options = {"rootfs": str(podman.rootfs), "mounts": list(podman.mounts), "run_options": list(podman.run_options),
               "engine_options": list(podman.engine_options), "port": port, "log_dir": str(tmp_path)}
    with subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(options)], stdout=subprocess.PIPE,
                          text=True) as driver:
        try:
            line = driver.stdout.readline() if driver.stdout else ""
            assert line.startswith("READY toolkit-"), line
            name = line.split()[1]
            assert name in podman.names() and _host_pids_serving(port)
            driver.send_signal(signal.SIGTERM)
            assert driver.wait(timeout=60) == -signal.SIGTERM  # the exit status still says "terminated"
        finally:
            driver.kill()
    try:
        assert name not in podman.names()
        assert _settled(lambda: not _host_pids_serving(port))
    finally:  # a failure must not leave the container behind
        podman.podman("rm", "-f", "-t", "0", name, check=False)
