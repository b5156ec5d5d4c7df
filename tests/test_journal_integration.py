"""The journal against the real producers: ServerSpec, and a real vLLM log classified by toolkit.logs."""

from __future__ import annotations

from pathlib import Path

import pytest
from journal_data import bench_result

from toolkit.journal import Journal
from toolkit.logs import classify_lines
from toolkit.server.spec import ServerSpec

REAL_LOG = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "real-logs"
    / "058_vllm-eagle-spec-full-startup-metrics.log"
)
SECRET = "hf_Zq8xP2mK9vL4tR7wY1nB5cD3fG6hJ0sA"


def test_a_real_server_spec_is_stored_flattened_and_redacted(tmp_path: Path) -> None:
    base = ServerSpec.sglang("moonshotai/Kimi-K2.5", tp=8, port=8000)
    spec = base.with_flags({"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2}).with_env(
        {"HF_TOKEN": SECRET, "NCCL_ALGO": "Ring"}
    )
    journal = Journal(tmp_path / "j.sqlite")
    with journal.step("flag_change", spec=spec) as step:
        step.record(bench_result(60.1))
    row = journal.results(wide=True).iloc[0]
    assert row["flag:--speculative-algorithm"] == "EAGLE3" and row["flag:--tp-size"] == "8"
    assert row["env:NCCL_ALGO"] == "Ring" and row["env:HF_TOKEN"] == "[REDACTED]"
    step_row = journal.steps().iloc[0]
    assert SECRET not in step_row["command"] and "--speculative-num-steps 2" in step_row["command"]
    assert SECRET[:10] not in step_row["label"]  # describe() clips env values; the clipped prefix too
    journal.close()
    for file in tmp_path.iterdir():
        assert SECRET.encode() not in file.read_bytes()


@pytest.mark.skipif(not REAL_LOG.is_file(), reason=f"{REAL_LOG} is not on this machine")
def test_real_log_events_and_metric_rows_are_recorded(tmp_path: Path) -> None:
    events = classify_lines(REAL_LOG.read_text(errors="replace").splitlines(), engine="vllm")
    metric_rows = [e.metric for e in events if e.metric is not None]
    decisive = [e for e in events if e.verdict.value in ("ready", "fatal", "benign")]
    assert metric_rows and decisive
    journal = Journal(tmp_path / "j.sqlite")
    with journal.step("baseline", "vLLM EAGLE") as step:
        assert step.record_metrics(metric_rows) == len(metric_rows)
        assert step.record_log_lines(decisive) == len(decisive)
    metrics = journal.metric_lines()
    assert len(metrics) == len(metric_rows) and "gen_throughput" in metrics.columns
    assert metrics["gen_throughput"].notna().any() and (metrics["t_s"].dropna() >= 0).all()
    stored = journal.log_lines()
    assert stored["verdict"].tolist() == [e.verdict.value for e in decisive]
    assert stored["line_no"].tolist() == [e.line_no for e in decisive]
