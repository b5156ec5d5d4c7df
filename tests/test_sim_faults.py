"""Injected faults: the engines' real messages, exit statuses and process behaviour."""

from __future__ import annotations

import contextlib
import http.client
import signal
import socket
import time
from collections.abc import Iterator

import pytest
from sim_process import SimProcess, child_pids, free_port, is_alive, stream_completion

pytestmark = pytest.mark.timeout(90)

SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."
RUNNING_SIGQUIT_LINE = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."
KILLED = -signal.SIGKILL  # SGLang's kill_process_tree ends the server with SIGKILL (shell status 137)
ENGINE_INIT = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
# name: (flags, expected exit status, lines the log must contain)
STARTUP_FAULTS: dict[str, tuple[list[str], int, list[str]]] = {
    "oom": (
        ["--tp-size", "4", "--sim-fault", "oom", "--sim-fault-rank", "2"],
        KILLED,
        [
            "TP2] Scheduler hit an exception: Traceback (most recent call last):",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 2 has a total capacity",
            SIGQUIT_LINE,
        ],
    ),
    "nccl": (
        ["--tp-size", "2", "--sim-fault", "nccl"],
        KILLED,
        [
            "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:3353, unhandled cuda error",
            "ncclUnhandledCudaError: Call to CUDA function failed.",
            SIGQUIT_LINE,
        ],
    ),
    "scheduler-traceback": (
        ["--tp-size", "2", "--sim-fault", "scheduler-traceback"],
        KILLED,
        [
            '  File "/usr/local/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line',
            "Exception: Capture cuda graph failed: CUDA error: an illegal memory access",
            SIGQUIT_LINE,
        ],
    ),
    # no --sim-fault: a fraction too small for the model fails by itself, with SGLang 0.5.23's messages
    "sglang-fraction-below-weights": (  # 61 GB of Qwen weights on one 140 GB GPU, a budget of 0.3 * 140 GB
        ["--model-path", "qwen3-32b", "--tp-size", "1", "--mem-fraction-static", "0.3"],
        KILLED,
        [
            "] Scheduler hit an exception: Traceback (most recent call last):",
            "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.3. "
            "Raise --mem-fraction-static above 0.442 (minimum viable = 1 - available/pre = 0.4411).",
            SIGQUIT_LINE,
        ],
    ),
    "sglang-0.5.17-fraction-below-weights": (  # the same message in 0.5.17 (kv_cache_configurator.py:1647-1655)
        ["--sim-engine-version", "0.5.17", "--model-path", "qwen3-32b", "--tp-size", "1", "--mem-fraction-static",
         "0.3"],
        KILLED,
        [
            "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.3. ",
            SIGQUIT_LINE,
        ],
    ),
    "sglang-fraction-no-kv-token": (  # the weights fit (16 GB) and leave the KV cache under its reserve
        ["--tp-size", "2", "--mem-fraction-static", "0.09"],
        KILLED,
        [
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
            "mem_fraction_static=0.09",
            SIGQUIT_LINE,
        ],
    ),
    "port-in-use": (
        ["--sim-fault", "port-in-use"],
        1,
        [
            "INFO:     Application startup complete.",
            "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): address "
            "already in use",
            "INFO:     Application shutdown complete.",
        ],
    ),
    "vllm-oom": (
        ["--engine", "vllm", "m", "--tensor-parallel-size", "2", "--sim-fault", "oom"],
        1,
        [
            "ERROR",
            "[multiproc_executor.py:702] WorkerProc failed to start.",
            "[core.py:1231] EngineCore failed to start.",
            "torch.OutOfMemoryError: CUDA out of memory.",
            ENGINE_INIT,
        ],
    ),
    "vllm-kv-cache": (
        ["--engine", "vllm", "m", "--sim-fault", "scheduler-traceback"],
        1,
        ["ValueError: To serve at least one request with the model's max seq len (262144)", ENGINE_INIT],
    ),
}


@pytest.fixture(scope="module")
def startup_faults() -> Iterator[dict[str, SimProcess]]:
    """Every start-up fault launched at once; each test then reads its own result."""
    sims = {}
    for name, (flags, _, _) in STARTUP_FAULTS.items():
        base = [] if "--engine" in flags or "--model-path" in flags else ["--model-path", "m"]
        sims[name] = SimProcess([*base, "--sim-startup-s", "0.5", *flags])
    for sim in sims.values():
        sim.wait_exit(timeout_s=30)
    try:
        yield sims
    finally:
        for sim in sims.values():
            sim.__exit__()


@pytest.mark.parametrize("name", list(STARTUP_FAULTS))
def test_startup_fault_gives_real_message_and_status(
    startup_faults: dict[str, SimProcess], name: str
) -> None:
    sim = startup_faults[name]
    _, status, lines = STARTUP_FAULTS[name]
    log = sim.log_text()
    assert sim.proc.returncode == status, log[-2000:]
    for line in lines:
        assert line.replace("{port}", str(sim.port)) in log
    assert "fired up" not in log


def test_port_really_held_fails_like_uvicorn_and_vllm() -> None:
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        with (
            SimProcess(["--model-path", "m", "--sim-startup-s", "0.5"], port=port) as sglang,
            SimProcess(["--engine", "vllm", "m", "--sim-startup-s", "0.5"], port=port) as vllm,
        ):
            assert sglang.wait_exit() == 1 and vllm.wait_exit() == 1
            assert (
                f"ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): "
                "address already in use"
            ) in sglang.log_text()
            assert f"(APIServer pid={vllm.pid}) OSError: [Errno 98] Address already in use" in vllm.log_text()
            assert "EngineCore" not in vllm.log_text()  # vLLM binds before it starts the engine


def test_crash_while_serving_cuts_the_stream() -> None:
    with SimProcess(
        [
            "--model-path",
            "m",
            "--tp-size",
            "2",
            "--sim-startup-s",
            "0.5",
            "--sim-fault",
            "crash-while-serving",
            "--sim-crash-after-requests",
            "1",
        ]
    ) as sim:
        sim.wait_for("The server is fired up and ready to roll!")
        assert stream_completion(sim.port, max_tokens=10).tokens == 10
        try:  # the connection dies mid-stream: an error, or a stream that ends without finishing
            cut = stream_completion(sim.port, max_tokens=200)
            assert cut.tokens < 200 and cut.usage is None
        except (OSError, http.client.HTTPException):
            pass
        assert sim.wait_exit() == KILLED
        log = sim.log_text()
        assert "TP1] Scheduler hit an exception: Traceback (most recent call last):" in log
        assert "RuntimeError: CUDA error: an illegal memory access was encountered" in log
        # After the warm-up the tokenizer manager's handler answers SIGQUIT (0.5.4+; 0.5.23
        # python/sglang/srt/managers/tokenizer_manager.py:4072-4074), not the launcher's.
        assert log.rstrip().endswith(RUNNING_SIGQUIT_LINE)


def test_hang_is_alive_and_silent_and_leaves_no_orphans() -> None:
    with SimProcess(
        ["--model-path", "m", "--tp-size", "2", "--sim-startup-s", "0.5", "--sim-fault", "hang"]
    ) as sim:
        sim.wait_for("Init torch distributed begin.")
        time.sleep(1.0)
        before = sim.log_text()
        time.sleep(0.5)
        assert sim.proc.poll() is None and sim.log_text() == before
        assert "Load weight begin" not in before
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", sim.port)) != 0  # never listens
        workers = child_pids(sim.pid)
        assert len(workers) == 2
        sim.proc.kill()  # the server dies hard: PR_SET_PDEATHSIG takes its workers with it
        sim.proc.wait()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(is_alive(pid) for pid in workers):
            time.sleep(0.05)
        assert not any(is_alive(pid) for pid in workers)


def test_slow_start_reaches_ready_late() -> None:
    started = time.monotonic()
    with SimProcess(
        [
            "--model-path",
            "m",
            "--sim-startup-s",
            "0.5",
            "--sim-fault",
            "slow-start",
            "--sim-slow-start-s",
            "1.5",
        ]
    ) as sim:
        sim.wait_for("The server is fired up and ready to roll!")
        assert time.monotonic() - started >= 1.8
        assert sim.stop() == 0


@pytest.mark.parametrize(
    "release, line, sigquit",
    [
        # 0.5.23 python/sglang/srt/utils/watchdog.py:150-155, then the tokenizer manager's handler (0.5.4+)
        ("0.5.23", "TP1] Scheduler watchdog timeout (self.watchdog_timeout=1.0, self.soft=False)", RUNNING_SIGQUIT_LINE),
        # 0.4.10 python/sglang/srt/managers/scheduler.py:2010, then the launcher's handler
        ("0.4.10", "TP1] Watchdog timeout (self.watchdog_timeout=1.0)", SIGQUIT_LINE),
    ],
)
def test_a_stalled_step_ends_in_the_releases_watchdog_lines(release: str, line: str, sigquit: str) -> None:
    with SimProcess(["--model-path", "m", "--tp-size", "2", "--sim-startup-s", "0.5", "--sim-fault", "watchdog",
                     "--sim-crash-after-requests", "0", "--watchdog-timeout", "1", "--sim-engine-version", release]) as sim:
        sim.wait_for("The server is fired up and ready to roll!")
        with contextlib.suppress(OSError, http.client.HTTPException, AssertionError):
            stream_completion(sim.port, max_tokens=50, timeout_s=20)  # it never finishes
        assert sim.wait_exit(timeout_s=60) == KILLED
        log = sim.log_text()
        assert line in log and log.rstrip().endswith(sigquit)
