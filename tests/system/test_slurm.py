"""The simulator launched through a real loopback Slurm cluster: jobs, a 2-node job, steps, pending, stops.

Every test ends with the queue as it found it: no job, no step, no process of the server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_process import free_port
from system.slurm import NODES, LoopbackSlurm

from toolkit.benchmark import Load, bench
from toolkit.errors import InvalidFlag, JobNotStarted, ServerDied
from toolkit.host.host import Host
from toolkit.host.slurm import SlurmNode, SlurmTarget
from toolkit.journal import Journal
from toolkit.moves import sweep
from toolkit.moves.bisect import perf_bisect
from toolkit.moves.envcheck import env_report
from toolkit.moves.plan import Plan
from toolkit.server.launch import launch, launch_multinode
from toolkit.server.spec import ServerSpec

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(240)]
ADDRESS = dict(NODES)
BENCH = Load(num_prompts=4, input_len=8, output_len=16, max_concurrency=1)


def _spec(port: int, **flags: object) -> ServerSpec:
    return ServerSpec.simulator(tp=2, port=port, python=sys.executable, sim_startup_s=0.3, sim_warmup_s=0.05,
                                **flags)


def _target(login: Host, slurm: LoopbackSlurm, **options: object) -> SlurmTarget:
    options.setdefault("pending_timeout_s", 60)
    return SlurmTarget(login, slurm_conf=str(slurm.conf), **options)  # type: ignore[arg-type]


def _gone(pids: list[int], within_s: float = 10.0) -> list[int]:
    """The pids still running after ``within_s`` (Slurm reaps a cancelled step's tasks itself)."""
    deadline = time.monotonic() + within_s
    left = pids
    while left and time.monotonic() < deadline:
        left = [pid for pid in left if os.path.exists(f"/proc/{pid}") and _state(pid) not in ("Z", "X")]
        time.sleep(0.1)
    return left


def _running(slurm: LoopbackSlurm, job: str, within_s: float = 30.0) -> str:
    """``job``, once Slurm runs it (a blocker or an allocation must hold its nodes before the test goes on)."""
    deadline = time.monotonic() + within_s
    while [line.split()[:2] for line in slurm.jobs() if line.startswith(f"{job} ")] != [[job, "RUNNING"]]:
        assert time.monotonic() < deadline, slurm.jobs()
        time.sleep(0.1)
    return job


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


@pytest.mark.parametrize("login", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_a_simulator_job_serves_is_read_on_its_node_and_stops_without_a_trace(
    login: str, slurm: LoopbackSlurm, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    host: Host = Host.local() if login == "local" else request.getfixturevalue("ssh_host")
    target = _target(host, slurm, partition="debug", time="10")
    spec = _spec(free_port()).with_env({"NCCL_ALGO": "Ring"})
    with launch(target, spec, log_dir=str(tmp_path)) as server:
        placement = server.placement
        assert isinstance(server.host, SlurmNode) and placement.kind == "slurm"
        [node] = placement.nodes
        assert server.url == f"http://{ADDRESS[node]}:{spec.port}" and placement.address == ADDRESS[node]
        assert [line.split()[:2] for line in slurm.jobs()] == [[placement.job_id, "RUNNING"]]
        assert placement.command is not None and "sbatch --parsable" in placement.command
        assert "--partition=debug" in placement.command and "--time=10" in placement.command
        server.wait_ready(timeout_s=90)
        result = bench(server, BENCH, progress=False)
        assert result.summary["completed"] == 4
        log = Path(server.log_path).read_text()  # the job's output file is the server log
        assert "SIMULATED SGLang server" in log and server.log_path.endswith(".log")
        assert Path(server.log_path.removesuffix(".log") + ".sbatch").read_text().startswith("#!/bin/bash")
        tree = server.host.process_tree(server.pid)  # read on the node, through srun --overlap
        assert len(tree) == 3 and tree[0].cmdline[1:3] == ("-m", "toolkit.sim")
        report = env_report(server, {"NCCL_ALGO": "Ring"})
        assert report.ok and f"on {node} (slurm job {placement.job_id})" in report.summary()
        pids = [info.pid for info in tree]
        stop = server.stop(grace_s=10)
    assert not stop.already_stopped and server.stop().already_stopped  # idempotent
    assert slurm.jobs() == [] and slurm.steps() == []
    assert _gone(pids) == []
    assert not server.is_alive()


def test_a_two_node_job_gives_each_node_its_rank_and_the_first_nodes_address(
    slurm: LoopbackSlurm, tmp_path: Path
) -> None:
    target = _target(Host.local(), slurm, nodes=2, bind_node_address=True, check_port_on_node=False)
    spec, init_port = _spec(free_port()), free_port()
    with launch_multinode(target, spec, dist_init_port=init_port, log_dir=str(tmp_path)) as cluster:
        assert [node.placement.node_rank for node in cluster.nodes] == [0, 1]
        assert [node.placement.nodes for node in cluster.nodes] == [("loop1", "loop2")] * 2
        assert {node.placement.job_id for node in cluster.nodes} == {cluster.placement.job_id}
        assert cluster.url == f"http://127.0.0.1:{spec.port}"
        cluster.wait_ready(timeout_s=90)
        pids = []
        for rank, node in enumerate(cluster.nodes):
            [head] = [info for info in node.host.process_tree(node.pid) if info.pid == node.pid]
            assert list(head.cmdline[-8:]) == [
                "--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", f"127.0.0.1:{init_port}",
                "--host", NODES[rank][1],
            ]  # fmt: skip
            assert node.log_path.endswith(f"-node{rank}.log")
            assert f"toolkit: node {rank} of 2 ({NODES[rank][0]})" in Path(node.log_path).read_text()
            pids.append(node.pid)
        assert bench(cluster, BENCH, progress=False).summary["completed"] == 4
        reports = cluster.stop(grace_s=10)
    assert not all(report.already_stopped for report in reports)
    assert slurm.jobs() == [] and slurm.steps() == []
    assert _gone(pids) == []


def test_a_job_that_stays_pending_is_reported_with_slurms_reason_and_cancelled(
    slurm: LoopbackSlurm, tmp_path: Path
) -> None:
    blocker = _running(slurm, slurm.client("sbatch", "--parsable", "--nodes=2", "--exclusive", "--output=/dev/null",
                                           "--wrap", "sleep 600").strip())
    try:
        target = _target(Host.local(), slurm, pending_timeout_s=2)
        started = time.monotonic()
        with pytest.raises(JobNotStarted) as info:
            launch(target, _spec(free_port()), log_dir=str(tmp_path), validate=False)
        assert time.monotonic() - started < 30
        assert info.value.reason == "Resources" and info.value.state == "PENDING"
        assert "still pending after 2 s, because of Resources; it was cancelled" in str(info.value)
        assert "JobState=PENDING" in info.value.evidence and "wait longer" in (info.value.hint or "")
        assert [line.split()[0] for line in slurm.jobs()] == [blocker]
    finally:
        slurm.client("scancel", blocker)


def test_a_step_inside_an_existing_allocation_stops_and_leaves_the_allocation(
    slurm: LoopbackSlurm, tmp_path: Path
) -> None:
    allocation = _running(slurm, slurm.client("sbatch", "--parsable", "--nodes=1", "--output=/dev/null", "--wrap",
                                              "sleep 600").strip())
    try:
        target = _target(Host.local(), slurm, allocation=allocation, srun_options=["--overlap"])
        with launch(target, _spec(free_port()), log_dir=str(tmp_path)) as server:
            job_id = server.placement.job_id or ""
            assert job_id.startswith(f"{allocation}.") and target.name == f"slurm job {allocation} via localhost"
            server.wait_ready(timeout_s=90)
            assert any(line.startswith(f"{job_id} toolkit-") for line in slurm.steps())
            pids = [info.pid for info in server.host.process_tree(server.pid)]
        assert [line.split()[:2] for line in slurm.jobs()] == [[allocation, "RUNNING"]]
        assert not any(line.startswith(job_id + " ") for line in slurm.steps())
        assert _gone(pids) == []
    finally:
        slurm.client("scancel", allocation)


def test_a_port_held_on_the_node_is_refused_there_before_the_server_starts(
    slurm: LoopbackSlurm, tmp_path: Path
) -> None:
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        spec = _spec(held.getsockname()[1])
        with launch(_target(Host.local(), slurm), spec, log_dir=str(tmp_path)) as server, \
                pytest.raises(ServerDied) as info:
            server.wait_ready(timeout_s=60)
    said = "\n".join(info.value.evidence)
    assert f"toolkit: port {spec.port} on loop" in said and ": address already in use, held by " in said
    assert f"held by pid {os.getpid()} (" in said and "pytest" in said and "; the server was not started" in said
    assert slurm.jobs() == []


def test_a_sweep_through_slurm_notes_where_each_launch_ran(slurm: LoopbackSlurm, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite")
    target = _target(Host.local(), slurm)
    result = sweep(target, _spec(free_port()), vary={"env:NCCL_ALGO": [None, "Ring"]},
                   plan=Plan(bench=BENCH, journal=journal, log_dir=str(tmp_path), progress=False))
    assert list(result.frame["status"]) == ["ok", "ok"]
    steps = journal.steps()
    assert list(steps["hosts"]) == ["slurm default via localhost"] * 2
    notes = [str(text) for text in steps["notes"]]
    assert all("launch 1 ran in slurm job " in text and " on loop" in text for text in notes)
    assert slurm.jobs() == []


def test_launch_refuses_a_multi_node_target(slurm: LoopbackSlurm, tmp_path: Path) -> None:
    with pytest.raises(InvalidFlag, match="use launch_multinode"):
        launch(_target(Host.local(), slurm, nodes=2), _spec(free_port()), log_dir=str(tmp_path))
    assert slurm.jobs() == []


@pytest.mark.slow
def test_a_bisection_checks_out_on_the_login_host_and_launches_each_commit_as_a_job(
    slurm: LoopbackSlurm, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    made = subprocess.run([sys.executable, "-m", "toolkit.sim", "make-repo", str(repo), "--commits", "8",
                           "--regression-at", "5", "--json"], check=True, capture_output=True, text=True)
    commits = json.loads(made.stdout)
    spec = ServerSpec.simulator(tp=1, port=free_port(), python=sys.executable, sim_startup_s=0.3,
                                source_dir=str(repo))
    with Journal(tmp_path / "j.sqlite") as journal:
        # judged on the median ITL of one batch (every decode step serves the four requests): the step the
        # regression slows, which a busy machine's stall of the client now and then does not move (its tok/s at
        # concurrency 1 named the wrong commit beside the timing tier, docs/fan-out.md)
        plan = Plan(bench=Load(num_prompts=4, max_concurrency=4, input_len=8, output_len=32, warmup=0),
                    metric="median_itl_ms", repeats=3,
                    journal=journal, log_dir=str(tmp_path / "logs"), progress=False, timeout_s=60)
        result = perf_bisect(Host.local(), str(repo), good=commits[0]["sha"], bad="main", spec=spec, plan=plan,
                             launch_on=_target(Host.local(), slurm))
        steps = journal.steps()
        notes = [str(text) for text in steps[steps["kind"] == "bisect_probe"]["notes"]]
    assert result.first_bad == commits[4]["sha"]
    # one step a probe; ends that looked alike are measured again in new steps, and the journal keeps the first ones
    assert len(notes) >= len(result.probes), (notes, result.probes)
    assert all("launch 1 ran in slurm job " in text for text in notes), notes
    assert slurm.jobs() == []
