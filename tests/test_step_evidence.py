"""The README's notebook pattern stores the step's evidence and provenance (issue 23, items 5 and 6).

``with journal.step(...) as step, tk.launch(host, spec) as server: step.record(server.wait_ready(...));
step.record(tk.bench(server, ...))`` stored 0 log lines, 0 metric lines and no engine release on the
first real vLLM run. Here the same pattern runs against the simulator, and the journal is reopened
from its file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_process import free_port

import toolkit as tk


@pytest.mark.parametrize(("engine", "release"), [("sglang", "0.5.23"), ("vllm", "0.25.0")])
def test_the_readme_pattern_stores_log_lines_metric_lines_and_the_release(
        local_host: tk.Host, tmp_path: Path, engine: str, release: str) -> None:
    path = tmp_path / "readme.sqlite"
    journal = tk.Journal(path, investigation="readme pattern")
    spec = tk.ServerSpec.simulator(engine, tp=2, port=free_port(), host="127.0.0.1", sim_startup_s=0.5,
                                   sim_warmup_s=0.2, sim_engine_version=release)
    spec = spec.with_env({"VLLM_LOG_STATS_INTERVAL": "0.5"})  # vLLM's throughput line every 0.5 s, not 10
    with journal.step("baseline", spec=spec, host=local_host.name) as step, \
            tk.launch(local_host, spec, log_dir=str(tmp_path)) as server:
        step.record(server.wait_ready(timeout_s=60))
        step.record(tk.bench(server, tk.Load(num_prompts=24, max_concurrency=4, input_len=64, output_len=48),
                             progress=False))
    again = tk.Journal(path, resume=True)
    [row] = again.steps().to_dict("records")
    assert row["versions"][engine] == release and row["versions"][f"{engine}_release_read_by"] == "--version"
    assert len(again.metric_lines(step_id=row["step_id"])) > 0
    lines = again.log_lines(step_id=row["step_id"])
    assert len(lines) > 0 and "ready" in set(lines["verdict"]) and set(lines["verdict"]) <= {"ready", "benign", "fatal"}
    assert lines["line_no"].is_unique  # the readiness report's lines and the bench's are stored once
    markdown = tk.report.write(again, tmp_path / "report").markdown.read_text()
    assert f"Engine: {engine} {release} (release read by --version)." in markdown
