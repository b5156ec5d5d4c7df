"""env_report on real process trees: the simulator's TP ranks over the loopback sshd, several hosts, NCCL echoes.

The simulator starts one process per TP rank with the environment the imitated release
leaves them (SGLang 0.5.23 keeps a user's ``NCCL_CUMEM_ENABLE``; 0.4.10 overwrites it with
``0`` in ``_set_envs_and_config`` before spawning); ``--sim-drop-env-in-workers`` starts
the ranks without a variable, the "never reached the workers" case. With ``NCCL_DEBUG=INFO``
each rank echoes what NCCL read, as NCCL does.
"""

from __future__ import annotations

import doctest
import importlib
import sys
import time
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from sim_process import free_port

from toolkit.host.host import Host, ProcessHandle
from toolkit.journal import Journal
from toolkit.moves.envcheck import EnvReport, env_report
from toolkit.moves.envcheck.nccl import nccl_lines_script
from toolkit.server.launch import launch
from toolkit.server.server import MultiNodeServer, Server
from toolkit.server.spec import ServerSpec
from toolkit.views import plots as tk_plots

LAUNCH_ENV = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1"}


@pytest.mark.parametrize("module", ["roles", "overrides", "report", "nccl"])
def test_docstring_examples_run(module: str) -> None:
    assert doctest.testmod(importlib.import_module(f"toolkit.moves.envcheck.{module}")).failed == 0


def sim(tp: int = 2, **flags: object) -> ServerSpec:
    return ServerSpec.simulator(tp=tp, port=free_port(), host="127.0.0.1", sim_startup_s=0.3, **flags)


def status(report: EnvReport, variable: str) -> dict[str, str]:
    rows = report.frame[report.frame["variable"] == variable]
    return {str(row.rank if isinstance(row.rank, str) else row.role): str(row.status) for row in rows.itertuples()}


@pytest.mark.ssh
def test_sim_ranks_keep_what_the_user_exported_at_the_default_release(ssh_host: Host, tmp_path: Path) -> None:
    """SGLang 0.5.23: every variable the user exported reaches every rank (engine.py:1898-1915 write
    NCCL_CUMEM_ENABLE/NCCL_NVLS_ENABLE only when unset); NCCL's own echoes agree."""
    wanted = {**LAUNCH_ENV, "NCCL_DEBUG": "INFO"}
    spec = sim(sim_drop_env_in_workers="NCCL_ALGO").with_env(wanted)
    with Journal(tmp_path / "journal.sqlite") as journal, launch(ssh_host, spec, log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        report = env_report(server, wanted, journal=journal)
        steps = journal.steps()
    print(f"\n{report}")
    assert set(report.frame["host"]) == {ssh_host.name} and report.release == "0.5.23"
    for kept in ("NCCL_PROTO", "NCCL_CUMEM_ENABLE", "NCCL_NVLS_ENABLE"):
        assert status(report, kept) == {"server": "ok", "TP0": "ok", "TP1": "ok"}, kept
    assert status(report, "NCCL_ALGO") == {"server": "ok", "TP0": "missing", "TP1": "missing"}
    assert report.nccl is not None
    echoes = report.nccl.set_index(["rank", "variable"])["status"]
    assert echoes[("TP1", "NCCL_CUMEM_ENABLE")] == "ok" and echoes[("TP0", "NCCL_ALGO")] == "not_logged"
    assert not report.ok and "NCCL_ALGO missing in 2 of 3" in report.summary()
    assert isinstance(tk_plots.env(report), Figure)
    step = steps.iloc[-1]
    assert (step["kind"], step["verdict"], step["hosts"]) == ("nccl_env", "refuted", ssh_host.name)
    assert "NCCL_ALGO" in step["notes"]


@pytest.mark.ssh
def test_sim_ranks_at_0_4_10_show_sglangs_overrides_with_release_and_source(ssh_host: Host, tmp_path: Path) -> None:
    spec = sim(sim_engine_version="0.4.10").with_env(LAUNCH_ENV)
    with launch(ssh_host, spec, log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        report = env_report(server, LAUNCH_ENV)
    assert report.release == "0.4.10"
    for overridden in ("NCCL_CUMEM_ENABLE", "NCCL_NVLS_ENABLE"):
        assert status(report, overridden) == {"server": "ok", "TP0": "overridden", "TP1": "overridden"}
        worker = report.frame[(report.frame["variable"] == overridden) & (report.frame["rank"] == "TP1")].iloc[0]
        assert worker["actual"] == "0" and worker["reason"].startswith(f"SGLang 0.4.10 writes {overridden}='0'")
        assert "sglang 0.4.10 python/sglang/srt/entrypoints/engine.py:62" in worker["reason"]
    assert report.nccl is None  # no NCCL_DEBUG=INFO: no echoes
    assert "NCCL_CUMEM_ENABLE overridden in 2 of 3" in report.summary()


@pytest.mark.ssh
def test_a_process_that_exited_reads_as_unreadable_with_the_reason(ssh_host: Host, tmp_path: Path) -> None:
    with launch(ssh_host, sim(tp=1), log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
    report = env_report(server, ["NCCL_ALGO"])
    row = report.frame.iloc[0]
    assert (len(report.frame), row["status"], row["pid"]) == (1, "unreadable", server.pid)
    assert "does not exist (it exited, or never started)" in row["reason"]


# A stand-in for a rank of another node: it logs NCCL's environment echoes with its own pid.
NCCL_RANK = r"""
import os, socket, sys, time
head = f"{socket.gethostname().split('.')[0]}:{os.getpid()}:{os.getpid()} [0] NCCL INFO"
print(f"{head} cudaDriverVersion 12080", flush=True)
print(f"{head} NCCL_ALGO set by environment to Tree", flush=True)
print(f"{head} NCCL_IB_DISABLE set by environment to 1.", flush=True)
print(f"{head} ncclCommInitRank comm 0x5a1 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 - Init COMPLETE", flush=True)
time.sleep(120)
"""


@pytest.mark.ssh
def test_every_node_of_a_multi_node_server_and_nccl_echoes(ssh_hosts: list[Host], tmp_path: Path) -> None:
    first, second, third = ssh_hosts
    rank = ServerSpec.command([sys.executable, "-u", "-c", NCCL_RANK], port=free_port()).with_env({"NCCL_ALGO": "Ring"})
    # A host that refuses connections: its node must show up as unreadable, not vanish.
    gone = Host("127.0.0.1", port=free_port(), connect_timeout_s=2.0, known_hosts=str(tmp_path / "none"))
    ghost = Server(gone, rank, ProcessHandle(gone.name, 4242, "/tmp/none.log", "", time.time()), "http://x", "/tmp/none.log")
    with launch(first, sim(tp=2).with_env({"NCCL_ALGO": "Ring"}), log_dir=str(tmp_path)) as node0, \
            launch(second, rank, log_dir=str(tmp_path)) as node1:
        node0.wait_ready(timeout_s=60)
        deadline = time.monotonic() + 20
        while "Init COMPLETE" not in "".join(node1.log_tail(5)):
            assert time.monotonic() < deadline, node1.log_tail(20)
            time.sleep(0.1)
        report = env_report(MultiNodeServer((node0, node1, ghost)), {"NCCL_ALGO": "Ring", "NCCL_IB_DISABLE": None},
                            hosts=[third])
    print(f"\n{report}\n{report.nccl}")
    frame = report.frame
    assert set(frame["host"]) == {first.name, second.name, third.name, gone.name}
    node1_rows = frame[(frame["host"] == second.name) & (frame["pid"] == node1.pid)]
    assert node1_rows.set_index("variable")["status"].to_dict() == {"NCCL_ALGO": "ok", "NCCL_IB_DISABLE": "missing"}
    ghost_row = frame[frame["host"] == gone.name].iloc[0]
    assert ghost_row["status"] == "unreadable" and "could not read the process tree" in ghost_row["reason"]
    # hosts=[third] searched a host by role: it finds the same simulator ranks (one machine, three names)
    found = frame[frame["host"] == third.name]
    assert {int(p) for p in found["pid"]} >= {int(p) for p in frame[frame["host"] == first.name]["pid"]}
    assert frame["process"].str.startswith(tuple(f"{h.name} " for h in (first, second, third, gone))).all()
    nccl = report.nccl
    assert nccl is not None and set(nccl["host"]) == {second.name} and set(nccl["pid"]) == {node1.pid}
    echoes = nccl.set_index("variable")
    assert echoes.loc["NCCL_ALGO", ["log_value", "status", "nccl_rank"]].tolist() == ["Tree", "overridden", "1/2"]
    assert echoes.loc["NCCL_IB_DISABLE", ["log_value", "status"]].tolist() == ["1", "ok"]
    assert echoes.loc["NCCL_ALGO", "role"] == "other"  # joined with the /proc rows of the same host and pid


def test_the_nccl_filter_keeps_one_line_per_process_and_every_echo(any_host: Host, tmp_path: Path) -> None:
    log = tmp_path / "nccl server.log"
    noise = [f"gpu-a:{pid}:{pid} [{pid % 8}] NCCL INFO Channel {c:02d}/0 : 0[0] -> 1[1] via P2P/CUMEM"
             for pid in (101, 102) for c in range(500)]
    lines = [
        "[2026-02-26 20:26:06 TP0] Init torch distributed begin.",
        *noise,
        "[2026-02-26 20:26:06 TP1] gpu-a:102:102 [1] NCCL INFO NCCL_ALGO set by environment to Ring",
        "gpu-a:101:101 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 - Init COMPLETE",
        "gpu-a:101:101 [0] NCCL WARN NCCL_ALGO set by environment to Ring",
    ]
    log.write_text("\n".join(lines) + "\n")
    kept = any_host.run(nccl_lines_script(str(log))).stdout.splitlines()
    assert kept == [noise[0], noise[500], lines[-3], lines[-2]]
    assert any_host.run(nccl_lines_script(str(tmp_path / "absent.log"))).stdout == ""


# Captured on an H200 host (NCCL 2.28.9+cuda13.0, torch 2.11): `torchrun --nproc-per-node 1 -m
# toolkit.testbeds.nccl_job --backend nccl` with NCCL_DEBUG=INFO NCCL_ALGO=Ring NCCL_PROTO=Simple
# NCCL_CUMEM_ENABLE=1 NCCL_IB_DISABLE=1; the job's rank sets NCCL_CUMEM_ENABLE=0 as SGLang does.
# What NCCL 2.28 printed after the awk filter of nccl_lines_script (102 lines in the log):
NCCL_2_28_LINES = """\
vm:518:518 [0] NCCL INFO ENV/Plugin: Could not find: libnccl-env.so
vm:518:518 [0] NCCL INFO Comm config Blocking set to 1
vm:518:518 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
vm:518:518 [0] NCCL INFO ncclCommInitRankConfig comm 0x2bee33a0 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 60 \
commId 0x6210182dcd964874 - Init START
vm:518:518 [0] NCCL INFO NCCL_CUMEM_ENABLE set by environment to 0.
vm:518:518 [0] NCCL INFO P2P Chunksize set to 524288
vm:518:540 [0] NCCL INFO [Proxy Service] Device 0 CPU core 2
""".splitlines()


def test_real_nccl_2_28_echoes_and_a_torchrun_tree() -> None:
    from toolkit.host.procs import ProcessInfo
    from toolkit.moves.envcheck import check_env

    launch_env = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_CUMEM_ENABLE": "1"}
    tree = [
        ProcessInfo("gpu", 492, 1, ("/opt/torch/.venv/bin/python", "/opt/torch/.venv/bin/torchrun",
                                    "--nproc-per-node", "1", "-m", "toolkit.testbeds.nccl_job"), launch_env),
        ProcessInfo("gpu", 518, 492, ("/opt/torch/.venv/bin/python", "-m", "toolkit.testbeds.nccl_job"),
                    {**launch_env, "NCCL_CUMEM_ENABLE": "0", "RANK": "0"}),
    ]
    expected = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_CUMEM_ENABLE": "1", "NCCL_IB_DISABLE": "1"}
    report = check_env(tree, expected).with_nccl_log(NCCL_2_28_LINES, host="gpu")
    assert report.frame.drop_duplicates("pid")[["role", "rank"]].fillna("-").values.tolist() == [
        ["launcher", "-"], ["worker", "RANK0"]]
    assert report.nccl is not None
    echoes = report.nccl.set_index("variable")
    assert echoes.loc["NCCL_CUMEM_ENABLE", ["log_value", "status", "nccl_rank"]].tolist() == ["0", "overridden", "0/1"]
    assert echoes.loc["NCCL_IB_DISABLE", ["log_value", "status"]].tolist() == ["1", "ok"]
    # NCCL 2.28 did not echo NCCL_ALGO/NCCL_PROTO on a one-rank communicator: not_logged, not "ok"
    assert echoes.loc[["NCCL_ALGO", "NCCL_PROTO"], "status"].tolist() == ["not_logged", "not_logged"]
    assert set(echoes["rank"]) == {"RANK0"}
