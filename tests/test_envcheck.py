"""Expected versus actual environment per process and rank, and NCCL's own echoes.

Process titles are the ones SGLang 0.5.23 and vLLM 0.33.0 set with setproctitle
(``sglang::scheduler{_DP1_TP3}``, ``VLLM::Worker_TP1``); the NCCL lines are from a
public SGLang 0.5.9 report (2 nodes x 8 H-class GPUs, NCCL 2.27.5, run with
``NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_IB_DISABLE=0 NCCL_SOCKET_IFNAME=enp25s0np0``).
"""

from __future__ import annotations

import doctest
import importlib.util
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from toolkit.engines import profile_for
from toolkit.host.procs import parse_environ
from toolkit.moves import envcheck as envcheck_module
from toolkit.moves.envcheck import (
    KNOWN_OVERRIDES,
    STATUS_CODES,
    Role,
    check_env,
    classify_process,
    nccl_env_frame,
    parse_nccl_env,
)


@dataclass(frozen=True)
class Proc:
    """The shape of ``toolkit.host.host.ProcessInfo`` (contracts.md), built here from plain data."""

    host: str
    pid: int
    ppid: int
    cmdline: tuple[str, ...]
    environ: Mapping[str, str] | None
    error: str | None = None


def test_docstring_examples_run() -> None:
    assert doctest.testmod(envcheck_module).failed == 0


# --- roles and ranks ---------------------------------------------------------------------

SPAWN = "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)"


@pytest.mark.parametrize(
    ("cmdline", "environ", "role", "engine", "rank"),
    [
        (("sglang::scheduler_TP3",), None, "worker", "sglang", "TP3"),
        (("sglang::scheduler_DP1_TP3",), None, "worker", "sglang", "DP1 TP3"),
        (("sglang::scheduler_DP1_TP1_EP1",), None, "worker", "sglang", "DP1 TP1 EP1"),
        (("sglang::scheduler_DP0_PP1_ATTN_CP1_TP3",), None, "worker", "sglang", "DP0 PP1 ATTN_CP1 TP3"),
        (("sglang::scheduler_TP5", "", ""), None, "worker", "sglang", "TP5"),  # setproctitle padding
        (("sglang::scheduler_TP5" + " " * 40,), None, "worker", "sglang", "TP5"),
        (("sglang::scheduler",), None, "worker", "sglang", None),  # TP=1 has no suffix
        (("sglang::detokenizer",), None, "detokenizer", "sglang", None),
        (("sglang::tokenizer_worker:4242",), None, "tokenizer", "sglang", None),
        (("sglang::data_parallel_controller",), None, "dp_controller", "sglang", None),
        (
            ("/root/ml-env/bin/python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "8"),
            None,
            "server",
            "sglang",
            None,
        ),
        (("/usr/bin/sglang", "serve", "--model-path", "m"), None, "server", "sglang", None),
        (
            ("python", "-m", "toolkit.sim.worker", "--engine", "sglang", "--tp-rank", "3"),
            None,
            "worker",
            "sglang",
            "TP3",
        ),
        (("python", "-m", "toolkit.sim.worker", "--rank=2"), None, "worker", "sglang", "RANK2"),
        (
            (
                "python",
                "-m",
                "toolkit.sim.worker",
                "--engine",
                "vllm",
                "--role",
                "engine-core",
                "--tp-rank",
                "0",
            ),
            None,
            "engine_core",
            "vllm",
            None,
        ),
        (("python", "-m", "toolkit.sim", "--engine", "vllm", "--port", "8000"), None, "server", "vllm", None),
        (("VLLM::Worker_TP1",), None, "worker", "vllm", "TP1"),
        (("VLLM::Worker_DP1_TP0_EP1",), None, "worker", "vllm", "DP1 TP0 EP1"),
        (("VLLM::Worker",), None, "worker", "vllm", None),
        (("VllmWorker rank=1",), None, "worker", "vllm", "RANK1"),
        (("VLLM::EngineCore",), None, "engine_core", "vllm", None),
        (("VLLM::EngineCore_DP0",), None, "engine_core", "vllm", "DP0"),
        (("VLLM::APIServer_0",), None, "api_server", "vllm", "API0"),
        (("VLLM::DPCoordinator",), None, "dp_controller", "vllm", None),
        (("/usr/local/bin/vllm", "serve", "Qwen/Qwen3-0.6B", "-tp", "2"), None, "server", "vllm", None),
        (
            ("python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"),
            None,
            "server",
            "vllm",
            None,
        ),
        (
            ("/srv/app/.venv-cpu/bin/transformers", "serve", "--port", "8000"),
            None,
            "server",
            "transformers",
            None,
        ),
        (("torchrun", "--nproc-per-node", "8", "train.py"), None, "launcher", "torchrun", None),
        (
            ("python", "-m", "torch.distributed.run", "--nproc-per-node", "8", "train.py"),
            None,
            "launcher",
            "torchrun",
            None,
        ),
        (("python", "train.py", "--local-rank=3"), None, "worker", None, "LOCAL_RANK3"),
        (("python", "train.py"), {"RANK": "5", "LOCAL_RANK": "5"}, "worker", "torchrun", "RANK5"),
        # near misses
        (("python", "train.py"), {"PATH": "/usr/bin"}, "other", None, None),
        (("bash", "-c", "NCCL_ALGO=Ring python -m sglang.launch_server --tp 8"), None, "shell", None, None),
        (
            ("/usr/bin/python3", "-c", "from multiprocessing.resource_tracker import main;main(8)"),
            None,
            "helper",
            None,
            None,
        ),
        (
            ("python3", "-c", SPAWN, "--multiprocessing-fork"),
            None,
            "other",
            None,
            None,
        ),  # before setproctitle
        (("python", "-m", "sglang.bench_serving", "--backend", "sglang"), None, "other", None, None),
        (("grep", "sglang::scheduler_TP3"), None, "other", None, None),
        (("timeout", "600", "python", "-m", "sglang.launch_server"), None, "helper", None, None),
        ((), None, "other", None, None),
    ],
)
def test_classify_process(cmdline, environ, role, engine, rank) -> None:
    found = classify_process(cmdline, environ)
    assert (str(found.role), found.engine, found.rank) == (role, engine, rank)


# --- the seed: NCCL tuning exported, then checked in every TP worker --------------------

USER_ENV = {
    "NCCL_ALGO": "Ring",
    "NCCL_PROTO": "Simple",
    "NCCL_NVLS_ENABLE": "1",
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    "PATH": "/usr/bin",
}
# What SGLang 0.4.10's _set_envs_and_config leaves in the schedulers it spawns (engine.py:625-630); from
# 0.5.4.post3 a user's NCCL_NVLS_ENABLE is kept (the trees below are read as 0.4.10 launches).
WORKER_ENV = {
    **USER_ENV,
    "NCCL_NVLS_ENABLE": "0",
    "CUDA_DEVICE_MAX_CONNECTIONS": "8",
    "NCCL_CUMEM_ENABLE": "0",
}
EXPECTED = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "1", "NCCL_DEBUG": None}
RELEASE = "0.4.10"
NVLS_REASON = (
    "SGLang 0.4.10 writes NCCL_NVLS_ENABLE='0' in its launcher before it starts its worker processes, whatever the "
    "user exported, '1' with --enable-nccl-nvls (0.4.3+; 0.4.0-0.4.1 write '0' unconditionally, "
    "python/sglang/srt/server.py:571) (sglang 0.4.10 python/sglang/srt/entrypoints/engine.py:627)"
)


def sglang_tree(tp: int = 8, *, worker_env: Mapping[str, str] = WORKER_ENV) -> list[Proc]:
    server = Proc(
        "gpu-a",
        4200,
        1,
        ("/root/ml-env/bin/python3", "-m", "sglang.launch_server", "--tp", str(tp)),
        {**USER_ENV, "NCCL_DEBUG": "INFO"},
    )
    workers = [
        Proc("gpu-a", 4300 + i, 4200, (f"sglang::scheduler_TP{i}",), {**worker_env, "NCCL_DEBUG": "INFO"})
        for i in reversed(range(tp))
    ]
    return [
        server,
        *workers,
        Proc(
            "gpu-a",
            4299,
            4200,
            ("sglang::detokenizer",),
            None,
            "/proc/4299/environ could not be read: Permission denied",
        ),
    ]


def test_workers_show_what_sglang_wrote_and_why() -> None:
    report = check_env(sglang_tree(), EXPECTED, release=RELEASE)
    frame = report.frame.set_index(["process", "variable"])
    assert frame.at[("server [4200]", "NCCL_NVLS_ENABLE"), "status"] == "ok"  # exec-time environment
    row = frame.loc[("TP5 [4305]", "NCCL_NVLS_ENABLE")]
    assert (row["expected"], row["actual"], row["status"], row["reason"]) == (
        "1",
        "0",
        "overridden",
        NVLS_REASON,
    )
    assert frame.at[("TP5 [4305]", "NCCL_ALGO"), "status"] == "ok"
    assert frame.at[("TP5 [4305]", "NCCL_DEBUG"), "status"] == "ok"  # None: any value will do
    unreadable = frame.loc[("detokenizer [4299]", "NCCL_ALGO")]
    assert (unreadable["status"], unreadable["reason"]) == (
        "unreadable",
        "/proc/4299/environ could not be read: Permission denied",
    )


def test_status_rules_each_with_a_near_miss() -> None:
    env = {"A": "1", "B": "2", "C": ""}
    proc = Proc("h", 1, 0, ("python3", "-m", "sglang.launch_server"), env)
    report = check_env([proc], {"A": "1", "B": "1", "C": None, "D": None, "E": "x"})
    assert report.frame["status"].tolist() == ["ok", "overridden", "ok", "missing", "missing"]
    assert report.frame["reason"].isna().all()  # B, C, D, E are no engine's business


def test_a_renamed_process_shows_a_tail_of_its_environ_and_absence_there_is_no_evidence() -> None:
    """As real vLLM 0.25.0's engine core on the H200 (issue 23): setproctitle overwrote the first 4,576 bytes
    of its /proc environ with NUL bytes; the later variables survived; NCCL_ALGO, set early, did not.
    The resource tracker beside it (same parent, not renamed) holds them all."""
    early = {"NCCL_ALGO": "Ring", "FIELD_MARKER": "issue-23"}
    late = {"LD_LIBRARY_PATH": "/opt/lib", "VLLM_SERVER_DEV_MODE": "1"}
    raw = b"\0" * 4576 + b"".join(f"{k}={v}".encode() + b"\0" for k, v in late.items())
    api = Proc("h", 10, 1, ("python3", "-c", "from vllm.entrypoints.cli.main import main", "serve", "/m"),
               {**early, **late})
    tracker = Proc("h", 11, 10, ("python3", "-B", "-c", "from multiprocessing.resource_tracker import main;main(45)"),
                   {**early, **late})
    core = Proc("h", 12, 10, ("VLLM::EngineCore",), parse_environ(raw))
    expected = {"NCCL_ALGO": "Ring", "FIELD_MARKER": "issue-23", "VLLM_SERVER_DEV_MODE": "1", "NOT_SET": None}
    frame = check_env([api, tracker, core], expected).frame
    rows = frame[frame["pid"] == 12].set_index("variable")
    assert rows.loc["NCCL_ALGO", ["status", "source"]].tolist() == ["ok", "sibling 11"]
    assert rows.loc["FIELD_MARKER", ["status", "source"]].tolist() == ["ok", "sibling 11"]
    assert rows.loc["VLLM_SERVER_DEV_MODE", ["status", "source"]].tolist() == ["ok", "proc"]  # in the tail
    assert rows.loc["NOT_SET", ["status", "source"]].tolist() == ["missing", "sibling 11"]


def test_a_zombie_is_unreadable_not_missing() -> None:
    zombie = Proc(
        "h", 7, 1, ("sglang::scheduler_TP0",), {}, "process 7 is a zombie: it exited and waits to be reaped"
    )
    assert check_env([zombie], {"NCCL_ALGO": "Ring"}).frame["status"].tolist() == ["unreadable"]


def test_override_reasons_only_where_the_engine_spawned_the_process() -> None:
    mismatched = {**USER_ENV, "NCCL_NVLS_ENABLE": "0"}
    server = Proc("h", 10, 1, ("python", "-m", "sglang.launch_server"), mismatched)
    report = check_env([server], {"NCCL_NVLS_ENABLE": "1"})
    assert (report.frame.at[0, "status"], report.frame.at[0, "reason"]) == ("overridden", None)


def test_vllm_overrides_name_the_release_and_what_proc_cannot_show() -> None:
    """0.8.5 writes '0' on `import vllm` even over a user's value, and `vllm serve` spawns its workers,
    so their /proc shows it (env_override.py:11-25); 0.33 writes nothing (none since 0.10.2); 0.6.6
    writes it inside each worker, where no /proc shows it: only NCCL's echo can (worker_base.py:445)."""
    worker = Proc("h", 21, 20, ("VLLM::Worker_TP1",), {"NCCL_CUMEM_ENABLE": "0"})
    report = check_env([worker], {"NCCL_CUMEM_ENABLE": "1"}, release="0.8.5")
    assert report.frame.at[0, "reason"] == (
        "vLLM 0.8.5 writes NCCL_CUMEM_ENABLE='0' in every process that imports it, whatever the user exported, "
        "unless /dev/nvidia-caps-imex-channels exists (multi-node NVLink) (vllm 0.8.5 vllm/env_override.py:11-25)"
    )
    assert check_env([worker], {"NCCL_CUMEM_ENABLE": "1"}, release="0.33.0").frame.at[0, "reason"] is None
    kept = Proc("h", 21, 20, ("VLLM::Worker_TP1",), {"NCCL_CUMEM_ENABLE": "1"})
    old = check_env([kept], {"NCCL_CUMEM_ENABLE": "1"}, release="0.6.6")
    assert old.ok and len(old.notes) == 1 and "vLLM 0.6.6 writes '0' where /proc of its worker" in old.notes[0]
    assert "what /proc cannot see: NCCL_CUMEM_ENABLE" in str(old)


def test_an_untitled_child_inherits_its_parents_engine() -> None:
    server = Proc("h", 10, 1, ("python", "-m", "sglang.launch_server"), USER_ENV)
    child = Proc("h", 11, 10, ("python3", "-c", SPAWN, "--multiprocessing-fork"), WORKER_ENV)
    report = check_env([server, child], {"CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    row = report.frame.set_index("pid").loc[11]
    assert (row["role"], row["engine"], row["status"]) == ("other", "sglang", "overridden")
    assert row["reason"].startswith(
        "SGLang (sglang-0.5.20+, release not detected) writes CUDA_DEVICE_MAX_CONNECTIONS='8' in its launcher"
    )


def test_shells_and_helpers_are_left_out_unless_asked() -> None:
    shell = Proc("h", 5, 1, ("bash", "-c", "python -m sglang.launch_server"), {"PATH": "/usr/bin"})
    server = Proc("h", 6, 5, ("python", "-m", "sglang.launch_server"), USER_ENV)
    assert check_env([shell, server], {"NCCL_ALGO": "Ring"}).frame["pid"].tolist() == [6]
    assert check_env([shell, server], {"NCCL_ALGO": "Ring"}, skip_roles=()).frame["pid"].tolist() == [6, 5]


def test_processes_sort_by_role_then_rank_number() -> None:
    report = check_env(sglang_tree(tp=12), {"NCCL_ALGO": "Ring"})
    assert report.by_rank().columns.tolist() == [
        "server [4200]",
        *[f"TP{i} [{4300 + i}]" for i in range(12)],
        "detokenizer [4299]",
    ]


def test_several_hosts_are_named_in_the_process_labels() -> None:
    a = Proc("gpu-a", 1, 0, ("sglang::scheduler_TP0",), {"X": "1"})
    b = Proc("gpu-b", 1, 0, ("sglang::scheduler_TP8",), {"X": "1"})
    assert check_env([b, a], {"X": "1"}).frame["process"].tolist() == ["gpu-a TP0 [1]", "gpu-b TP8 [1]"]


def test_by_rank_and_heatmap_frames() -> None:
    report = check_env(sglang_tree(tp=2), EXPECTED, release=RELEASE)
    table = report.by_rank()
    assert table.index.tolist() == list(EXPECTED)
    assert table.at["NCCL_NVLS_ENABLE", "TP1 [4301]"] == "0"
    assert table.at["NCCL_ALGO", "detokenizer [4299]"] == "<unreadable>"
    heat = report.heatmap_frame()
    assert heat.at["NCCL_NVLS_ENABLE", "TP1 [4301]"] == STATUS_CODES["overridden"]
    assert heat.at["NCCL_NVLS_ENABLE", "server [4200]"] == STATUS_CODES["ok"]
    assert heat.attrs["status_codes"] == {"ok": 0, "overridden": 1, "missing": 2, "unreadable": 3}
    assert str(heat.dtypes.unique()[0]) == "int64"


def test_summary_text_and_reprs() -> None:
    report = check_env(sglang_tree(tp=8), EXPECTED, release=RELEASE)
    assert report.summary() == (
        "env check of 10 processes x 4 variables on gpu-a: 28 ok, 8 overridden, 0 missing, 4 unreadable; "
        "NCCL_NVLS_ENABLE overridden in 8 of 10"
    )
    assert not report.ok
    text = str(report)
    assert text.splitlines()[0] == report.summary()
    assert "TP7 [4307]" in text and NVLS_REASON in text
    page = report._repr_html_()
    assert (
        page.startswith("<p>env check of 10 processes") and "#fff4ce" in page and "&lt;unreadable&gt;" in page
    )
    assert len(report.problems()) == 12


def test_all_ok_summary() -> None:
    report = check_env(sglang_tree(tp=2, worker_env=USER_ENV)[:-1], {"NCCL_ALGO": "Ring"})
    assert report.ok and report.summary() == (
        "env check of 3 processes x 1 variable on gpu-a: 3 ok, 0 overridden, 0 missing, 0 unreadable"
    )


def test_every_known_override_comes_from_the_profiles_with_its_source() -> None:
    assert {o.engine for o in KNOWN_OVERRIDES} == {"sglang", "vllm"}  # transformers serve writes nothing
    assert {(o.variable, o.where) for o in KNOWN_OVERRIDES if o.engine == "sglang"} == {
        (w.name, w.source) for w in profile_for("sglang", None).env_writes}
    for override in KNOWN_OVERRIDES:
        assert override.when and override.writes and ":" in override.where
        assert override.variable in override.reason(Role.WORKER) and override.line in override.reason(Role.WORKER)


# --- NCCL_DEBUG=INFO echoes ----------------------------------------------------------------

# From the public SGLang 0.5.9 report (node tpgds-aihub0007, pids 196830..196837).
NCCL_LOG = """\
tpgds-aihub0007:196833:198229 [3] NCCL INFO [Proxy Progress] Device 3 CPU core 26
tpgds-aihub0007:196837:196837 [7] NCCL INFO NCCL_PROTO set by environment to Simple
tpgds-aihub0007:196837:196837 [7] NCCL INFO NCCL_ALGO set by environment to Ring
tpgds-aihub0007:196837:196837 [7] NCCL INFO threadThresholds 8/8/64 | 128/8/64 | 512 | 512
tpgds-aihub0007:196834:196834 [4] NCCL INFO NCCL_PROTO set by environment to Simple
tpgds-aihub0007:196834:196834 [4] NCCL INFO NCCL_ALGO set by environment to Ring
tpgds-aihub0007:196830:196830 [0] NCCL INFO NCCL_PROTO set by environment to Simple
tpgds-aihub0007:196830:196830 [0] NCCL INFO NCCL_ALGO set by environment to Ring
tpgds-aihub0007:196830:196830 [0] NCCL INFO Enabled NCCL Func/Proto/Algo Matrix:
    AllReduce |        0         0         1   |             0              1              0              0
tpgds-aihub0007:196833:196833 [3] NCCL INFO NCCL_PROTO set by environment to Simple
tpgds-aihub0007:196833:196833 [3] NCCL INFO NCCL_ALGO set by environment to Ring
tpgds-aihub0007:196833:196833 [3] NCCL INFO ncclCommInitRank comm 0x562ede2778a0 rank 3 nranks 16 cudaDev 3 \
nvmlDev 3 busId 5d000 commId 0x45a3a89de169ea18 - Init COMPLETE
tpgds-aihub0007:196837:196837 [7] NCCL INFO ncclCommInitRank comm 0x55d258a71780 rank 7 nranks 16 cudaDev 7 \
nvmlDev 7 busId db000 commId 0x45a3a89de169ea18 - Init COMPLETE
tpgds-aihub0007:177789:177789 [2] NCCL INFO NCCL_IB_DISABLE set by environment to 0.
tpgds-aihub0007:177789:177789 [2] NCCL INFO NCCL_SOCKET_IFNAME set by environment to enp25s0np0
tpgds-aihub0007:177789:177789 [2] NCCL INFO NCCL_IB_HCA set to mlx5_0,mlx5_1,mlx5_2,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_11
tpgds-aihub0007:185302:185302 [0] NCCL INFO AllReduce: 4 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..0}
[2026-03-03 12:11:38] tpgds-aihub0007:185303:186751 [1] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion \
from peer 10.99.91.63<51161> with status=4
""".splitlines()


def test_parse_nccl_env_reads_echoes_and_nothing_else() -> None:
    echoes = parse_nccl_env(NCCL_LOG)
    assert [(e.pid, e.device, e.variable, e.value) for e in echoes] == [
        (196837, 7, "NCCL_PROTO", "Simple"),
        (196837, 7, "NCCL_ALGO", "Ring"),
        (196834, 4, "NCCL_PROTO", "Simple"),
        (196834, 4, "NCCL_ALGO", "Ring"),
        (196830, 0, "NCCL_PROTO", "Simple"),
        (196830, 0, "NCCL_ALGO", "Ring"),
        (196833, 3, "NCCL_PROTO", "Simple"),
        (196833, 3, "NCCL_ALGO", "Ring"),
        (177789, 2, "NCCL_IB_DISABLE", "0"),  # integer params end with a period
        (177789, 2, "NCCL_SOCKET_IFNAME", "enp25s0np0"),
        (177789, 2, "NCCL_IB_HCA", "mlx5_0,mlx5_1,mlx5_2,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_11"),
    ]
    assert echoes[0].host == "tpgds-aihub0007" and echoes[0].line_no == 2


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (
            "(VllmWorker rank=1 pid=5678) gpu-a:5678:5678 [1] NCCL INFO NCCL_ALGO set by environment to Tree",
            ("gpu-a", 5678, "NCCL_ALGO", "Tree"),
        ),
        (
            "\x1b[36m(EngineCore_DP0 pid=77)\x1b[0m gpu-a:77:77 [0] NCCL INFO NCCL_PROTO set by environment to LL128\r",
            ("gpu-a", 77, "NCCL_PROTO", "LL128"),
        ),
        (
            "[2026-02-26 20:26:06 TP5] gpu-a:9:9 [5] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.",
            ("gpu-a", 9, "NCCL_NVLS_ENABLE", "0"),
        ),
        # near misses
        ("gpu-a:9:9 [5] NCCL WARN NCCL_ALGO set by environment to Ring", None),
        ("NCCL INFO NCCL_ALGO set by environment to RING", None),  # no host:pid:tid prefix
        ("gpu-a:9:9 [5] NCCL INFO AllReduce: 4 Bytes -> Algo RING proto SIMPLE", None),
    ],
)
def test_nccl_echo_prefixes(line: str, found) -> None:
    echoes = parse_nccl_env([line])
    assert ((echoes[0].host, echoes[0].pid, echoes[0].variable, echoes[0].value) if echoes else None) == found


def test_nccl_frame_compares_every_rank_with_the_expectation() -> None:
    frame = nccl_env_frame(
        NCCL_LOG,
        {
            "NCCL_ALGO": "ring",
            "NCCL_PROTO": "Simple",
            "NCCL_DEBUG": "INFO",
            "NCCL_SOCKET_IFNAME": "ENP25S0NP0",
        },
    )
    assert set(frame["variable"]) == {
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_SOCKET_IFNAME",
    }  # NCCL_DEBUG is never echoed
    by = frame.set_index(["pid", "variable"])
    assert by.at[(196837, "NCCL_ALGO"), "status"] == "ok"  # NCCL reads NCCL_ALGO case-insensitively
    assert by.at[(196837, "NCCL_ALGO"), "nccl_rank"] == "7/16"
    assert by.at[(177789, "NCCL_SOCKET_IFNAME"), "status"] == "overridden"  # an interface name is not
    assert by.at[(177789, "NCCL_ALGO"), "status"] == "not_logged"
    assert by.at[(196830, "NCCL_SOCKET_IFNAME"), "status"] == "not_logged"
    assert frame["device"].is_monotonic_increasing
    assert list(frame.columns) == [
        "host",
        "pid",
        "device",
        "nccl_rank",
        "role",
        "rank",
        "variable",
        "log_value",
        "expected",
        "status",
        "reason",
    ]


def test_with_nccl_log_joins_roles_and_reasons() -> None:
    tree = sglang_tree(tp=2)
    log = [
        "gpu-a:4300:4300 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.",
        "gpu-a:4300:4300 [0] NCCL INFO NCCL_ALGO set by environment to Ring",
        "gpu-a:4301:4301 [1] NCCL INFO NCCL_ALGO set by environment to Ring",
        "gpu-a:4301:4301 [1] NCCL INFO NCCL_NVLS_ENABLE set by environment to 1.",
    ]
    report = check_env(tree, {"NCCL_ALGO": "Ring", "NCCL_NVLS_ENABLE": "1"}, release=RELEASE).with_nccl_log(log)
    assert report.nccl is not None
    by = report.nccl.set_index(["rank", "variable"])
    assert (by.at[("TP0", "NCCL_NVLS_ENABLE"), "status"], by.at[("TP0", "NCCL_NVLS_ENABLE"), "reason"]) == (
        "overridden",
        NVLS_REASON,
    )
    assert by.at[("TP1", "NCCL_NVLS_ENABLE"), "status"] == "ok"
    assert report.summary().endswith("; NCCL log: 3 of 4 echoes as expected (NCCL's echoes are the authority)")
    assert set(report.nccl["role"]) == {"worker"}


# --- the simulator, a real process tree ------------------------------------------------------


def _proc_tree(root: int) -> list[Proc]:
    """What ``Host.process_tree`` reads, read here from /proc directly."""
    infos, todo = [], [root]
    while todo:
        pid = todo.pop()
        base = pathlib.Path(f"/proc/{pid}")
        try:
            ppid = int((base / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = tuple(a for a in (base / "cmdline").read_bytes().decode().split("\0") if a)
            raw = (base / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        environ = dict(item.partition("=")[::2] for item in raw.split("\0") if item)
        infos.append(Proc("localhost", pid, ppid, cmdline, environ))
        children = base / "task" / str(pid) / "children"
        todo += [int(c) for c in children.read_text().split()] if children.exists() else []
    return infos


@pytest.mark.skipif(
    not pathlib.Path("/proc/self/environ").exists() or importlib.util.find_spec("toolkit.sim.worker") is None,
    reason="needs Linux /proc and the simulator",
)
def test_the_simulators_workers_show_sglang_0_4_10s_overrides() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "NCCL_ALGO": "Ring", "NCCL_NVLS_ENABLE": "1"}
    argv = [sys.executable, "-m", "toolkit.sim", "--model-path", "m", "--tp-size", "2", "--port", str(port),
            "--sim-engine-version", RELEASE]
    server = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 20
        # wait until both ranks have exec'd and renamed themselves as SGLang's schedulers do
        tree = _proc_tree(server.pid)
        while sum(p.cmdline[:1] in (("sglang::scheduler_TP0",), ("sglang::scheduler_TP1",)) for p in tree) < 2:
            assert time.monotonic() < deadline, "the simulator did not start its two workers within 20 s"
            time.sleep(0.05)
            tree = _proc_tree(server.pid)
        report = check_env(tree, {"NCCL_ALGO": "Ring", "NCCL_NVLS_ENABLE": "1"}, release=RELEASE)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
    frame = report.frame.set_index(["rank", "variable"])
    assert frame.at[("TP1", "NCCL_NVLS_ENABLE"), "status"] == "overridden"
    assert frame.at[("TP1", "NCCL_NVLS_ENABLE"), "reason"] == NVLS_REASON
    assert frame.at[("TP0", "NCCL_ALGO"), "status"] == "ok"
    # the ranks renamed themselves: their /proc environ is NUL bytes, the answer came from their parent
    assert [p.environ for p in tree if p.cmdline == ("sglang::scheduler_TP1",)] == [{}]
    assert frame.at[("TP1", "NCCL_ALGO"), "source"] == f"parent {server.pid}"
    server_row = report.frame[report.frame["role"] == "server"].set_index("variable")
    assert server_row.at["NCCL_NVLS_ENABLE", "status"] == "ok"


# --- processes renamed with setproctitle (issue 23) -------------------------------------------

_EXPORTED = {"PATH": "/usr/bin", "HOME": "/root", "NCCL_ALGO": "Ring", "MARKER": "field-23"}
_API = Proc("gpu", 100, 1, ("/venv/bin/python3", "/venv/bin/vllm", "serve", "/tmp/m"), _EXPORTED)
_CORE = Proc("gpu", 102, 100, ("VLLM::EngineCore",), {})  # /proc/102/environ: NUL bytes
_TRACKER = Proc("gpu", 101, 100, ("/venv/bin/python3", "-c", "from multiprocessing.resource_tracker import main;main(6)"),
                {**_EXPORTED, "VLLM_WORKER_MULTIPROC_METHOD": "spawn"})


def _rows(report: object) -> dict[tuple[str, str], tuple[str, str]]:
    frame = report.frame  # type: ignore[attr-defined]
    return {(r.process, r.variable): (r.status, r.source) for r in frame.itertuples(index=False)}


def test_a_renamed_engine_core_is_judged_on_its_unrenamed_sibling_never_missing() -> None:
    report = check_env([_API, _TRACKER, _CORE], {"NCCL_ALGO": "Ring", "MARKER": "field-23"}, release="0.25.0")
    rows = _rows(report)
    assert rows[("engine_core [102]", "NCCL_ALGO")] == ("ok", "sibling 101")
    assert rows[("engine_core [102]", "MARKER")] == ("ok", "sibling 101")
    assert rows[("server [100]", "NCCL_ALGO")] == ("ok", "proc")


def test_a_renamed_process_without_a_sibling_is_judged_on_its_parent() -> None:
    report = check_env([_API, _CORE], {"NCCL_ALGO": "Ring"}, release="0.25.0")
    assert _rows(report)[("engine_core [102]", "NCCL_ALGO")] == ("ok", "parent 100")


def test_a_renamed_process_with_nothing_that_survived_is_unreadable_with_the_way_out() -> None:
    report = check_env([_CORE], {"NCCL_ALGO": "Ring"}, release="0.25.0")
    row = report.frame.iloc[0]
    assert (row["status"], row["source"]) == ("unreadable", "none")
    assert "setproctitle" in row["reason"] and "NCCL_DEBUG=INFO" in row["reason"]


def test_nccls_echo_decides_a_renamed_process_over_its_parent() -> None:
    worker = Proc("gpu", 103, 102, ("VLLM::Worker_TP1",), {})
    echo = ["vm:103:103 [1] NCCL INFO NCCL_ALGO set by environment to Tree"]
    report = check_env([_API, _CORE, worker], {"NCCL_ALGO": "Ring"}, release="0.25.0").with_nccl_log(echo, host="gpu")
    rows = _rows(report)
    assert rows[("TP1 [103]", "NCCL_ALGO")] == ("overridden", "NCCL echo")
    assert rows[("engine_core [102]", "NCCL_ALGO")] == ("ok", "parent 100")


def test_a_variable_nccl_never_echoed_is_missing_in_a_renamed_rank_whatever_its_parent_had() -> None:
    """A launcher that drops NCCL_ALGO for its workers (--sim-drop-env-in-workers): the parent has it, NCCL did not."""
    worker = Proc("gpu", 103, 102, ("VLLM::Worker_TP1",), {})
    echo = ["vm:103:103 [1] NCCL INFO NCCL_PROTO set by environment to Simple"]
    report = check_env([_API, _CORE, worker], {"NCCL_ALGO": "Ring"}, release="0.25.0").with_nccl_log(echo, host="gpu")
    assert _rows(report)[("TP1 [103]", "NCCL_ALGO")] == ("missing", "NCCL echo")


def test_an_untitled_process_with_an_empty_environment_is_taken_at_its_word() -> None:
    bare = Proc("gpu", 104, 100, ("/venv/bin/python3", "-m", "toolkit.sim.worker", "--tp-rank", "0"), {})
    assert _rows(check_env([_API, bare], {"NCCL_ALGO": "Ring"}))[("TP0 [104]", "NCCL_ALGO")] == ("missing", "proc")
