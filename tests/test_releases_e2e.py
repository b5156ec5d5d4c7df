"""Issue 13's "done when", on real processes: the simulator at named releases, wait_ready, bench, the journal.

- at its default release (SGLang 0.5.23) the user's ``NCCL_CUMEM_ENABLE=1`` reaches every worker
  unchanged, at 0.4.10 it is overridden (test_sim_server.py and test_envcheck_driver.py check the
  /proc side; here the env check of a launched server names the release and source line);
- a vLLM-personality simulator started with ``--api-key`` becomes ready through ``wait_ready``;
- an engine whose worker dies after start and answers 503 with a reason is reported dead within 5 s
  of the death, with the reason quoted;
- the same error answer, repeated, is a failure within seconds, not a timeout.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from sim_process import free_port

import toolkit as tk
from toolkit.errors import ServerDied
from toolkit.host.host import Host
from toolkit.moves.envcheck import env_report
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec

pytestmark = pytest.mark.timeout(240)


def _written_at(timing_file: Path, text: str) -> float:
    """When the simulator wrote the first line containing ``text`` (TOOLKIT_SIM_TIMING_FILE)."""
    for line in timing_file.read_text(encoding="utf-8").splitlines():
        stamp, _, written = line.partition("\t")
        if text in written:
            return float(stamp)
    raise AssertionError(f"{text!r} was never written")


def test_a_worker_that_dies_after_start_is_reported_dead_within_seconds_with_its_reason(
        local_host: Host, tmp_path: Path) -> None:
    timing = tmp_path / "timing.tsv"
    spec = ServerSpec.simulator("transformers", model="tiny", port=free_port(), host="127.0.0.1").with_flags(
        {"--continuous-batching": True, "--sim-fault": "worker-dead-after-start", "--sim-startup-s": 0.5}
    ).with_env({"TOOLKIT_SIM_TIMING_FILE": str(timing)})
    with launch(local_host, spec, log_dir=str(tmp_path)) as server:
        with pytest.raises(ServerDied) as info:
            server.wait_ready(timeout_s=120)
        raised_at = time.time()
        status = server.status()
    died_at = _written_at(timing, "Error in generation loop")
    assert raised_at - died_at < 5.0, f"reported {raised_at - died_at:.1f} s after the worker died"
    text = str(info.value)
    assert '"reason": "cb_worker_dead"' in text and "CB worker is dead and cannot accept request" in text
    assert status.lifecycle == "failed" and status.error is not None
    assert any("cb_worker_dead" in line for line in status.error.evidence) or "generation loop" in status.error.message


def test_vllm_with_an_api_key_becomes_ready_and_bench_sends_the_key(local_host: Host, tmp_path: Path) -> None:
    key = "sk-sim-" + "k3y" * 6
    spec = ServerSpec.simulator("vllm", tp=1, port=free_port(), host="127.0.0.1", api_key=key, sim_startup_s=0.5)
    with tk.Journal(tmp_path / "j.sqlite") as journal, launch(local_host, spec, log_dir=str(tmp_path)) as server:
        report = server.wait_ready(timeout_s=120)
        assert report.ready and "POST /v1/completions" in (report.ready_reason or "")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{server.url}/v1/models", timeout=10)
        assert refused.value.code == 401 and refused.value.read() == b'{"error": "Unauthorized"}'
        with journal.step("baseline", "keyed vLLM", spec=spec, host=local_host) as step:
            result = tk.bench(server, tk.Load(num_prompts=2, max_concurrency=1, input_len=8, output_len=4),
                              progress=False)
            step.record(result)
        assert result.summary["completed"] == 2
        assert server.release().version == "0.33.0"
    stored = (tmp_path / "j.sqlite").read_bytes()
    assert key.encode() not in stored  # the key travels with the requests, never into the journal
    with sqlite3.connect(tmp_path / "j.sqlite") as db:
        assert db.execute("select count(*) from steps").fetchone()[0] == 1


def test_the_same_error_answer_repeated_fails_within_seconds(local_host: Host, tmp_path: Path) -> None:
    """A plain command the toolkit knows nothing about, guarded by a key it was not given: 401 again and again."""
    port = free_port()
    spec = ServerSpec.command([sys.executable, "-m", "toolkit.sim", "--engine", "vllm", "m", "--port", str(port),
                               "--host", "127.0.0.1", "--api-key", "hidden-key-1234", "--sim-startup-s", "0.3"],
                              port=port)
    with launch(local_host, spec, log_dir=str(tmp_path)) as server:
        started = time.time()
        with pytest.raises(ServerDied) as info:
            server.wait_ready(timeout_s=120)
        took = time.time() - started
    assert "answered 401" in str(info.value) and '{"error": "Unauthorized"}' in str(info.value)
    assert "API key" in (info.value.hint or "") and took < 60


def test_the_env_check_names_the_release_that_wrote_a_variable(local_host: Host, tmp_path: Path) -> None:
    exported = {"NCCL_CUMEM_ENABLE": "1", "NCCL_DEBUG": "INFO"}
    for release, expected in (("0.5.23", "ok"), ("0.4.10", "overridden")):
        spec = ServerSpec.simulator(tp=2, port=free_port(), host="127.0.0.1", sim_startup_s=0.5,
                                    sim_engine_version=release).with_env(exported)
        with launch(local_host, spec, log_dir=str(tmp_path)) as server:
            server.wait_ready(timeout_s=120)
            report = env_report(server, exported)
        workers = report.frame[(report.frame["role"] == "worker") & (report.frame["variable"] == "NCCL_CUMEM_ENABLE")]
        assert set(workers["status"]) == {expected}, (release, str(report))
        assert report.nccl is not None
        echoed = report.nccl[report.nccl["variable"] == "NCCL_CUMEM_ENABLE"]
        assert set(echoed["status"]) == {expected}
        if expected == "overridden":
            assert workers["reason"].iloc[0].startswith("SGLang 0.4.10 writes NCCL_CUMEM_ENABLE='0'")
            assert "engine.py:626" in workers["reason"].iloc[0]
    assert os.environ.get("NCCL_CUMEM_ENABLE") != "0"  # nothing leaked into the test's own environment
