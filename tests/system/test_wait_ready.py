"""wait_ready against the simulator's real start-ups and faults, over the loopback sshd and locally.

Each fault must raise the right error quoting the right line; a healthy start with the
seed's benign TP5 import line must never abort.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sim_process import free_port

from toolkit.errors import ReadinessTimeout, ServerDied, ServerHung
from toolkit.host.host import Host
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec


def _spec(**flags: Any) -> ServerSpec:
    return ServerSpec.simulator(tp=8, port=free_port(), host="127.0.0.1", **{"--sim-startup-s": 0.6, **flags})


def test_healthy_start_with_benign_tp5_line_is_ready(any_host: Host, tmp_path: Any) -> None:
    with launch(any_host, _spec(), log_dir=str(tmp_path)) as server:
        report = server.wait_ready(timeout_s=60)
        assert report.ready
        assert report.ready_reason and "health_generate" in report.ready_reason
        assert any(e.rank == "TP5" and "glmasr" in e.text for e in report.benign), report.benign
        assert {"weights_loaded", "cuda_graph_captured", "ready"} <= set(report.phase_names)
        # the seed's grep would have aborted this very start
        log = "\n".join(server.log_tail(400))
        assert "Ignore import error when loading sglang.srt.models.glmasr" in log


def test_a_server_bound_to_another_loopback_address_is_probed_there(local_host: Host, tmp_path: Any) -> None:
    """`--host 127.0.0.2` on this machine listens there only: probing localhost timed out after the log said ready."""
    with launch(local_host, _spec().with_flags({"--host": "127.0.0.2"}), log_dir=str(tmp_path)) as server:
        assert server.url.startswith("http://127.0.0.2:")
        assert server.wait_ready(timeout_s=60).ready


def test_the_wait_loop_ticks_without_spinning(local_host: Host, tmp_path: Any) -> None:
    """The loop's own tick announces a state change; waking on it made the loop spin a core for the
    whole start-up (thousands of ticks a second). It ticks every 0.05 s or on another thread's news."""
    own: list[float] = []
    with launch(local_host, _spec(), log_dir=str(tmp_path)) as server:
        me = threading.current_thread()
        unsubscribe = server.state.subscribe(lambda status: own.append(time.monotonic())
                                             if threading.current_thread() is me else None)
        started = time.monotonic()
        assert server.wait_ready(timeout_s=60).ready
        waited = time.monotonic() - started
        unsubscribe()
    assert len(own) <= 60 * waited + 5, f"{len(own)} ticks in {waited:.2f} s: the wait loop spins"


def test_ready_is_not_claimed_when_only_v1_models_answers(local_host: Host, tmp_path: Any) -> None:
    """uvicorn (and /v1/models) is up during warm-up: readiness waits for generation."""
    with launch(local_host, _spec(**{"--sim-warmup-s": 3.0}), log_dir=str(tmp_path)) as server:
        waiter = ThreadPoolExecutor(max_workers=1).submit(server.wait_ready, timeout_s=60)
        deadline = time.monotonic() + 30
        while _status(f"{server.url}/v1/models") != 200:
            assert time.monotonic() < deadline, "the simulator's HTTP server never came up"
            time.sleep(0.05)
        assert _status(f"{server.url}/health_generate") != 200  # still warming up
        assert not waiter.done(), "wait_ready claimed readiness while only /v1/models answered"
        report = waiter.result(timeout=60)
        assert report.ready and "health_generate" in (report.ready_reason or "")


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


@pytest.mark.parametrize(
    ("fault", "quoted"),
    [
        ("oom", "CUDA out of memory"),
        ("nccl", "NCCL error"),
        ("scheduler-traceback", "TP"),
    ],
)
def test_fatal_start_raises_server_died_quoting_the_line(
    any_host: Host, tmp_path: Any, fault: str, quoted: str
) -> None:
    with launch(any_host, _spec(**{"--sim-fault": fault}), log_dir=str(tmp_path)) as server:
        started = time.monotonic()
        with pytest.raises(ServerDied) as caught:
            server.wait_ready(timeout_s=60)
        assert time.monotonic() - started < 30
        assert quoted in str(caught.value)
        assert caught.value.hint
        assert "Ignore import error" not in caught.value.message


def test_scheduler_traceback_names_the_rank_not_the_sigquit(local_host: Host, tmp_path: Any) -> None:
    with (
        launch(
            local_host,
            _spec(**{"--sim-fault": "scheduler-traceback", "--sim-fault-rank": 3}),
            log_dir=str(tmp_path),
        ) as server,
        pytest.raises(ServerDied) as caught,
    ):
        server.wait_ready(timeout_s=60)
    assert "TP3" in caught.value.message
    assert "Received sigquit" not in caught.value.message.splitlines()[0]


def test_real_port_conflict_is_reported(local_host: Host, tmp_path: Any) -> None:
    with launch(local_host, _spec(**{"--sim-fault": "port-in-use"}), log_dir=str(tmp_path)) as server:
        with pytest.raises(ServerDied) as caught:
            server.wait_ready(timeout_s=60)
        assert "address already in use" in str(caught.value)


def test_silent_hang_raises_server_hung(any_host: Host, tmp_path: Any) -> None:
    with launch(any_host, _spec(**{"--sim-fault": "hang"}), log_dir=str(tmp_path)) as server:
        with pytest.raises(ServerHung) as caught:
            server.wait_ready(timeout_s=60, hang_after_s=2.0)
        assert server.is_alive()  # hung, not dead: the caller decides to stop it
        assert "no log output" in caught.value.message


def test_slow_start_times_out_with_the_phases_reached(local_host: Host, tmp_path: Any) -> None:
    with (
        launch(
            local_host,
            _spec(**{"--sim-fault": "slow-start", "--sim-slow-start-s": 30}),
            log_dir=str(tmp_path),
        ) as server,
        pytest.raises(ReadinessTimeout) as caught,
    ):
        server.wait_ready(timeout_s=3, hang_after_s=60)
    assert "not ready within 3 s" in caught.value.message


def test_process_killed_without_a_word_is_known_dead(any_host: Host, tmp_path: Any) -> None:
    with launch(any_host, _spec(**{"--sim-startup-s": 20}), log_dir=str(tmp_path)) as server:
        time.sleep(0.5)
        any_host.run(f"kill -9 -- -{server.pid}", check=False)
        started = time.monotonic()
        with pytest.raises(ServerDied) as caught:
            server.wait_ready(timeout_s=60)
        assert time.monotonic() - started < 5
        assert "exited" in caught.value.message
