"""The Slurm job as data: quoting of every word, the task each node runs (run by bash), Slurm's answers parsed."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import InvalidFlag
from toolkit.host.slurm_script import (
    NodeFlags,
    SlurmRequest,
    batch_script,
    job_name,
    node_log_path,
    parse_fields,
    parse_job_id,
    parse_node_addresses,
    parse_queue,
    parse_steps,
    pending_hint,
    probe_prefix,
    sbatch_argv,
    step_argv,
    task_file,
    task_path,
    task_script,
    with_conf,
)

WORD = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20)
OPTION = WORD.map(lambda w: "--" + w)
# Prints the argv and a few variables it was started with, as JSON.
DUMP = [sys.executable, "-c", "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], "
                              "'algo': os.environ.get('TK_ALGO'), 'cwd': os.getcwd()}))"]


@settings(max_examples=60, deadline=None)
@given(partition=WORD, account=WORD, time=WORD, options=st.lists(OPTION, max_size=3),
       log_dir=WORD.filter(lambda w: "/" not in w), conf=st.none() | WORD)
def test_every_sbatch_word_reaches_sbatch_as_written(partition: str, account: str, time: str, options: list[str],
                                                      log_dir: str, conf: str | None) -> None:
    request = SlurmRequest(partition=partition, nodes=2, gpus_per_node=8, time=time, account=account,
                           options=tuple(options))
    log_path = f"/logs/{log_dir}/x.log"
    argv = sbatch_argv(request, job_name="toolkit-x", log_path=log_path, workdir=f"/logs/{log_dir}")
    words = shlex.split(with_conf(argv, conf and f"/etc/{conf}"))
    if conf:
        assert words.pop(0) == f"SLURM_CONF=/etc/{conf}"
    assert words == argv
    assert argv[:4] == ["sbatch", "--parsable", "--job-name=toolkit-x", f"--output={log_path}"]
    assert {f"--partition={partition}", f"--account={account}", f"--time={time}", "--nodes=2",
            "--gpus-per-node=8", "--ntasks-per-node=1", *options} <= set(argv)


def test_a_step_of_an_allocation_names_the_job_and_takes_no_partition() -> None:
    request = SlurmRequest(partition="gpu", nodes=2, gpus_per_node=4, srun_options=("--overlap",), allocation="77")
    argv = step_argv(request, job_name="toolkit-x", node_logs="/l/x-node%n.log", allocation="77")
    assert argv == ["srun", "--jobid=77", "--job-name=toolkit-x", "--nodes=2", "--gpus-per-node=4",
                    "--ntasks-per-node=1", "--kill-on-bad-exit=1", "--output=/l/x-node%n.log", "--overlap"]
    assert step_argv(SlurmRequest(), job_name="n", node_logs=None, allocation=None) == [
        "srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 0}, "nodes must be a positive integer"),
        ({"options": ("exclusive",)}, "does not start with '-'"),
        ({"allocation": "abc"}, "allocation must be a Slurm job id"),
        ({"allocation": "12", "options": ("--exclusive",)}, "an allocation submits no job"),
        ({"options": ("--comment=a\x00b",)}, "NUL byte"),
    ],
)
def test_a_request_slurm_cannot_take_is_refused_with_what_to_do(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidFlag, match=message):
        SlurmRequest(**kwargs)  # type: ignore[arg-type]


def _run_task(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=30)


def test_each_task_fills_in_its_own_rank_and_the_given_address(tmp_path: Path) -> None:
    """The rank comes from the task's own SLURM_NODEID (SGLang's recipe expands it once, in the batch shell)."""
    command = " ".join(shlex.quote(w) for w in DUMP) + " --port 30000"
    log = str(tmp_path / "x.log")
    script = task_script(f"exec {command}", log_path=log, port=None, env={"TK_ALGO": "Ring $HOME 'x'"},
                         cwd=str(tmp_path), node_flags=NodeFlags(20000, dist_init_addr="10.0.0.1"))
    done = _run_task(script, {"SLURM_NODEID": "1", "SLURM_STEP_NUM_NODES": "2", "SLURMD_NODENAME": "gpu-b"})
    assert done.returncode == 0, done.stderr
    first, dump = done.stdout.splitlines()
    assert first == "toolkit: node 1 of 2 (gpu-b), dist-init-addr 10.0.0.1:20000"
    seen = json.loads(dump)
    assert seen["argv"] == ["--port", "30000", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:20000"]
    assert seen["algo"] == "Ring $HOME 'x'" and seen["cwd"] == str(tmp_path)
    assert (tmp_path / "x.log.node1.pid").read_text().strip().isdigit()


def test_an_ipv6_dist_init_address_is_bracketed(tmp_path: Path) -> None:
    script = task_script("exec echo", log_path=str(tmp_path / "x.log"), port=None,
                         node_flags=NodeFlags(20000, dist_init_addr="fd00::1"))
    assert "dist_init='[fd00::1]:20000'" in script


def test_a_task_refuses_a_held_port_and_names_the_holder(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        script = task_script("exec echo started", log_path=str(tmp_path / "x.log"), port=port, node_flags=None)
        done = _run_task(script, {"SLURM_NODEID": "0", "SLURMD_NODENAME": "gpu-a"})
    assert done.returncode == 98 and "started\n" not in done.stdout.splitlines(keepends=True)
    assert done.stdout.startswith(f"toolkit: port {port} on gpu-a: address already in use, held by pid {os.getpid()} (")
    free = task_script("exec echo started", log_path=str(tmp_path / "y.log"), port=port, node_flags=None)
    assert _run_task(free, {"SLURM_NODEID": "0", "SLURMD_NODENAME": "gpu-a"}).stdout == "started\n"


def test_the_batch_script_is_bash_and_records_how_it_was_submitted(tmp_path: Path) -> None:
    step = step_argv(SlurmRequest(nodes=2), job_name="n", node_logs="/l/x-node%n.log", allocation=None)
    text = batch_script(step, task_path("/l/my logs/x.log"), submitted="SLURM_CONF=/c sbatch a\nb")
    task = task_file(task_script("exec echo", log_path="/l/x.log", port=30000, node_flags=NodeFlags(20000)))
    for name, content in (("x.sbatch", text), ("x.task.sh", task)):
        (tmp_path / name).write_text(content)
        assert subprocess.run(["bash", "-n", str(tmp_path / name)], capture_output=True).returncode == 0
    assert text.startswith("#!/bin/bash\n# Submitted by the toolkit as:\n#   SLURM_CONF=/c sbatch a\n#   b\n")
    assert text.endswith("\nexec srun --ntasks-per-node=1 --kill-on-bad-exit=1 --output=/l/x-node%n.log "
                         "bash '/l/my logs/x.task.sh'\n")
    assert task.startswith("#!/bin/bash\n") and '--node-rank "$SLURM_NODEID"' in task


def test_names_and_paths() -> None:
    assert job_name("toolkit-sglang-sim EAGLE3 steps=2") == "toolkit-sglang-sim-EAGLE3-steps-2"
    assert job_name("///") == "toolkit"
    assert node_log_path("/l/x.log", 1) == "/l/x-node1.log"
    assert probe_prefix("42", "gpu-a", None) == ["srun", "--jobid=42", "--overlap", "--nodes=1", "--ntasks=1",
                                                 "--nodelist=gpu-a", "--quiet"]
    assert probe_prefix("42", "a", "/c")[:2] == ["env", "SLURM_CONF=/c"]


# Answers of Slurm 22.05 (Debian bookworm's slurm-wlm), captured on the loopback cluster.
def test_slurms_answers_are_parsed() -> None:
    assert parse_job_id("4242\n") == "4242" and parse_job_id("17;cluster2\n") == "17"
    with pytest.raises(ValueError):
        parse_job_id("sbatch: error: Batch job submission failed\n")
    queue = parse_queue("RUNNING|None|loop[1-2]\n")
    assert queue is not None and queue.alive and queue.nodelist == "loop[1-2]"
    pending = parse_queue("PENDING|Resources|\n")
    assert pending is not None and not pending.alive and pending.reason == "Resources"
    assert parse_queue("") is None
    assert parse_steps("2.0|bash|loop[1-2]\n2.batch|batch|loop1\n") == {
        "2.0": ("bash", "loop[1-2]"), "2.batch": ("batch", "loop1")}
    node = ("NodeName=loop2 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=4.62 "
            "AvailableFeatures=(null) NodeAddr=127.0.0.2 NodeHostName=vm Version=22.05.8 OS=Linux 6.1.0 #1 SMP\n")
    assert parse_node_addresses(node + node.replace("loop2", "loop3").replace("127.0.0.2", "127.0.0.3")) == {
        "loop2": "127.0.0.2", "loop3": "127.0.0.3"}
    fields = parse_fields("JobId=4 JobName=wrap JobState=PENDING Reason=Resources Dependency=(null) NodeList=\n")
    assert fields["JobState"] == "PENDING" and fields["Reason"] == "Resources" and fields["NodeList"] == ""


@pytest.mark.parametrize(
    ("reason", "words"),
    [("Resources", "busy"), ("PartitionNodeLimit", "lower nodes="), ("AssocGrpGRES", "account or QOS limit"),
     ("QOSMaxJobsPerUserLimit", "account or QOS limit"), ("BeginTime", "--begin"), ("Whatever", "raise pending")],
)
def test_every_pending_reason_says_what_to_do(reason: str, words: str) -> None:
    assert words in pending_hint(reason)
