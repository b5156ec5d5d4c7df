"""Issue 15 against real programs: the simulator on loopback, driven locally and through the loopback sshd.

Profiles are captured through the engines' endpoints and fetched over the host's connection,
runs observe GPUs (the simulator's stand-in for nvidia-smi), /metrics and the prefix cache
through the trial's hook, greedy outputs are compared, and the post-mortem shows all of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sim_process as testing

from toolkit.benchmark import Load
from toolkit.engines import profile_for
from toolkit.errors import ToolkitError
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.moves import compare_flag
from toolkit.moves.observed import ObservedBench
from toolkit.moves.plan import Plan
from toolkit.moves.profile import ProfileCapture, profile, profiles_dir, with_profiling
from toolkit.observe.cache import cache_state, flush_prefix_cache
from toolkit.observe.equivalence import compare_outputs, greedy_outputs
from toolkit.observe.telemetry import GpuTelemetry
from toolkit.observe.torch_profile import compare_profiles, load_profile
from toolkit.report.postmortem import write
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec

pytestmark = [pytest.mark.timeout(180)]
EAGLE = {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2, "--speculative-eagle-topk": 1,
         "--speculative-num-draft-tokens": 3}
BENCH = Load(num_prompts=2, input_len=16, output_len=64, max_concurrency=1)


def _sglang(**flags: object) -> ServerSpec:
    return ServerSpec.simulator(tp=2, port=testing.free_port(), host="127.0.0.1", python=sys.executable,
                                sim_startup_s=0.3, sim_warmup_s=0.05, **flags)


def _vllm(**flags: object) -> ServerSpec:
    return ServerSpec.simulator("vllm", tp=2, port=testing.free_port(), host="127.0.0.1", python=sys.executable,
                                sim_startup_s=0.3, **flags)


@pytest.mark.ssh
def test_prefill_and_decode_verify_profiles_fetched_over_ssh_show_the_verify_leaving_cuda_graphs(
        ssh_host: Host, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "eagle.sqlite", investigation="profiles")
    found = {}
    for mode in ("prefill", "decode"):
        spec = _sglang().with_flags(EAGLE).with_flags({"--speculative-attention-mode": mode})
        with journal.step("attention_mode", f"profile {mode}", spec=spec) as step, \
                launch(ssh_host, spec, log_dir=str(tmp_path)) as server:
            server.wait_ready(timeout_s=60)
            with profile(server, label=f"{mode}-mode verify", journal=journal, step=step,
                         remote_dir=str(tmp_path / "remote")) as capture:
                testing.stream_completion(server.spec.port, 24)
            assert capture.result is not None
            found[mode] = capture.result
    prefill, decode = found["prefill"], found["decode"]
    assert prefill.simulated and decode.simulated
    assert prefill.directory.parent == profiles_dir(journal) and (prefill.directory / "perfetto.html").is_file()
    assert [f.local_name is not None for f in prefill.files] == [True]  # TP-0 only; TP-1's file stays there
    assert prefill.files[0].remote_path.endswith("-TP-0.trace.json.gz")
    where = {label: p.phases().set_index("phase")["where"].to_dict() for label, p in found.items()}
    assert where["prefill"]["verify"] == "eager" and where["decode"]["verify"] == "CUDA graph"
    moved = compare_profiles(prefill, decode)
    verify = moved[moved["phase"] == "verify"].set_index("kernel")["moved"].to_dict()
    assert verify["fused_moe_kernel"] == "into CUDA graph"
    assert verify["flashinfer::BatchPrefillWithPagedKVCacheKernel"] == "only in prefill-mode verify"
    notes = journal.steps()["notes"].tolist()
    assert all(str(n).startswith("profile: eagle.profiles/step-") for n in notes)
    again = load_profile(prefill.directory)  # the post-mortem's way back, from the CSVs beside the traces
    assert again.kernels().equals(prefill.kernels()) and again.simulated
    report = write(journal, tmp_path / "report")
    text = report.markdown.read_text()
    assert "## Profiles: where the GPU time went" in text and "What moved: prefill-mode verify" in text
    assert "| verify | fused_moe_kernel |" in text and "into CUDA graph" in text


def test_num_steps_stops_by_itself_and_a_size_bound_leaves_a_file_on_the_host(local_host: Host, tmp_path: Path) -> None:
    spec = _sglang().with_flags(EAGLE)
    with launch(local_host, spec, log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        with ProfileCapture(server, label="bounded", out_dir=tmp_path / "local", num_steps=4, ranks=(0, 1),
                            max_bytes=1, remote_dir=str(tmp_path / "remote")) as capture:
            testing.stream_completion(server.spec.port, 24)
        result = capture.result
        assert result is not None and all(f.local_name is None for f in result.files) and len(result.files) == 2
        assert all("stays on the host" in str(f.skipped) for f in result.files)
        assert all(Path(f.remote_path).is_file() for f in result.files)
        log = "\n".join(server.log_tail(200))
        assert "Profiling starts. Traces will be saved to:" in log and "Profiling done." in log


def test_vllm_needs_its_profiler_configured_at_launch_and_then_profiles(local_host: Host, tmp_path: Path) -> None:
    with launch(local_host, _vllm(), log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        with pytest.raises(ToolkitError, match="folder set at launch") as refused:
            profile(server, label="x")
        assert "with_profiling" in str(refused.value)
    spec = with_profiling(_vllm(), str(tmp_path / "vllm-traces"), version="0.25.1")
    assert json.loads(str(dict(spec.flags)["--profiler-config"]))["profiler"] == "torch"
    with launch(local_host, spec, log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        with profile(server, label="vllm", out_dir=tmp_path / "local") as capture:
            testing.stream_completion(server.spec.port, 16, model="sim-model")
        assert capture.result is not None and capture.result.files[0].local_name is not None
        assert "_tp0_" in str(capture.result.files[0].local_name) and capture.result.n_kernel_calls > 0


def test_a_vllm_0_25_profile_is_found_under_the_names_that_release_writes(local_host: Host, tmp_path: Path) -> None:
    """Issue 23: real vLLM 0.25.0 wrote rank0.<ns>.pt.trace.json.gz and <host>_<pid>.async_llm.<ns>.pt.trace.json.gz."""
    folder = tmp_path / "vllm-traces"
    spec = with_profiling(_vllm(sim_engine_version="0.25.0"), str(folder), version="0.25.0")
    with launch(local_host, spec, log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        with profile(server, label="vllm 0.25", out_dir=tmp_path / "local", ranks=(0, 1), timeout_s=30) as capture:
            testing.stream_completion(server.spec.port, 16, model="sim-model")
    names = sorted(path.name for path in folder.iterdir())
    assert [n.split(".", 1)[0] for n in names if ".async_llm." not in n] == ["rank0", "rank1"]
    assert sum(".async_llm." in n for n in names) == 1
    assert capture.result is not None and capture.result.n_kernel_calls > 0
    fetched = sorted(str(f.local_name) for f in capture.result.files)
    assert fetched[0].startswith("rank0.") and any(".async_llm." in n for n in fetched)


def test_observed_runs_through_the_trial_record_gpus_metrics_cache_and_outputs(any_host: Host, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "observe.sqlite", investigation="observe")
    base = _sglang(enable_metrics=True)
    with launch(any_host, base, log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        reference = greedy_outputs(server, max_tokens=12, label="baseline")
    assert reference.unit == "token" and all(len(o) == 12 for o in reference.outputs)
    watch = ObservedBench(BENCH, cache="flush", telemetry_interval_ms=200, metrics_interval_s=0.3,
                          reference=reference)
    compare_flag(any_host, base.with_flags(EAGLE), "--speculative-attention-mode", "prefill", "decode",
                 kind="attention_mode",
                 plan=Plan(repeats=1, bench=watch, journal=journal, log_dir=str(tmp_path), progress=False))
    metrics, results = journal.metric_lines(), journal.results(wide=True)
    for run_id in results["run_id"]:
        rows = metrics[metrics["run_id"] == run_id]
        kinds = set(rows["kind"])
        assert {"gpu", "prometheus", "cache", "equivalence"} <= kinds, kinds
        gpu = rows[rows["kind"] == "gpu"]
        assert set(gpu["rank"]) == {"GPU0", "GPU1"} and gpu["simulated"].astype(bool).all()
        assert gpu["gpu_util_pct"].max() > 20  # the stand-in follows the simulated load
        assert cache_state(rows[rows["kind"] == "cache"].iloc[0].to_dict()) == "flushed"
        assert rows[rows["kind"] == "prometheus"]["running_requests"].max() >= 1
        assert bool(rows[rows["kind"] == "equivalence"].iloc[0]["holds"])
    notes = "\n".join(str(n) for n in journal.steps()["notes"])
    assert "GPU telemetry: simulated (toolkit.sim telemetry)" in notes and "cache flushed" in notes
    text = write(journal, tmp_path / "report").markdown.read_text()
    assert "## Every run: cache, GPUs, server metrics, outputs" in text and "flushed (flush)" in text
    assert "gpu_telemetry.png" in text and "server_prometheus.png" in text
    assert "Greedy outputs were identical to the reference in every checked run." in text


def test_without_metrics_flag_or_dev_mode_the_runs_say_what_to_turn_on(local_host: Host, tmp_path: Path) -> None:
    watch = ObservedBench(BENCH, telemetry="off", metrics_interval_s=0.2)
    with launch(local_host, _sglang(), log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        result = watch(server)
        observation = watch.observation(result)
        assert observation is not None and "--enable-metrics" in observation.metrics_note
        assert "not scraped" in observation.metrics_note
        assert '"GET /metrics' not in "\n".join(server.log_tail(400))  # not asked: no 404s of ours in its log
        assert observation.cache is not None and observation.cache.state == "unknown"  # first run, not flushed
        second = watch.observation(watch(server))
        assert second is not None and second.cache is not None and second.cache.state == "warm"
    with launch(local_host, _vllm(), log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        record = flush_prefix_cache(server, profile_for("vllm", "0.25.1"))
        assert record.state == "unknown" and "VLLM_SERVER_DEV_MODE=1" in record.detail
    with launch(local_host, _vllm().with_env({"VLLM_SERVER_DEV_MODE": "1"}), log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        flushed = flush_prefix_cache(server, profile_for("vllm", "0.25.1"))
        assert flushed.state == "flushed" and flushed.detail == "POST /reset_prefix_cache: 200"  # no reply repeated


def test_a_divergence_fault_is_found_and_flagged(local_host: Host, tmp_path: Path) -> None:
    with launch(local_host, _sglang(), log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        reference = greedy_outputs(server, max_tokens=16, label="baseline")
    faulty = _sglang(sim_fault="greedy-divergence").with_flags(EAGLE)
    with launch(local_host, faulty, log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
        result = compare_outputs(reference, greedy_outputs(server, max_tokens=16, label="eagle"))
    assert 0 < result.identical < result.total
    first = result.first_divergence
    assert first is not None and 3 <= int(first.first_divergence or 0) <= 10
    assert f"first divergence at token {first.first_divergence}" in result.summary()


def test_nvidia_smi_missing_on_a_host_is_a_note_not_a_crash(local_host: Host) -> None:
    with GpuTelemetry(local_host, command="nvidia-smi-that-is-not-here --query-gpu=x -lms 100") as gpus:
        pass
    assert gpus.samples() == [] and "gave no samples" in gpus.note


def test_the_telemetry_stand_in_is_a_program_that_prints_nvidia_smi_lines() -> None:
    with testing.SimProcess(["--model-path", "m", "--tp-size", "2", "--sim-startup-s", "0.3"]) as sim:
        sim.wait_for("fired up", 60)
        done = subprocess.run([sys.executable, "-m", "toolkit.sim", "telemetry", "--url",
                               f"http://127.0.0.1:{sim.port}", "--interval-ms", "10", "--count", "2"],
                              capture_output=True, text=True, timeout=60, check=True)
    lines = done.stdout.splitlines()
    assert len(lines) == 4 and all("NVIDIA H200 (simulated by toolkit.sim)" in line for line in lines)
