"""Flags parse the way the engines parse them; workers get the engine's environment."""

from __future__ import annotations

import subprocess
import sys

import pytest

from toolkit.sim.args import parse_server_args
from toolkit.sim.workers import worker_environment


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolkit.sim", *args], capture_output=True, text=True, timeout=30
    )


def test_unknown_flag_fails_like_argparse():
    done = run_cli("--model-path", "m", "--bogus-flag", "1", "--tp", "2")
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
        "--cuda-graph-max-bs",
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
            "--tp",
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


def test_worker_environment_overrides_and_drops():
    parent = {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "Ring", "HOME": "/root"}
    config = parse_server_args(["--model-path", "m", "--sim-drop-env-in-workers", "NCCL_ALGO, HOME"])
    env = worker_environment(parent, config)
    assert env["NCCL_CUMEM_ENABLE"] == "0" and env["NCCL_NVLS_ENABLE"] == "0"
    assert "NCCL_ALGO" not in env and "HOME" not in env
    nvls = parse_server_args(["--model-path", "m", "--enable-nccl-nvls"])
    assert worker_environment(parent, nvls)["NCCL_NVLS_ENABLE"] == "1"
    vllm = parse_server_args(["--engine", "vllm", "m"])
    assert worker_environment(parent, vllm)["NCCL_CUMEM_ENABLE"] == "1"  # vLLM leaves it alone
