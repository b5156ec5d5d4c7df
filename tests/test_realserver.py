"""The real CPU server: the tiny model builds, `transformers serve` answers, and stops clean.

The server half needs `.venv-cpu` (torch + transformers[serving], `make .venv-cpu/.installed`).
Without it these tests skip on a workstation and fail under CI=true, where a silent skip
would hide a broken install step. The pure half (argv, env, config) always runs.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
from sim_process import free_port as _free_port

from toolkit.errors import CommandNotFound, InvalidFlag, ToolkitError
from toolkit.testbeds.realserver import (
    OTHER_SERVE_OPTIONS,
    SERVE_FLAGS,
    STAMP_NAME,
    TinyModelConfig,
    ensure_tiny_model,
    serve_env,
    transformers_serve_argv,
)

CPU_VENV = Path(__file__).resolve().parents[1] / ".venv-cpu"


# --------------------------------------------------------------------------- pure


def test_argv_serves_the_local_dir_as_force_model_on_loopback() -> None:
    assert transformers_serve_argv("/models/tiny", port=8011) == [
        "transformers", "serve", "/models/tiny",
        "--host", "127.0.0.1", "--port", "8011", "--device", "cpu", "--log-level", "warning",
    ]  # fmt: skip


def test_argv_with_continuous_batching_caps_the_kv_cache() -> None:
    argv = transformers_serve_argv(
        "/m", port=1, continuous_batching=True, launcher=("venv/bin/transformers", "serve")
    )
    assert argv[:3] == ["venv/bin/transformers", "serve", "/m"]
    assert argv[-5:] == ["--continuous-batching", "--cb-num-blocks", "64", "--cb-max-batch-tokens", "512"]
    uncapped = transformers_serve_argv("/m", port=1, continuous_batching=True, cb_num_blocks=None)
    assert "--cb-num-blocks" not in uncapped


def test_argv_cb_caps_are_not_rendered_without_continuous_batching() -> None:
    assert not any(
        part.startswith("--cb-") for part in transformers_serve_argv("/m", port=1, cb_num_blocks=9)
    )


def test_argv_extra_flags_known_and_negated_pass_through() -> None:
    argv = transformers_serve_argv("/m", port=1, extra_flags={"--model-timeout": "60", "--no-compile": None})
    assert argv[-3:] == ["--model-timeout", "60", "--no-compile"]


def test_argv_unknown_flag_names_the_valid_ones() -> None:
    with pytest.raises(InvalidFlag, match="--force-model") as caught:
        transformers_serve_argv("/m", port=1, extra_flags={"--force-model": "/m"})
    assert "--compile" in str(caught.value) and "--host" not in str(caught.value)


@pytest.mark.parametrize("name", ["--continuous-batching", "--port", "--no-continuous-batching"])
def test_argv_extra_flag_with_its_own_argument_is_refused(name: str) -> None:
    # turning CB on through extra_flags would skip the KV cap: the keyword argument renders it
    with pytest.raises(InvalidFlag, match="has its own argument"):
        transformers_serve_argv("/m", port=1, extra_flags={name: None})


def test_serve_env_is_offline_and_keeps_the_rest() -> None:
    env = serve_env({"PATH": "/bin", "HF_HUB_OFFLINE": "0"}, omp_num_threads=1)
    assert env == {
        "PATH": "/bin", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "needle"), [({"hidden_size": 60, "heads": 8}, "divisible"), ({"vocab_size": 100}, ">= 300")]
)
def test_config_rejects_impossible_models(fields: dict[str, int], needle: str) -> None:
    with pytest.raises(InvalidFlag, match=needle):
        TinyModelConfig(**fields)


def test_ensure_refuses_a_directory_it_did_not_build(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ToolkitError, match="not a tiny model built by the toolkit"):
        ensure_tiny_model(tmp_path, python=tmp_path / "no-python")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_ensure_without_the_cpu_venv_says_how_to_make_it(tmp_path: Path) -> None:
    with pytest.raises(CommandNotFound, match="make .venv-cpu/.installed"):
        ensure_tiny_model(tmp_path / "model", python=tmp_path / "missing" / "python")


# --------------------------------------------------------------------------- real server


@pytest.fixture(scope="module")
def cpu_venv() -> Path:
    if not (CPU_VENV / ".installed").exists():
        reason = f"{CPU_VENV} is not installed (no .installed): run `make .venv-cpu/.installed` to test the real CPU server"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"CI must test the real server, but {reason}", pytrace=False)
        pytest.skip(reason)
    return CPU_VENV


@pytest.fixture(scope="module")
def tiny_model(cpu_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_tiny_model(
        tmp_path_factory.mktemp("realserver") / "tiny-llama", python=cpu_venv / "bin" / "python"
    )


@dataclass
class LocalServer:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after 15 s; idempotent."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def _start(venv: Path, model_dir: Path, log_path: Path, *, continuous_batching: bool) -> LocalServer:
    port = _free_port()
    argv = transformers_serve_argv(
        model_dir,
        port=port,
        continuous_batching=continuous_batching,
        launcher=(str(venv / "bin" / "transformers"), "serve"),
    )
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv,
            env=serve_env(omp_num_threads=1),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = LocalServer(f"http://127.0.0.1:{port}", port, process, log_path)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"server exited {process.returncode} during start-up:\n{log_path.read_text()[-3000:]}"
            )
        try:
            if _get_json(server, "/health") == {"status": "ok"}:
                return server
        except OSError:
            time.sleep(0.2)
    server.stop()
    pytest.fail(f"server not ready in 90 s:\n{log_path.read_text()[-3000:]}")


def _connection(server: LocalServer) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)


def _get_json(server: LocalServer, path: str) -> Any:
    connection = _connection(server)
    try:
        connection.request("GET", path)
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


def _post(server: LocalServer, path: str, body: dict[str, object]) -> tuple[int, Any]:
    """POST; a streamed answer comes back as its parsed `data:` events, anything else as JSON."""
    connection = _connection(server)
    try:
        connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        raw = response.read().decode()
        if not response.getheader("content-type", "").startswith("text/event-stream"):
            return response.status, json.loads(raw)
        events = [
            json.loads(block[len("data: ") :]) for block in raw.split("\n\n") if block.startswith("data: ")
        ]
        return response.status, events
    finally:
        connection.close()


@pytest.fixture(scope="module")
def cb_server(
    cpu_venv: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    server = _start(
        cpu_venv, tiny_model, tmp_path_factory.mktemp("logs") / "cb.log", continuous_batching=True
    )
    yield server
    server.stop()


@pytest.mark.realserver
def test_tiny_model_is_a_llama_with_a_chat_template_and_no_eos(tiny_model: Path) -> None:
    stamp = json.loads((tiny_model / STAMP_NAME).read_text())
    assert stamp["config"] == asdict(TinyModelConfig()) and stamp["vocab_actual"] == 1024
    config = json.loads((tiny_model / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["eos_token_id"] is None
    assert "eos_token_id" not in json.loads((tiny_model / "generation_config.json").read_text())
    assert "<|im_start|>" in (tiny_model / "chat_template.jinja").read_text()


@pytest.mark.realserver
def test_ensure_is_cached(tiny_model: Path, cpu_venv: Path) -> None:
    before = (tiny_model / STAMP_NAME).stat().st_mtime_ns
    assert ensure_tiny_model(tiny_model, python=cpu_venv / "bin" / "python") == tiny_model
    assert (tiny_model / STAMP_NAME).stat().st_mtime_ns == before


@pytest.mark.realserver
def test_serve_flags_exist_in_this_transformers(cpu_venv: Path) -> None:
    help_text = subprocess.run(
        [str(cpu_venv / "bin" / "transformers"), "serve", "--help"],
        capture_output=True, text=True, env=serve_env(), timeout=120, check=True,
    ).stdout  # fmt: skip
    missing = [
        name for name in [f.name for f in SERVE_FLAGS] + list(OTHER_SERVE_OPTIONS) if name not in help_text
    ]
    assert missing == [], f"transformers serve no longer knows {missing}"


@pytest.mark.realserver
def test_models_lists_the_local_dir_alone(cb_server: LocalServer, tiny_model: Path) -> None:
    listing = _get_json(cb_server, "/v1/models")
    assert [(m["id"], m["status"]["value"]) for m in listing["data"]] == [(str(tiny_model), "loaded")]


@pytest.mark.realserver
def test_streamed_completion_with_continuous_batching(cb_server: LocalServer) -> None:
    status, events = _post(
        cb_server, "/v1/completions", {"prompt": "The server streams", "max_tokens": 8, "stream": True}
    )
    assert status == 200 and isinstance(events, list)
    texts = [e["choices"][0]["text"] for e in events[:-1]]
    assert len(texts) == 8 and all(texts)  # one ASCII token per chunk
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["usage"]["completion_tokens"] == 8  # usage always; no [DONE] follows


@pytest.mark.realserver
def test_streamed_chat_completion_applies_the_template(cb_server: LocalServer) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}
    status, events = _post(cb_server, "/v1/chat/completions", body)
    assert status == 200 and isinstance(events, list)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant"}
    usage = events[-1]["usage"]
    assert usage["completion_tokens"] == 4
    # "hi" alone is at most two tokens; ChatML adds three markers, two newlines and two role names
    assert usage["prompt_tokens"] >= 9


@pytest.mark.realserver
@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"prompt": "x", "max_tokens": 2, "ignore_eos": True}, 422, "Unexpected fields"),
        ({"model": "other", "prompt": "x", "max_tokens": 2}, 400, "pinned"),
    ],
)
def test_server_rejects_what_it_does_not_serve(
    cb_server: LocalServer, body: dict[str, object], status: int, needle: str
) -> None:
    got, answer = _post(cb_server, "/v1/completions", body)
    assert (got, needle in json.dumps(answer)) == (status, True)


@pytest.mark.realserver
def test_sequential_server_answers_then_stops_leaving_nothing(
    cpu_venv: Path, tiny_model: Path, tmp_path: Path
) -> None:
    server = _start(cpu_venv, tiny_model, tmp_path / "plain.log", continuous_batching=False)
    try:
        status, events = _post(
            server, "/v1/completions", {"prompt": "hello", "max_tokens": 5, "stream": True}
        )
        assert status == 200 and events[-1]["usage"]["completion_tokens"] == 5
    finally:
        server.stop()
    server.stop()  # idempotent
    with pytest.raises(ProcessLookupError):
        os.killpg(server.process.pid, 0)  # no process of its group survived
    with (
        pytest.raises(ConnectionRefusedError),
        socket.create_connection(("127.0.0.1", server.port), timeout=2),
    ):
        pass
    assert "Uvicorn running on http://127.0.0.1:" in server.log_path.read_text()
