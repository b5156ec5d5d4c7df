"""Flags parse the way the imitated release parses them; workers get that release's environment."""

from __future__ import annotations

import subprocess
import sys

import pytest

from toolkit.logs import classify_lines
from toolkit.sim.args import parse_server_args
from toolkit.sim.startup_vllm import vllm_engine_script, vllm_preamble
from toolkit.sim.workers import worker_environment


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolkit.sim", *args], capture_output=True, text=True, timeout=30
    )


def test_unknown_flag_fails_like_argparse():
    done = run_cli("--model-path", "m", "--bogus-flag", "1", "--tp-size", "2")
    assert done.returncode == 2
    assert "python -m toolkit sim: error: unrecognized arguments: --bogus-flag 1" in done.stderr
    assert done.stdout == ""


def test_invalid_choice_lists_the_valid_ones():
    done = run_cli("--model-path", "m", "--speculative-attention-mode", "fast")
    assert done.returncode == 2
    assert "argument --speculative-attention-mode: invalid choice: 'fast'" in done.stderr
    assert "prefill" in done.stderr and "decode" in done.stderr


def test_help_lists_every_flag_and_choice():
    sglang = run_cli("--help")
    assert sglang.returncode == 0
    for flag in (
        "--model-path",
        "--served-model-name",
        "--tp-size",
        "--host",
        "--port",
        "--speculative-algorithm",
        "--speculative-draft-model-path",
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
        "--speculative-attention-mode",
        "--disable-cuda-graph",
        "--cuda-graph-max-bs-decode",
        "--mem-fraction-static",
        "--log-level",
        "--nnodes",
        "--node-rank",
        "--dist-init-addr",
        "--sim-startup-s",
        "--sim-fault",
        "--sim-seed",
        "--sim-drop-env-in-workers",
        "--source-dir",
        "--engine",
        "--sim-engine-version",
        "--api-key",
    ):
        assert flag in sglang.stdout, flag
    assert "{EAGLE,EAGLE3,NEXTN}" in sglang.stdout and "{prefill,decode}" in sglang.stdout
    assert "crash-while-serving" in sglang.stdout
    vllm = run_cli("--engine", "vllm", "--help")
    for flag in ("--tensor-parallel-size", "--speculative-config", "--enforce-eager", "--served-model-name"):
        assert flag in vllm.stdout, flag


def test_sglang_speculative_defaults():
    config = parse_server_args(
        [
            "--model-path",
            "m",
            "--tp-size",
            "8",
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-num-steps",
            "2",
            "--speculative-num-draft-tokens",
            "5",
        ]
    )
    assert config.tp_size == 8 and config.speculation is not None
    assert config.speculation.verified_tokens == 3  # topk 1 forces num_steps + 1, as SGLang does
    assert config.speculation.verify_in_extend  # the default attention mode is prefill
    assert config.fault_rank == 7
    decode = parse_server_args(
        ["--model-path", "m", "--speculative-algorithm", "EAGLE3", "--speculative-attention-mode", "decode"]
    )
    assert decode.speculation is not None and not decode.speculation.verify_in_extend


def test_vllm_flags():
    config = parse_server_args(
        [
            "--engine",
            "vllm",
            "org/model",
            "--tensor-parallel-size",
            "2",
            "--enforce-eager",
            "--speculative-config",
            '{"method": "eagle3", "model": "d", "num_speculative_tokens": 3}',
        ]
    )
    assert config.engine == "vllm" and config.model_path == "org/model" and config.tp_size == 2
    assert not config.cuda_graph and config.speculation is not None and config.speculation.num_steps == 3
    with pytest.raises(SystemExit) as info:
        parse_server_args(["--engine", "vllm", "m", "--speculative-config", "{not json"])
    assert info.value.code == 2


def test_a_removed_flag_fails_as_the_release_fails():
    """--cuda-graph-max-bs is an option up to 0.5.13, an alias in 0.5.14-0.5.19, gone from 0.5.20 (argparse's
    prefix matching then finds two flags: 'ambiguous option', exit 2, as the real 0.5.20/0.5.23 parsers do)."""
    gone = run_cli("--model-path", "m", "--cuda-graph-max-bs", "8")
    assert gone.returncode == 2
    assert ("ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
            "--cuda-graph-max-bs-prefill") in gone.stderr
    assert parse_server_args(["--model-path", "m", "--sim-engine-version", "0.4.10", "--cuda-graph-max-bs", "8"]
                             ).cuda_graph_max_bs == 8
    assert parse_server_args(["--model-path", "m", "--sim-engine-version", "0.5.19", "--cuda-graph-max-bs", "8"]
                             ).cuda_graph_max_bs == 8
    old = run_cli("--model-path", "m", "--sim-engine-version", "0.4.10", "--cuda-graph-max-bs-decode", "8")
    assert old.returncode == 2 and "unrecognized arguments: --cuda-graph-max-bs-decode 8" in old.stderr


def test_every_flag_of_the_release_is_accepted_and_tp_only_by_prefix():
    """A real 0.5.23 flag the simulator does not simulate is accepted (the real parser would); --tp is
    argparse's prefix of --tp-size, not a spelling of its own (the help does not list it)."""
    config = parse_server_args(["--model-path", "m", "--tp", "2", "--enable-symm-mem", "--dcp-size", "1"])
    assert config.tp_size == 2
    help_text = run_cli("--help").stdout
    assert "--enable-symm-mem" in help_text and "accepted as SGLang 0.5.23 accepts it; not simulated" in help_text
    assert "--tp TP" not in help_text and "--tp," not in help_text
    vllm = parse_server_args(["--engine", "vllm", "m", "--max-cudagraph-capture-size", "64", "-tp", "2"])
    assert vllm.tp_size == 2


def test_unknown_release_is_refused_with_the_lines_it_knows():
    done = run_cli("--model-path", "m", "--sim-engine-version", "0.3.0")
    assert done.returncode == 2
    assert "predates every profile" in done.stderr and "sglang-0.5.20+ (>= 0.5.20)" in done.stderr
    version = run_cli("--engine", "vllm", "--sim-engine-version", "0.8.5", "--version")
    assert version.returncode == 0 and version.stdout.strip() == "toolkit.sim imitating vllm 0.8.5"


@pytest.mark.parametrize(
    "release, cumem, nvls, written",
    [
        # 0.5.4.post2+ keep a user's value (0.5.23 python/sglang/srt/entrypoints/engine.py:1898-1915)
        ("0.5.23", "1", "1", {"CUDA_DEVICE_MAX_CONNECTIONS": "8", "NCCL_GRAPH_REGISTER": "0"}),
        # 0.5.0rc0-0.5.4.post1 still overwrite NCCL_CUMEM_ENABLE with str(int(--enable-symm-mem)) (0.5.4.post1 :673)
        ("0.5.4.post1", "0", "0", {"CUDA_DEVICE_MAX_CONNECTIONS": "8", "CUDA_MODULE_LOADING": "AUTO"}),
        # 0.4.x overwrite both (0.4.10 engine.py:625-630)
        ("0.4.10", "0", "0", {"CUDA_DEVICE_MAX_CONNECTIONS": "4", "TORCH_NCCL_AVOID_RECORD_STREAMS": "1"}),
    ],
)
def test_worker_environment_follows_the_release(release: str, cumem: str, nvls: str, written: dict[str, str]):
    parent = {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "Ring", "HOME": "/root"}
    config = parse_server_args(["--model-path", "m", "--tp-size", "2", "--sim-engine-version", release,
                                "--sim-drop-env-in-workers", "NCCL_ALGO, HOME"])
    env = worker_environment(parent, config)
    assert (env["NCCL_CUMEM_ENABLE"], env["NCCL_NVLS_ENABLE"]) == (cumem, nvls)
    assert {k: env.get(k) for k in written} == written
    assert "NCCL_ALGO" not in env and "HOME" not in env


def test_worker_environment_conditions():
    parent: dict[str, str] = {}
    one_gpu = parse_server_args(["--model-path", "m", "--tp-size", "1"])
    assert "NCCL_GRAPH_REGISTER" not in worker_environment(parent, one_gpu)  # needs max(TP, EP, DP) > 1
    eager = parse_server_args(["--model-path", "m", "--tp-size", "2", "--disable-cuda-graph"])
    assert "NCCL_GRAPH_REGISTER" not in worker_environment(parent, eager)  # and CUDA graphs on
    nvls = parse_server_args(["--model-path", "m", "--enable-nccl-nvls", "--sim-engine-version", "0.4.10"])
    assert worker_environment({"NCCL_NVLS_ENABLE": "0"}, nvls)["NCCL_NVLS_ENABLE"] == "1"


def test_vllm_writes_by_release_and_what_proc_shows():
    """vLLM 0.33 writes no NCCL_CUMEM_ENABLE (none since 0.10.2); `vllm serve` spawns from 0.8.3, so the
    workers' /proc shows VLLM_WORKER_MULTIPROC_METHOD=spawn; 0.6.x writes '0' inside each worker, which no
    /proc shows (0.6.6 vllm/worker/worker_base.py:445)."""
    parent = {"NCCL_CUMEM_ENABLE": "1"}
    new = parse_server_args(["--engine", "vllm", "m", "--tensor-parallel-size", "2"])
    env = worker_environment(parent, new, "worker")
    assert env["NCCL_CUMEM_ENABLE"] == "1" and env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    old = parse_server_args(["--engine", "vllm", "m", "--sim-engine-version", "0.6.6"])
    started, in_process = old.release.child_environment(parent, "worker", old.env_context)
    assert started["NCCL_CUMEM_ENABLE"] == "1" and in_process["NCCL_CUMEM_ENABLE"] == "0"


def test_vllm_0_33_start_up_prints_its_logo_or_the_version_line_and_init_engine_took() -> None:
    """vLLM 0.33.0 logs a logo with the version and the model (entrypoints/common/startup.py:16-38), one line with
    VLLM_DISABLE_LOG_LOGO=1, and `init engine ... took %.2f s` (v1/engine/core.py:413); 0.8.5 neither."""
    new = parse_server_args(["--engine", "vllm", "org/model", "--sim-engine-version", "0.33.0"])
    logo = vllm_preamble(new)[0][2]
    assert "version 0.33.0" in logo and "model   org/model" in logo and "█" in logo
    assert vllm_preamble(new, disable_logo=True)[0][2] == "vLLM server version 0.33.0, serving model org/model"
    took = [line.text for line in vllm_engine_script(new, 7).lines if "init engine" in line.text]
    assert len(took) == 1 and took[0].endswith(" s") and "seconds" not in took[0]
    assert {e.verdict.value for e in classify_lines(logo.split("\n"), engine="vllm")} <= {"info"}
    old = parse_server_args(["--engine", "vllm", "org/model", "--sim-engine-version", "0.8.5"])
    assert vllm_preamble(old, disable_logo=True)[0][2] == "vLLM API server version 0.8.5"
    assert any(line.text.endswith(" seconds") for line in vllm_engine_script(old, 7).lines if "init engine" in line.text)
