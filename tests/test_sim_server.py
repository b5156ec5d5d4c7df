"""The simulator as a real server: readiness sequence, endpoints, paced tokens, TP worker processes."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from sim_process import (
    EAGLE3_ARGS,
    READY_LINE,
    SimProcess,
    child_pids,
    get_json,
    is_alive,
    measure_rate,
    proc_cmdline,
    proc_environ,
    stream_completion,
)

from toolkit.sim.args import parse_server_args
from toolkit.sim.latency import LatencyModel, PerfParams

pytestmark = pytest.mark.timeout(90)

READY = READY_LINE
EAGLE = list(EAGLE3_ARGS)
RATE_CASES = {
    "baseline": [],
    "eagle3-prefill": EAGLE,
    "eagle3-decode": [*EAGLE, "--speculative-attention-mode", "decode"],
    "no-cuda-graph": ["--disable-cuda-graph"],
}


@pytest.fixture(scope="module")
def rate_servers() -> Iterator[dict[str, SimProcess]]:
    """One server per configuration, started together so their start-ups overlap."""
    servers = {
        name: SimProcess(["--model-path", "m", "--tp-size", "2", "--sim-startup-s", "0.5", *flags])
        for name, flags in RATE_CASES.items()
    }
    try:
        for server in servers.values():  # measure only once no start-up competes for the CPU
            server.wait_for(READY, timeout_s=90)  # twelve processes start at once on a busy 2-core machine
        yield servers
    finally:
        for server in servers.values():
            server.__exit__()


@pytest.mark.parametrize("case", list(RATE_CASES))
def test_single_stream_rate_matches_latency_model(rate_servers: dict[str, SimProcess], case: str) -> None:
    server = rate_servers[case]
    log = server.wait_for(READY)
    expected = LatencyModel(
        PerfParams(), parse_server_args(["--model-path", "m", *RATE_CASES[case]]).decode_setup
    )
    result = stream_completion(server.port, max_tokens=80)
    # "measure the decode rate": the simulated tokenizer gives the 7-letter "measure" two tokens
    assert result.usage == {"prompt_tokens": 5, "completion_tokens": 80, "total_tokens": 85}
    assert result.tokens == 80
    rates = [result.fitted_tok_s]
    if abs(rates[0] / expected.tokens_per_s() - 1) > 0.05:  # one more try: the CI box may have stalled us
        rates += measure_rate(server.port, expected.tokens_per_s(), attempts=1)
    assert rates[-1] == pytest.approx(expected.tokens_per_s(), rel=0.05), rates
    if "eagle" in case:
        assert max(result.chunk_tokens) > 1  # one SSE chunk per verify step, several tokens
    captured = "capture target decode cuda graph begin" in log.lower()  # SGLang 0.5.23's wording
    assert captured == (case != "no-cuda-graph")
    decode_lines = [
        x for x in server.log_text().splitlines() if " TP0] Decode batch, #running-req: 1, #token: " in x
    ]
    assert decode_lines, "one Decode batch line every 40 decode steps"
    graph = "cuda graph: False" if case in ("eagle3-prefill", "no-cuda-graph") else "cuda graph: True"
    assert graph in decode_lines[-1]
    assert ("accept len: " in decode_lines[-1]) == ("eagle" in case)


def test_concurrent_streams_share_slower_steps(rate_servers: dict[str, SimProcess]) -> None:
    server = rate_servers["baseline"]
    server.wait_for(READY)
    model = LatencyModel(PerfParams(), parse_server_args(["--model-path", "m"]).decode_setup)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: stream_completion(server.port, max_tokens=60), range(4)))
    per_stream = sorted(r.fitted_tok_s for r in results)
    assert per_stream[1] == pytest.approx(model.tokens_per_s(4) / 4, rel=0.08)  # batch 4: +9% per step
    span = max(r.chunk_times[-1] for r in results) - min(r.chunk_times[0] for r in results)
    assert sum(r.tokens for r in results) / span > 2.5 * model.tokens_per_s(1)  # aggregate rises


def test_readiness_sequence_and_endpoints() -> None:
    with SimProcess(
        [
            "--model-path",
            "org/Model-7B",
            "--served-model-name",
            "served",
            "--sim-startup-s",
            "0.5",
            "--sim-warmup-s",
            "1.0",
        ]
    ) as sim:
        sim.wait_for("Uvicorn running on")
        status, models = get_json(sim.port, "/v1/models")  # uvicorn is up before the warm-up ends
        assert status == 200 and models["data"][0]["id"] == "served"
        assert models["data"][0]["owned_by"] == "sglang-simulator"
        # SGLang 0.5.23: /health and /health_generate are one handler, 503 until the warm-up went through
        # (python/sglang/srt/entrypoints/http_server.py:721-736), then >= 1 s per answer (sleep(1) at :780).
        assert get_json(sim.port, "/health_generate")[0] == 503
        assert get_json(sim.port, "/health")[0] == 503
        assert READY not in sim.log_text()
        log = sim.wait_for(READY)
        started = time.monotonic()
        assert get_json(sim.port, "/health_generate")[0] == 200
        assert get_json(sim.port, "/health")[0] == 200
        assert time.monotonic() - started >= 1.9
        status, info = get_json(sim.port, "/get_server_info")
        assert status == 200 and info["simulator"] == "toolkit.sim" and info["tp_size"] == 1
        status, body = get_json(
            sim.port, "/v1/completions", "POST", {"model": "served", "prompt": "a b c", "max_tokens": 5}
        )
        assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
        assert len(body["choices"][0]["text"].split()) == 5
        chat = stream_completion(sim.port, max_tokens=6, model="served", chat=True)
        assert chat.events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert chat.events[-1]["choices"] == [] and chat.events[-1]["usage"]["completion_tokens"] == 6
        assert chat.events[-2]["choices"][0]["finish_reason"] == "length"
        no_usage = stream_completion(sim.port, max_tokens=3, model="served", include_usage=False)
        assert all(e["choices"] for e in no_usage.events)  # no usage-only chunk unless asked for
        order = [
            log.index(x)
            for x in (
                "SIMULATED SGLang server",
                "imitating SGLang 0.5.23",
                "server_args={'model_path': 'org/Model-7B'",  # a dict from 0.5.19 (entrypoints/engine.py:265)
                "Load weight begin. avail mem=",
                "KV Cache is allocated. #tokens: ",
                "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=",
                "Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 12, 16, 24",
                f"INFO:     Started server process [{sim.pid}]",
                "INFO:     Application startup complete.",
                "Uvicorn running on",
                READY,
            )
        ]
        assert order == sorted(order)
        assert log.splitlines()[0].split("] ", 1)[1].startswith("toolkit.sim: this is a SIMULATED")
        assert sim.stop() == 0
        assert f"Finished server process [{sim.pid}]" in sim.log_text()


def test_older_release_logs_and_health_as_it_did() -> None:
    """SGLang 0.4.10: the ServerArgs repr, 'Capture cuda graph' lines, an instant /health (0.4.10
    python/sglang/srt/entrypoints/http_server.py:232-235); /get_server_info only."""
    with SimProcess(["--model-path", "m", "--sim-engine-version", "0.4.10", "--sim-startup-s", "0.5"]) as sim:
        log = sim.wait_for("Uvicorn running on")
        assert "server_args=ServerArgs(model_path='m'" in log and "imitating SGLang 0.4.10" in log
        assert "Capture cuda graph begin. This can take up to several minutes. avail mem=" in log
        assert "Capture cuda graph bs [1, 2, 4, 8, 12, 16, 24" in log
        started = time.monotonic()
        assert get_json(sim.port, "/health")[0] == 200 and time.monotonic() - started < 0.9
        sim.wait_for(READY)
        assert get_json(sim.port, "/server_info")[0] == 404 and get_json(sim.port, "/get_server_info")[0] == 200


def _launch_with_user_env(release: str, tp: int) -> tuple[SimProcess, dict[str, str]]:
    env = {**os.environ, "NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO"}
    sim = SimProcess(["--model-path", "m", "--tp-size", str(tp), "--sim-startup-s", "1.0", "--sim-engine-version",
                      release, "--sim-drop-env-in-workers", "NCCL_ALGO"], env=env)
    return sim, env


def test_tp_workers_are_processes_with_the_release_environment() -> None:
    """SGLang 0.5.23 keeps the user's NCCL_CUMEM_ENABLE=1 (engine.py:1898-1907) and NCCL's own echo says so."""
    sim, _ = _launch_with_user_env("0.5.23", 8)
    with sim:
        log = sim.wait_for(READY, timeout_s=30)
        workers = child_pids(sim.pid)
        # each rank renamed itself as SGLang's schedulers do; setproctitle clobbered its /proc environ
        ranks = {int(proc_cmdline(pid)[0].removeprefix("sglang::scheduler_TP")): pid for pid in workers}
        assert sorted(ranks) == list(range(8))
        assert all(proc_environ(pid) == {} for pid in workers)
        parent = proc_environ(sim.pid)
        assert parent["NCCL_CUMEM_ENABLE"] == "1" and parent["NCCL_ALGO"] == "Ring"
        # what each rank holds, as NCCL echoes it (the rename does not touch os.environ)
        for echo in ("NCCL_CUMEM_ENABLE set by environment to 1.", "NCCL_NVLS_ENABLE set by environment to 1.",
                     "NCCL_GRAPH_REGISTER set by environment to 0."):  # 0.5.23 parallel_hook.py:369-371,425
            assert sum(f"NCCL INFO {echo}" in line for line in log.splitlines()) == 8, echo
        assert "NCCL INFO NCCL_ALGO set" not in log
        glmasr = [
            line
            for line in log.splitlines()
            if "Ignore import error when loading sglang.srt.models.glmasr" in line
        ]
        assert len(glmasr) == 8 and any(" TP5] " in line for line in glmasr)
        os.kill(ranks[3], signal.SIGKILL)  # a scheduler dies: 0.5.10+'s subprocess watchdog notices, SIGQUIT
        assert sim.wait_exit() == -signal.SIGKILL
        text = sim.log_text()
        assert f"Subprocess scheduler_3 (pid={ranks[3]}) crashed with exit code -9. Triggering SIGQUIT" in text
        assert "SIGQUIT received. signum=None, frame=None. It usually means one child failed." in text
        time.sleep(0.3)
        assert not any(is_alive(pid) for pid in workers)


def test_sglang_0_4_10_overwrites_the_users_nccl_cumem_enable() -> None:
    """0.4.x writes NCCL_CUMEM_ENABLE='0' whatever the user exported (0.4.10 engine.py:626): every
    scheduler's /proc shows it, the launcher's keeps the user's value."""
    sim, _ = _launch_with_user_env("0.4.10", 2)
    with sim:
        log = sim.wait_for(READY, timeout_s=30)
        assert proc_environ(sim.pid)["NCCL_CUMEM_ENABLE"] == "1"
        assert all(proc_environ(pid) == {} for pid in child_pids(sim.pid))  # renamed: /proc shows NUL bytes
        assert log.count("NCCL INFO NCCL_CUMEM_ENABLE set by environment to 0.") == 2
        assert log.count("NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.") == 2


def test_vllm_mode_serves_and_counts() -> None:
    spec = '{"method": "eagle3", "model": "d", "num_speculative_tokens": 2}'
    with SimProcess(
        [
            "--engine",
            "vllm",
            "org/M",
            "--tensor-parallel-size",
            "2",
            "--sim-startup-s",
            "0.5",
            "--speculative-config",
            spec,
        ]
    ) as sim:
        log = sim.wait_for("Application startup complete.")
        assert f"(APIServer pid={sim.pid}) INFO:     Application startup complete." in log
        assert len(child_pids(sim.pid)) == 3  # EngineCore + Worker_TP0 + Worker_TP1
        assert "(Worker_TP1 pid=" in log and "(EngineCore pid=" in log
        expected = LatencyModel(
            PerfParams(),
            parse_server_args(["--engine", "vllm", "m", "--speculative-config", spec]).decode_setup,
        ).tokens_per_s()
        rates = measure_rate(sim.port, expected, model="org/M")
        assert rates[-1] == pytest.approx(expected, rel=0.05), rates
        status, text = get_json(sim.port, "/metrics")
        assert status == 200
        metrics = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in str(text).splitlines()
            if line and not line.startswith("#")
        }
        labels = '{engine="0",model_name="org/M"}'
        assert metrics[f"vllm:generation_tokens_total{labels}"] == 80
        drafts = metrics[f"vllm:spec_decode_num_drafts_total{labels}"]
        assert metrics[f"vllm:spec_decode_num_draft_tokens_total{labels}"] == 2 * drafts
        accepted = metrics[f"vllm:spec_decode_num_accepted_tokens_total{labels}"]
        pos0 = metrics[
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="org/M",position="0"}'
        ]
        assert 0 < pos0 <= drafts and accepted > 0
        assert get_json(sim.port, "/v1/completions", "POST", {"model": "other", "prompt": "x"})[0] == 404
        assert sim.stop() == 0
