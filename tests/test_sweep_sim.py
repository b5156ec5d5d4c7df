"""Sweeps of the simulator over the loopback sshd: runs, journal steps, failures, and no process left behind."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import sim_process as testing  # noqa: E402

from toolkit.benchmark import BenchResult, Load
from toolkit.errors import ServerDied
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.moves import sweep
from toolkit.moves.plan import Plan
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec
from toolkit.views import plots as tk_plots

pytestmark = [pytest.mark.ssh, pytest.mark.timeout(90)]
BENCH = Load(num_prompts=4, input_len=8, output_len=24, max_concurrency=1)
EAGLE = {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2, "--speculative-eagle-topk": 1,
         "--speculative-num-draft-tokens": 3}


def _base(port: int) -> ServerSpec:
    return ServerSpec.simulator(tp=2, port=port, host="127.0.0.1", python=sys.executable, sim_startup_s=0.3,
                                sim_warmup_s=0.05)


def _assert_nothing_left(host: Host, port: int, pids: list[int]) -> None:
    for pid in pids:
        assert not host.is_alive(int(pid)), f"server pid {pid} is still running"
        assert all(p.error and "does not exist" in p.error for p in host.process_tree(int(pid)))
    ps = host.run("ps -eo pid=,args=").stdout
    assert not [line for line in ps.splitlines() if "toolkit.sim" in line and re.search(rf"--port {port}\b", line)]


def test_attention_mode_sweep_over_ssh_records_every_step_and_plots(ssh_host: Host, tmp_path: Path) -> None:
    port = testing.free_port()
    eagle = _base(port).with_flags(EAGLE)
    journal = Journal(tmp_path / "sweep.sqlite", investigation="attention mode")

    result = sweep(ssh_host, eagle, vary={"--speculative-attention-mode": ["prefill", "decode"]},
                   kind="attention_mode", hypothesis="extend-mode verify is the bottleneck",
                   plan=Plan(bench=BENCH, journal=journal, log_dir=str(tmp_path), progress=True))

    frame = result.frame
    assert list(frame["label"]) == ["prefill", "decode"]
    assert list(frame["--speculative-attention-mode"]) == ["prefill", "decode"]
    assert list(frame["status"]) == ["ok", "ok"] and not result.failures
    prefill, decode = frame["output_throughput"]
    assert decode > 1.5 * prefill  # the calibrated simulator: ~124 vs ~60 tok/s in steady state
    assert (frame["completed"] == 4).all() and (frame["accept_length"] > 1.5).all()
    assert (frame["time_to_ready_s"] > 0).all() and (frame["metric_lines"] > 0).all()
    print(f"\nsweep over ssh: prefill {prefill:.1f} tok/s, decode {decode:.1f} tok/s")

    phases = result.phases  # where each launch's time went: one row per launch, the phases within its total
    assert phases is not None and list(phases["combination"]) == [0, 1] and set(phases["host"]) == {ssh_host.name}
    seconds = phases[[f"{name}_s" for name in ("launch", "ready", "bench", "log", "journal", "stop")]]
    assert (seconds > 0).all().all(), phases.to_string()
    assert (seconds.sum(axis=1) <= phases["total_s"] + 1e-6).all()

    steps = journal.steps()
    assert list(steps["title"]) == ["--speculative-attention-mode=prefill", "--speculative-attention-mode=decode"]
    assert list(steps["status"]) == ["done", "done"] and list(steps["kind"]) == ["attention_mode"] * 2
    assert steps["ready"].all() and list(steps["hosts"]) == [ssh_host.name] * 2
    assert all(v.get("simulator") == "toolkit.sim" and v.get("sglang") for v in steps["versions"])
    runs = journal.results(wide=True)
    assert list(runs["flag:--speculative-attention-mode"]) == ["prefill", "decode"]
    assert list(runs["output_throughput"]) == pytest.approx([prefill, decode])
    metric_lines = journal.metric_lines()
    assert set(metric_lines["run_id"]) == set(runs["run_id"])
    assert "accept_len" in metric_lines.columns or "accept_length" in metric_lines.columns
    lines = journal.log_lines()
    benign = lines[lines["verdict"] == "benign"]
    assert benign["text"].str.contains("Ignore import error when loading sglang.srt.models.glmasr").any()
    # issue 23: each run's evidence also holds the line that made the server ready (benchmark/log_evidence.py)
    assert set(lines["verdict"]) == {"benign", "ready"}
    ready = lines[lines["verdict"] == "ready"]
    assert set(ready["step_id"]) == set(steps["step_id"]), ready

    png = tmp_path / "sweep.png"
    tk_plots.sweep(result).savefig(png, dpi=72)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 3_000
    assert "decode" in repr(result) and "2 ran, 0 failed" in repr(result)
    _assert_nothing_left(ssh_host, port, list(frame["server_pid"]))


def test_a_failing_combination_is_recorded_with_evidence_and_the_sweep_goes_on(
    ssh_host: Host, tmp_path: Path
) -> None:
    port = testing.free_port()
    journal = Journal(tmp_path / "faults.sqlite", investigation="faults")
    vary = {"--sim-fault": [None, "oom", "crash-while-serving"]}

    # The crash cuts the 4th generation request: 1-2 readiness probes and the warm-up come first.
    base = _base(port).with_flags({"--sim-crash-after-requests": 3})
    result = sweep(ssh_host, base, vary=vary,
                   plan=Plan(bench=BENCH, journal=journal, log_dir=str(tmp_path), progress=False))

    frame = result.frame
    assert list(frame["label"]) == ["(absent)", "oom", "crash-while-serving", "crash-while-serving"]
    assert list(frame["status"])[:2] == ["ok", "failed"] and frame["status"].iloc[3] == "failed"
    baseline = frame["output_throughput"].iloc[0]
    print(f"\nbaseline over ssh: {baseline:.1f} tok/s")
    assert baseline > 40
    oom, crash = result.failures
    assert isinstance(oom.error, ServerDied) and oom.runs_done == 0
    assert isinstance(crash.error, ServerDied) and "during the benchmark" in crash.message and crash.runs_done == 1
    assert frame["failed"].iloc[2] > 0 and frame["run_id"].iloc[2] is not None  # the cut run is recorded

    steps = journal.steps()
    assert list(steps["status"]) == ["done", "failed", "failed"]
    assert list(steps["title"]) == ["without --sim-fault", "--sim-fault=oom", "--sim-fault=crash-while-serving"]
    failed = steps.iloc[1]
    assert not failed["ready"] and failed["readiness"]["failure"]["kind"] in ("fatal", "died")
    assert "ServerDied" in failed["error"] and failed["evidence"]["type"] == "ServerDied"
    lines = journal.log_lines(int(failed["step_id"]))  # read to the end of the log, whatever wait_ready saw
    fatal = lines[lines["verdict"] == "fatal"]
    assert fatal["text"].str.contains("CUDA out of memory").any() and lines["verdict"].eq("benign").any()
    assert list(journal.results(wide=True)["step_id"]) == [steps["step_id"].iloc[0], steps["step_id"].iloc[2]]
    assert "FAILED --sim-fault=oom" in repr(result)
    _assert_nothing_left(ssh_host, port, [int(p) for p in frame["server_pid"].dropna()])


def test_on_failure_stop_records_the_failure_then_reraises(ssh_host: Host, tmp_path: Path) -> None:
    port = testing.free_port()
    journal = Journal(tmp_path / "stop.sqlite", investigation="stop")
    broken, fine = _base(port).with_flags({"--sim-fault": "oom"}), _base(port)

    with pytest.raises(ServerDied) as raised:
        sweep(ssh_host, fine, specs=[broken, fine], on_failure="stop",
              plan=Plan(bench=BENCH, journal=journal, log_dir=str(tmp_path), progress=False))

    assert any("on_failure='record' would record it" in note for note in raised.value.__notes__)
    steps = journal.steps()
    assert list(steps["status"]) == ["failed"] and list(steps["title"]) == ["--sim-fault=oom"]
    assert journal.log_lines()["text"].str.contains("CUDA out of memory").any()
    assert journal.results().empty
    _assert_nothing_left(ssh_host, port, [])


def test_ctrl_c_stops_the_server_marks_the_step_interrupted_and_propagates(ssh_host: Host, tmp_path: Path) -> None:
    port = testing.free_port()
    journal = Journal(tmp_path / "ctrl-c.sqlite", investigation="ctrl-c")
    pids: list[int] = []

    def interrupted_bench(server: Server) -> BenchResult:
        pids.append(server.pid)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as raised:
        sweep(ssh_host, _base(port), vary={"--sim-seed": [1, 2]},
              plan=Plan(bench=interrupted_bench, journal=journal, log_dir=str(tmp_path), progress=False))

    assert any("interrupted at combination 1 of 2 (--sim-seed=1)" in note for note in raised.value.__notes__)
    assert list(journal.steps()["status"]) == ["interrupted"] and len(pids) == 1
    _assert_nothing_left(ssh_host, port, pids)
