"""ServerSpec rendering and immutability (pure), and launch() on this machine."""

from __future__ import annotations

import dataclasses
import doctest
import json
import shlex
import socket
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_process import free_port as _free_port

import toolkit.server.launch
import toolkit.server.spec
from toolkit.errors import InvalidFlag, PortInUse
from toolkit.host.host import Host
from toolkit.server.launch import launch, launch_multinode
from toolkit.server.spec import MISSING, ServerSpec


@pytest.mark.parametrize("module", [toolkit.server.spec, toolkit.server.launch])
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.failed == 0 and result.attempted > 0


# -- presets -----------------------------------------------------------------------------------
def test_sglang_preset_renders_the_seed_launch() -> None:
    spec = ServerSpec.sglang("moonshotai/Kimi-K2.5", tp=8, port=8000).with_flags(
        {
            "--speculative-algorithm": "EAGLE3",
            "--speculative-num-steps": 2,
            "--speculative-attention-mode": "decode",
        }
    )
    assert spec.argv() == [
        "python", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5", "--tp-size", "8", "--port",
        "8000", "--host", "0.0.0.0", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2",
        "--speculative-attention-mode", "decode",
    ]  # fmt: skip
    assert (spec.engine, spec.model, spec.port, spec.simulated) == (
        "sglang",
        "moonshotai/Kimi-K2.5",
        8000,
        False,
    )
    assert spec.describe() == "EAGLE3 steps=2 attn=decode"


def test_sglang_keyword_flags_and_venv_python() -> None:
    spec = ServerSpec.sglang("m", python="/opt/sgl-venv", speculative_num_steps=3, enable_torch_compile=True)
    assert spec.launcher == ("/opt/sgl-venv/bin/python", "-m", "sglang.launch_server")
    assert spec.flag("--speculative-num-steps") == "3" and spec.flag("--enable-torch-compile") is None
    assert spec.flag("--absent") is MISSING


def test_vllm_preset_with_speculative_config_as_compact_json() -> None:
    spec = ServerSpec.vllm(
        "org/m", tp=4, port=8001, speculative_config={"method": "eagle3", "num_speculative_tokens": 2}
    )
    assert spec.command() == (
        "exec vllm serve org/m --tensor-parallel-size 4 --port 8001 "
        """--speculative-config '{"method":"eagle3","num_speculative_tokens":2}'"""
    )
    assert spec.describe() == "eagle3 k=2"
    assert ServerSpec.vllm("m", python="/venv/bin/python3").launcher[0] == "/venv/bin/vllm"


def test_transformers_preset_uses_the_venv_console_script() -> None:
    assert ServerSpec.transformers(port=8123).argv() == [
        "transformers",
        "serve",
        "--port",
        "8123",
        "--host",
        "0.0.0.0",
    ]
    spec = ServerSpec.transformers(port=8123, host="127.0.0.1", python=".venv-cpu")
    assert spec.argv()[:2] == [".venv-cpu/bin/transformers", "serve"] and spec.engine == "transformers"


def test_simulator_preset_keeps_the_engine_and_is_marked_simulated() -> None:
    sim = ServerSpec.simulator("vllm", model="kimi", tp=8, port=9000, python="/usr/bin/python3")
    assert sim.argv() == [
        "/usr/bin/python3", "-m", "toolkit.sim", "--engine", "vllm", "--model", "kimi",
        "--tensor-parallel-size", "8", "--port", "9000", "--host", "0.0.0.0",
    ]  # fmt: skip
    assert sim.engine == "vllm" and sim.simulated and sim.describe() == "sim baseline"
    sglang = ServerSpec.simulator(tp=2)
    assert sglang.argv()[1:] == ["-m", "toolkit.sim", "--model-path", "sim-model", "--tp-size", "2", "--port",
                                 "30000", "--host", "0.0.0.0"]  # fmt: skip
    assert sglang.launcher[0] == sys.executable and sglang.engine == "sglang"
    tf = ServerSpec.simulator("transformers", model="tiny")
    assert tf.argv()[1:] == ["-m", "toolkit.sim", "--engine", "transformers", "tiny", "--port", "8000", "--host",
                             "0.0.0.0"]  # fmt: skip
    with pytest.raises(InvalidFlag, match="sglang, vllm or transformers"):
        ServerSpec.simulator("tgi")


def test_the_simulator_accepts_what_the_presets_render() -> None:
    from toolkit.sim.args import parse_server_args

    for engine in ("sglang", "vllm", "transformers"):
        spec = ServerSpec.simulator(engine, model="kimi", tp=2, port=9001)
        config = parse_server_args(spec.argv()[3:])
        tp = 1 if engine == "transformers" else 2  # one process
        assert (config.engine, config.model_path, config.tp_size, config.port) == (engine, "kimi", tp, 9001)


# -- changes return new specs ------------------------------------------------------------------
def test_specs_are_immutable_and_changes_return_new_specs() -> None:
    base = ServerSpec.sglang("m", tp=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.port = 1  # type: ignore[misc]
    changed = base.with_flags({"--tp-size": 4, "--new": "x"}).with_env({"NCCL_ALGO": "Ring"})
    assert base.flag("--tp-size") == "8" and base.env == () and base.flag("--new") is MISSING
    assert [n for n, _ in changed.flags] == [
        "--model-path",
        "--tp-size",
        "--port",
        "--host",
        "--new",
    ]  # order kept
    assert changed.without_flags("--new", "--absent").flags == base.with_flags({"--tp-size": 4}).flags
    assert changed.with_env(NCCL_ALGO=None).env == ()
    assert hash(base) == hash(ServerSpec.sglang("m", tp=8))


def test_flag_values_of_every_kind() -> None:
    spec = ServerSpec.command(["prog"], port=1).with_flags(
        {
            "--int": 2,
            "--float": 0.85,
            "--switch": True,
            "--json": {"a": [1, 2]},
            "--list": [1, "b"],
            "--none": None,
        }
    )
    assert spec.argv() == ["prog", "--int", "2", "--float", "0.85", "--switch", "--json", '{"a":[1,2]}',
                           "--list", "1", "b", "--none"]  # fmt: skip
    assert spec.with_flags({"--switch": False}).flag("--switch") is MISSING
    with pytest.raises(InvalidFlag, match="flag value must be"):
        spec.with_flags({"--bad": object()})
    with pytest.raises(InvalidFlag, match="not a flag name"):
        spec.with_flags({"tp": 2})
    with pytest.raises(InvalidFlag, match="NUL"):
        spec.with_flags({"--x": "a\x00b"})


def test_port_and_model_follow_their_flags() -> None:
    spec = ServerSpec.sglang("m", port=30000).with_flags({"--port": 30001, "--model-path": "other"})
    assert (spec.port, spec.model) == (30001, "other")
    with pytest.raises(InvalidFlag, match="--port must be a number"):
        spec.with_flags({"--port": "http"})
    with pytest.raises(InvalidFlag, match="disagrees"):
        dataclasses.replace(spec, port=5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"engine": "tgi"}, "valid engines: sglang, vllm, transformers, command"),
        ({"port": 0}, "port must be an integer"),
        ({"launcher": ()}, "needs a launcher"),
        ({"env": (("BAD-NAME", "x"),)}, "not a valid environment variable name"),
        ({"flags": (("--a", "1"), ("--a", "2"))}, "appears twice"),
    ],
)
def test_invalid_specs_say_what_is_valid(change: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidFlag, match=message):
        dataclasses.replace(ServerSpec.command(["x"], port=1), **change)


def test_command_line_with_workdir_env_and_home() -> None:
    spec = dataclasses.replace(
        ServerSpec.command(["~/venv/bin/python", "-c", "print('hi there')"], port=9),
        workdir="~/sglang dev",
        env=(("NCCL_ALGO", "Ring"), ("X", "a b $c")),
    )
    assert spec.command() == (
        "cd \"$HOME\"/'sglang dev' && exec env NCCL_ALGO=Ring 'X=a b $c' \"$HOME\"/venv/bin/python -c "
        "'print('\"'\"'hi there'\"'\"')'"
    )


def test_to_dict_is_json_safe_and_round_trips() -> None:
    spec = dataclasses.replace(
        ServerSpec.sglang("m", tp=2).with_flags(cuda_graph_bs=[1, 2, 4], disable_radix_cache=True),
        env=(("NCCL_ALGO", "Ring"),), commit="0123456789abcdef", label=None,
    )  # fmt: skip
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["flags"][-2:] == [["--cuda-graph-bs", ["1", "2", "4"]], ["--disable-radix-cache", None]]
    assert data["command"] == spec.command() and data["env"] == {"NCCL_ALGO": "Ring"}
    assert ServerSpec.from_dict(data) == spec
    assert spec.describe() == "cuda-graph-bs=1,2,4 disable-radix-cache NCCL_ALGO=Ring @01234567"
    assert dataclasses.replace(spec, label="my run").describe() == "my run"
    assert ServerSpec.sglang("m").describe() == "baseline"


def test_describe_apart_names_only_what_one_side_has_that_the_other_lacks() -> None:
    base = ServerSpec.sglang("m", tp=8).with_flags(enable_metrics=True, mem_fraction_static=0.8)
    eagle = base.with_flags(speculative_algorithm="EAGLE3", speculative_num_steps=2)
    assert eagle.describe_apart(base) == "EAGLE3 steps=2"
    assert base.describe_apart(eagle) == "baseline"  # everything it has, the other has too
    prefill = eagle.with_flags(speculative_attention_mode="prefill")
    decode = eagle.with_flags(speculative_attention_mode="decode")
    assert (prefill.describe_apart(decode), decode.describe_apart(prefill)) == ("attn=prefill", "attn=decode")
    old, new = dataclasses.replace(base, commit="0123456789"), dataclasses.replace(base, commit="abcdef0123")
    assert new.describe_apart(old) == "@abcdef01" and base.describe_apart(dataclasses.replace(base)) == "baseline"
    env = dataclasses.replace(base, env=(("NCCL_ALGO", "Ring"),))
    assert (env.describe_apart(base), base.describe_apart(env)) == ("NCCL_ALGO=Ring", "baseline")
    assert dataclasses.replace(eagle, label="EAGLE-3").describe_apart(base) == "EAGLE-3"


TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(TEXT, max_size=5),
    env=st.dictionaries(st.from_regex(r"TK_[A-Z0-9_]{1,6}", fullmatch=True), TEXT),
)
def test_command_line_splits_back_into_the_exact_words(values: list[str], env: dict[str, str]) -> None:
    spec = ServerSpec.command(["prog", "-x"], port=1, env=env).with_flags(
        {f"--f{i}": v for i, v in enumerate(values)}
    )
    words = shlex.split(spec.command())
    assert words[0] == "exec"
    if env:
        assert words[1] == "env" and words[2 : 2 + len(env)] == [f"{k}={v}" for k, v in env.items()]
    assert words[-len(spec.argv()) :] == spec.argv()


# -- launch on this machine --------------------------------------------------------------------
SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def test_launch_writes_a_named_log_and_the_context_stops_the_tree(local_host: Host, tmp_path: Path) -> None:
    port = _free_port()
    spec = ServerSpec.command([sys.executable, "-c", "print('hello', flush=True); import time; time.sleep(120)"],
                              port=port, label="my sleeper")  # fmt: skip
    with launch(local_host, spec, log_dir=str(tmp_path)) as server:
        assert server.url == f"http://127.0.0.1:{port}" and server.spec is spec
        assert server.log_path.startswith(f"{tmp_path}/command-my-sleeper-") and server.log_path.endswith(
            ".log"
        )
        assert server.pid == server.process.pid and server.started_at <= time.time()
        deadline = time.monotonic() + 10
        while server.log_tail() != ["hello"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert server.stop_report is not None and not server.stop_report.already_stopped
    assert not server.is_alive() and server.stop().already_stopped


def test_launch_refuses_a_held_port_naming_the_holder(local_host: Host, tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(PortInUse) as info:
            launch(local_host, ServerSpec.command(SLEEPER, port=port), log_dir=str(tmp_path))
        assert time.monotonic() - started < 5.0
    error = info.value
    assert error.port == port and error.pid is not None and error.holder
    assert str(error).startswith(f"port {port} on localhost is held by pid {error.pid} (")
    assert "stop it or pass port=..." in str(error)
    assert list(tmp_path.iterdir()) == []  # nothing was started


def test_multinode_refuses_engines_without_node_flags(local_host: Host) -> None:
    with pytest.raises(InvalidFlag, match="Ray"):
        launch_multinode([local_host], ServerSpec.vllm("m"))
