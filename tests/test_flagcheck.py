"""validate_spec against real ``--help`` output: the simulator's over SSH, and the real ``transformers serve``.

The simulator parses its flags with argparse as SGLang does (and as vLLM does with
``--engine vllm``); ``.venv-cpu/bin/transformers`` is the real CPU inference server of
the repository (click). Under ``CI=true`` its absence is a failure, not a skip.
"""

from __future__ import annotations

import dataclasses
import doctest
import os
from pathlib import Path

import pytest

from toolkit.errors import CommandFailed, InvalidFlag
from toolkit.host.host import Host
from toolkit.server import preflight as flagcheck
from toolkit.server.flag_check import FlagTableCache
from toolkit.server.preflight import help_source, validate_spec
from toolkit.server.spec import ServerSpec

CPU_VENV = Path(__file__).resolve().parents[1] / ".venv-cpu"


def test_docstring_examples_run() -> None:
    assert doctest.testmod(flagcheck).failed == 0


@pytest.mark.parametrize(
    ("spec", "engine", "shown"),
    [
        (ServerSpec.sglang("m", tp=8, python="/venv/bin/python"), "sglang",
         "/venv/bin/python -m sglang.launch_server --help"),
        (ServerSpec.vllm("Qwen/Qwen3-8B", tp=2), "vllm", "vllm serve --help=all"),
        (ServerSpec.transformers(model="tiny", python="/w/.venv-cpu"), "transformers",
         "/w/.venv-cpu/bin/transformers serve --help"),
        (ServerSpec.simulator("vllm", python="/py/python3"), "vllm", "/py/python3 -m toolkit.sim --engine vllm --help"),
    ],
)
def test_help_commands_follow_the_spec(spec: ServerSpec, engine: str, shown: str) -> None:
    source = help_source(spec.with_env({"HF_TOKEN": "hf_secret"}))
    assert source is not None and (source.engine, source.shown) == (engine, shown)
    assert "HF_TOKEN=hf_secret" in source.command and "hf_secret" not in source.shown  # env reaches --help only
    assert help_source(ServerSpec.command(["sleep", "60"], port=9000)) is None


@pytest.mark.ssh
def test_the_simulators_help_over_ssh(ssh_host: Host) -> None:
    cache = FlagTableCache()
    base = ServerSpec.simulator(tp=2, speculative_algorithm="EAGLE3", speculative_num_steps=2)
    assert validate_spec(ssh_host, base.with_flags({"--speculative-attention-mode": "decode"}), cache=cache) == []
    with pytest.raises(InvalidFlag) as typo:
        validate_spec(ssh_host, base.with_flags({"--speculative-atention-mode": "decode"}), cache=cache)
    assert typo.value.message.startswith(
        "unknown flag --speculative-atention-mode for sglang; did you mean --speculative-attention-mode?"
    )
    assert f"on {ssh_host.name}" in typo.value.message
    assert typo.value.evidence == ("--speculative-attention-mode {prefill,decode}",)
    with pytest.raises(InvalidFlag, match=r"must be one of prefill, decode; got 'decoder'"):
        validate_spec(ssh_host, base.with_flags({"--speculative-attention-mode": "decoder"}), cache=cache)
    warnings = validate_spec(ssh_host, base.with_flags({"--speculative-attention": "decode"}), cache=cache)
    assert [(w.kind, w.suggestion) for w in warnings] == [("abbreviation", "--speculative-attention-mode")]
    assert len(cache) == 1  # --help ran once for the four checks
    validate_spec(ssh_host, dataclasses.replace(base, commit="1a2b3c4d"), cache=cache)
    assert len(cache) == 2  # another commit is another build
    vllm = ServerSpec.simulator("vllm", tp=2).with_flags({"--enforce-eagr": True, "--gpu-memory-utilisation": "0.8"})
    with pytest.raises(InvalidFlag, match="2 flags would be rejected") as both:
        validate_spec(ssh_host, vllm, cache=cache)
    assert "unknown flag --enforce-eagr for vllm; did you mean --enforce-eager?" in both.value.evidence


def test_a_missing_engine_fails_before_the_launch(local_host: Host, tmp_path: Path) -> None:
    spec = ServerSpec.sglang("m", python=str(tmp_path / "no-venv" / "bin" / "python"))
    with pytest.raises(CommandFailed, match="launch_server --help` failed on localhost"):
        validate_spec(local_host, spec, cache=FlagTableCache())
    assert validate_spec(local_host, ServerSpec.command(["sleep", "60"], port=9000).with_flags({"--x": 1})) == []


@pytest.mark.realserver
def test_the_real_transformers_serve_help(local_host: Host) -> None:
    if not (CPU_VENV / "bin" / "transformers").exists():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true but {CPU_VENV}/bin/transformers is missing: run `make cpu-server`")
        pytest.skip(f"{CPU_VENV}/bin/transformers is missing: run `make cpu-server`")
    cache = FlagTableCache()
    spec = ServerSpec.transformers(python=str(CPU_VENV), port=8011)
    with pytest.raises(InvalidFlag, match="did you mean --continuous-batching") as typo:
        validate_spec(local_host, spec.with_flags({"--continous-batching": True}), cache=cache)
    assert "transformers 5." in typo.value.message  # the version read from the venv names the table
    with pytest.raises(InvalidFlag, match=r"--reasoning must be one of on, off, auto; got 'maybe'"):
        validate_spec(local_host, spec.with_flags({"--reasoning": "maybe"}), cache=cache)
    assert validate_spec(local_host, spec.with_flags({"--reasoning": "off", "--compile": False}), cache=cache) == []
    assert len(cache) == 1


def test_the_detected_release_rejects_a_removed_flag_and_says_when_it_went(local_host: Host) -> None:
    """--cuda-graph-max-bs: an option up to SGLang 0.5.13, an alias to 0.5.19, gone from 0.5.20 (argparse then
    finds two flags it prefixes: the release exits with 'ambiguous option')."""
    spec = ServerSpec.simulator(tp=2).with_flags({"--cuda-graph-max-bs": 8})
    with pytest.raises(InvalidFlag) as info:
        validate_spec(local_host, spec, cache=FlagTableCache())
    text = str(info.value)
    assert "ambiguous flag --cuda-graph-max-bs" in text and "sglang 0.5.23 (toolkit.sim)" in text
    assert "--cuda-graph-max-bs exists up to sglang 0.5.19 and is gone from 0.5.20 (this host runs 0.5.23)" in text
    old = ServerSpec.simulator(tp=2, sim_engine_version="0.4.10").with_flags({"--cuda-graph-max-bs": 8})
    assert validate_spec(local_host, old, cache=FlagTableCache()) == []
