"""The seam between launch and where a server runs: placements, `placed`, and a Host inside a prefix."""

from __future__ import annotations

import os
import shlex
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from sim_process import free_port

from toolkit.host.host import Host
from toolkit.host.placement import Placement
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.mark.parametrize(
    ("placement", "text"),
    [
        (Placement.on_host("localhost", "127.0.0.1", 42), "localhost (pid 42)"),
        (Placement.on_host("root@gpu-a:22", "10.0.0.5", None), "root@gpu-a:22"),
        (Placement("slurm", "slurm", ("gpu-a",), "10.0.0.5", 7, job_id="99"), "slurm job 99 on gpu-a (pid 7)"),
        (Placement("slurm", "slurm", ("a", "b"), "10.0.0.5", 7, job_id="99", node_rank=1),
         "slurm job 99 on a,b (node 1 of 2, pid 7)"),
        (Placement("slurm", "slurm", ("a",), "10.0.0.5", None, job_id="99.3"), "slurm job 99.3 on a"),
        (Placement("container", "podman", ("localhost",), "127.0.0.1", 1, container="sim", engine="podman"),
         "container sim (podman) on localhost (pid 1)"),
    ],
)
def test_placement_describes_where_it_ran(placement: Placement, text: str) -> None:
    assert placement.describe() == text


def test_placement_dict_has_stable_keys() -> None:
    full = Placement("slurm", "t", ("a", "b"), "x", 1, job_id="9", node_rank=0, command="sbatch s")
    assert list(full.as_dict()) == list(Placement.on_host("h", "x", None).as_dict())
    assert full.as_dict()["nodes"] == ["a", "b"] and full.as_dict()["job_id"] == "9"


def test_a_host_launch_is_placed_on_the_host(local_host: Host, tmp_path: Path) -> None:
    spec = ServerSpec.command(SLEEP, port=free_port())
    with launch(local_host, spec, log_dir=str(tmp_path)) as server:
        assert server.host is local_host
        assert server.placement == Placement.on_host("localhost", "127.0.0.1", server.pid, spec.command())
        assert server.where.startswith(f"{spec.describe()} on localhost (pid {server.pid}")


def test_a_host_starts_a_server_through_the_seam_as_slurm_and_containers_do(local_host: Host, tmp_path: Path) -> None:
    """launch speaks one method to every target: a Host answers start_server with a placed process."""
    log_path = str(tmp_path / "server.log")
    placed = local_host.start_server(shlex.join(SLEEP), log_path=log_path, port=free_port())
    try:
        assert placed.place is local_host and local_host.registry_host is local_host
        assert placed.placement == Placement.on_host("localhost", "127.0.0.1", placed.pid, shlex.join(SLEEP))
        assert (placed.log_path, placed.command) == (log_path, shlex.join(SLEEP))
        assert placed.place.is_alive(placed)
    finally:
        local_host.stop(placed)
    assert not local_host.is_alive(placed)


def test_a_host_inside_a_prefix_runs_starts_and_stops_there(local_host: Host, tmp_path: Path) -> None:
    inside = local_host.inside(["env", "TK_INSIDE=yes"], name="inside env")
    assert inside.name == "inside env" and inside.address == "127.0.0.1"
    assert inside.run("echo $TK_INSIDE").stdout == "yes\n"
    inside.write_file(str(tmp_path / "f"), b"\x00\xffdata")
    assert inside.read_file(str(tmp_path / "f")) == b"\x00\xffdata"
    assert inside.run("sleep 5", check=False, timeout_s=0.5).exit_code == 124
    handle = inside.start_detached("exec sleep 120", log_path=str(tmp_path / "x.log"))
    [info] = inside.process_tree(handle.pid)
    assert info.cmdline == ("sleep", "120") and info.environ is not None and info.environ["TK_INSIDE"] == "yes"
    report = inside.stop(handle, grace_s=5)
    assert not report.already_stopped and not local_host.is_alive(handle.pid)


def _running(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


def test_closing_a_stream_inside_ends_the_far_command(local_host: Host) -> None:
    """`docker exec` and `srun` do not kill the far command when their client dies: stdin's EOF must.

    `setsid -w` stands in for them: the far command runs in a session of its own, out of
    reach of the signal that ends the local client's process group.
    """
    inside = local_host.inside(["setsid", "-w"], name="own session")
    seconds = f"300.{uuid.uuid4().int % 10**6}"
    marker = f"sleep\x00{seconds}"
    with inside.open_stream(f"exec sleep {seconds}"):
        assert _within(10.0, lambda: bool(_running(marker)))
    assert _within(10.0, lambda: not _running(marker)), _running(marker)


def _within(seconds: float, condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
