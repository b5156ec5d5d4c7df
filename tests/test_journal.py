"""The journal on real SQLite files with the toolkit's own types: steps, runs, failures, read-back frames."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from journal_data import GLMASR, READY, bench_result, decode_line, events, metric_rows, readiness, repeated

from toolkit.errors import JournalError, ServerDied
from toolkit.host.group import HostGroup
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.server.naming import SWITCH
from toolkit.server.spec import ServerSpec
from toolkit.stats import mean_interval

ROOT = Path(__file__).resolve().parents[1]

BASE = ServerSpec.sglang("m", tp=8, port=8000)
EAGLE = BASE.with_flags(
    {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2, "--enable-torch-compile": True}
).with_env(NCCL_ALGO="Ring")


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with Journal(tmp_path / "j.sqlite", investigation="EAGLE-3 regression") as journal:
        yield journal


def test_a_step_records_runs_readiness_metrics_logs_and_verdict(journal: Journal) -> None:
    benign, metric = events(GLMASR, decode_line(81.0, 2.4, 7))
    result = bench_result(82.5)
    with journal.step(
        "baseline", hypothesis="82 tok/s", spec=BASE, host="gpu-a", versions={"sglang": "0.5.9"}
    ) as s:
        assert s.record(readiness(GLMASR, READY)) is None
        run_id = s.record(result, run_label="baseline")
        assert s.record_metrics(metric_rows([decode_line(81.0, 2.4, 7)])) == 1
        s.record_log_lines([benign])
        s.set_verdict("confirmed", note="as expected")
        s.note("first note")
    step = journal.steps().iloc[0]
    assert (step.kind, step.title, step.status, step.verdict, step.verdict_note) == (
        "baseline", BASE.describe(), "done", "confirmed", "as expected")
    assert step.hosts == "gpu-a" and step.versions["sglang"] == "0.5.9" and "toolkit" in step.versions
    assert step.ready and step.time_to_ready_s == 312.5 and step.notes == "first note"
    assert step.readiness["benign"][0]["rule"] == benign.rule == "sglang_ignore_import_error"
    assert step.command == BASE.command() and step.n_runs == 1
    assert step.spec["flags"] == [[name, value] for name, value in BASE.flags]
    requests = journal.requests(run_id)
    assert requests["ttft_ms"].tolist() == pytest.approx(result.requests["ttft_ms"].tolist())
    assert requests["itl_ms"].iloc[0] == pytest.approx([10.0] * 15)  # every gap between the 16 chunks
    assert requests["label"].iloc[0] == "baseline"
    metrics = journal.metric_lines(run_id)
    assert metrics["gen_throughput"].tolist() == [81.0] and metrics["t_s"].tolist() == [0.0]
    assert metrics["kind"].tolist() == [metric.metric.kind] and metrics["rank"].tolist() == ["TP0"]  # type: ignore[union-attr]
    logs = journal.log_lines()
    assert logs[["text", "rank", "verdict", "rule", "line_no"]].iloc[0].tolist() == [
        benign.raw, "TP5", "benign", "sglang_ignore_import_error", 1]


def test_wide_results_are_tidy_with_the_spec_flattened_by_naming(journal: Journal) -> None:
    for spec, tok_s in ((BASE, 82.5), (EAGLE, 60.1)):
        with journal.step("flag_change", spec=spec) as s:
            s.record(bench_result(tok_s), repeat=0)
            s.record(bench_result(tok_s + 0.4), repeat=1)
    results = journal.results(wide=True)
    assert len(results) == 4
    assert results["label"].tolist() == [BASE.describe()] * 2 + [EAGLE.describe()] * 2
    assert results["flag:--speculative-algorithm"].tolist()[2:] == ["EAGLE3", "EAGLE3"]
    assert results["flag:--enable-torch-compile"].tolist()[2:] == [SWITCH, SWITCH]
    assert results["flag:--tp-size"].unique().tolist() == ["8"]
    assert results["env:NCCL_ALGO"].tolist()[2:] == ["Ring", "Ring"]
    assert results["output_throughput"].tolist() == pytest.approx([82.5, 82.9, 60.1, 60.5])
    assert {"step_id", "kind", "title", "verdict", "engine", "commit", "completed"} <= set(results.columns)
    assert str(results["recorded_at"].dtype).startswith("datetime64")


def test_results_lead_with_what_a_person_compares_rounded(journal: Journal) -> None:
    for spec, values, verdict in ((BASE, (82.13, 83.02, 82.61), "confirmed"), (EAGLE, (59.44, 60.87, 61.01), None)):
        with journal.step("flag_change", spec=spec) as s:
            for value in values:
                s.record(bench_result(value, accept_length=None if spec is BASE else 2.41234))
            if verdict:
                s.set_verdict("confirmed")
    with pytest.raises(ServerDied), journal.step("attention_mode", spec=EAGLE.with_flags(attention_mode="decode")) as s:
        s.record(bench_result(91.0))
        raise ServerDied("died", host="gpu-a")
    results = journal.results()
    assert list(results.columns) == ["configuration", "runs", "output tok/s", "± 95% CI", "median TTFT (ms)",
                                     "median ITL (ms)", "accept length (tokens/step)", "verdict", "steps"]
    base, eagle, decode = results.to_dict("records")
    mean, low, high = mean_interval([82.13, 83.02, 82.61])
    assert base["configuration"] == BASE.describe() and base["runs"] == 3 and base["steps"] == "#1"
    assert base["output tok/s"] == round(mean, 1) and base["± 95% CI"] == round((high - low) / 2, 1)
    assert base["median TTFT (ms)"] == 115.0 and base["median ITL (ms)"] == 10.0 and base["verdict"] == "confirmed"
    assert pd.isna(base["accept length (tokens/step)"]) and eagle["accept length (tokens/step)"] == 2.41
    assert eagle["verdict"] == "" and decode["verdict"] == "failed" and pd.isna(decode["± 95% CI"])  # one run


def test_compare_by_step_run_and_label(journal: Journal) -> None:
    ids = []
    for spec, values in ((BASE, (82.1, 83.0, 82.6)), (EAGLE, (59.4, 60.8, 61.0))):
        with journal.step("flag_change", spec=spec) as s:
            for v in values:
                s.record(bench_result(v))
        ids.append(s.id)
    by_step = journal.compare(ids[0], ids[1]).set_index("name")
    assert by_step.loc["flag:--speculative-algorithm", ["section", "a", "b"]].tolist() == ["spec", "(absent)", "EAGLE3"]
    assert by_step.loc["env:NCCL_ALGO", ["a", "b"]].tolist() == ["(absent)", "Ring"]
    assert by_step.loc["flag:--enable-torch-compile", "b"] == SWITCH
    row = by_step.loc["output_throughput"]
    assert row["ratio"] == pytest.approx(60.4 / 82.5667, abs=1e-3) and row["verdict"] == "a_faster"
    assert row["n_a"] == 3 and row["n_b"] == 3
    by_label = journal.compare(BASE.describe(), EAGLE.describe())
    pd.testing.assert_frame_equal(by_label, journal.compare(ids[0], ids[1]))
    one_run = journal.compare("run:1", "run:4").set_index("name")
    assert pd.isna(one_run.loc["output_throughput", "verdict"])  # one run each: noise unknown
    with pytest.raises(ValueError, match="baseline"):
        journal.compare("baseline", "no such thing")


def test_a_failing_step_is_stored_with_evidence_then_reraised(journal: Journal) -> None:
    with pytest.raises(ServerDied), journal.step("attention_mode", "decode verify", spec=EAGLE) as s:
        s.record(bench_result(59.0))
        raise ServerDied(
            "the server exited during start-up",
            host="gpu-a",
            evidence=["[TP3] CUDA error: out of memory"],
            hint="lower --mem-fraction-static",
        )
    step = journal.steps().iloc[0]
    assert step.status == "failed" and step.error.startswith("ServerDied: the server exited")
    assert "raise ServerDied" in step.traceback
    assert step.evidence == {
        "type": "ServerDied",
        "evidence": ["[TP3] CUDA error: out of memory"],
        "hint": "lower --mem-fraction-static",
        "host": "gpu-a",
    }
    assert step.n_runs == 1  # what it had is kept


def test_a_failed_start_keeps_its_readiness_report(journal: Journal) -> None:
    report = readiness(GLMASR, "[2026-02-26 20:26:09 TP3] RuntimeError: CUDA error: out of memory", ready_after_s=None)
    with journal.step("attention_mode", spec=EAGLE) as s:
        s.record(report)
    stored = journal.steps().iloc[0]["readiness"]
    assert stored["ready"] is False and stored["state"] == "failed"
    assert stored["failure"]["rank"] == "TP3" and "out of memory" in stored["failure"]["message"]


def test_ctrl_c_marks_the_step_interrupted(journal: Journal) -> None:
    with pytest.raises(KeyboardInterrupt), journal.step("note", "waiting"):
        raise KeyboardInterrupt
    assert journal.steps()["status"].tolist() == ["interrupted"]


def test_invalid_verdict_lists_the_valid_ones(journal: Journal) -> None:
    with journal.step("baseline") as s, pytest.raises(ValueError, match="confirmed, refuted, inconclusive"):
        s.set_verdict("yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        journal.step("")


def test_notes_root_cause_and_investigations(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    first = Journal(path, investigation="first")
    note_id = first.note("verify in extend mode", "no CUDA graphs in verify")
    first.root_cause("verify ran in extend mode")
    second = Journal(path, investigation="second")
    second.note("other", "x")
    assert first.steps()["step_id"].tolist() == [note_id]
    assert first.steps()[["kind", "status", "notes"]].iloc[0].tolist() == ["note", "done", "no CUDA graphs in verify"]
    listing = Journal(path, read_only=True).investigations()
    assert listing["name"].tolist() == ["first", "second"] and listing["n_steps"].tolist() == [1, 1]
    assert listing["root_cause"].tolist()[0] == "verify ran in extend mode"
    assert Journal(path, resume=True).investigation == "second"  # the latest, when none is named
    assert Journal(path, investigation="first", resume=True).root_cause_text() == "verify ran in extend mode"


def test_a_fresh_process_finds_everything(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    journal = Journal(path, investigation="EAGLE-3 regression")
    with journal.step("baseline", spec=BASE) as s:
        s.record(bench_result(82.5))
        s.set_verdict("confirmed")
    with pytest.raises(RuntimeError), journal.step("flag_change", spec=EAGLE):
        raise RuntimeError("boom")
    journal.root_cause("verify in extend mode")
    journal.close()
    code = textwrap.dedent(f"""
        import json
        from toolkit.journal import Journal
        j = Journal({str(path)!r}, resume=True)
        steps, results = j.steps(), j.results(wide=True)
        print(json.dumps({{"investigation": j.investigation, "status": steps["status"].tolist(),
                          "verdicts": steps["verdict"].fillna("none").tolist(),
                          "tok_s": results["output_throughput"].tolist(), "requests": len(j.requests()),
                          "root_cause": j.root_cause_text(), "error": steps["error"].tolist()[1],
                          "flags": results["flag:--tp-size"].tolist()}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    seen = json.loads(out.stdout.splitlines()[-1])
    assert out.stdout.startswith("Continuing the investigation 'EAGLE-3 regression' (2 steps")
    assert seen == {
        "investigation": "EAGLE-3 regression",
        "status": ["done", "failed"],
        "verdicts": ["confirmed", "none"],
        "tok_s": [pytest.approx(82.5)],
        "requests": 4,
        "root_cause": "verify in extend mode",
        "error": "RuntimeError: boom",
        "flags": ["8"],
    }


def test_record_takes_the_toolkit_types_only(journal: Journal) -> None:
    with journal.step("note") as s:
        with pytest.raises(TypeError, match="BenchResult .* or a ReadinessReport"):
            s.record({"output_throughput": 80.0})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="record_metrics"):
            s.record(object())  # type: ignore[arg-type]


def test_pasted_lines_and_host_names_stay_plain_text(journal: Journal, local_host: Host) -> None:
    with journal.step("baseline", "pasted", host=["gpu-a", local_host]) as s:
        s.record_log_lines(["a line pasted from a terminal", *events(READY)])
        s.set_host(HostGroup([local_host]))
    assert journal.steps()["hosts"].tolist() == ["localhost"]
    logs = journal.log_lines()
    assert logs["text"].tolist() == ["a line pasted from a terminal", READY]
    assert logs["verdict"].tolist() == ["info", "ready"]  # a pasted line is judged as it is recorded
    with journal.step("note", host=["gpu-a", local_host]):
        pass
    assert journal.steps()["hosts"].tolist()[1] == "gpu-a, localhost"


def test_a_stored_spec_rebuilds_as_the_spec(journal: Journal) -> None:
    spec = dataclasses.replace(EAGLE, commit="3eef625b90fa", workdir="/data/eagle3")
    with journal.step("commit", spec=spec):
        pass
    stored = journal.steps().iloc[0]["spec"]
    assert ServerSpec.from_dict(stored) == spec
    assert journal.steps().iloc[0]["commit"] == "3eef625b90fa"


def test_not_a_journal_is_explained(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("this is not sqlite " * 100)
    with pytest.raises(JournalError, match="not a journal"):
        Journal(path)
    assert path.read_text() == "this is not sqlite " * 100


def test_file_is_wal_and_schema_is_versioned(journal: Journal) -> None:
    with sqlite3.connect(journal.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "3"
    conn.close()


def test_repeats_become_runs_and_itl_gaps_come_from_chunk_times(journal: Journal) -> None:
    result = repeated(80.0, 81.0, 82.0, itl_ms=20.0, output_tokens=3)
    with journal.step("baseline", spec=BASE) as s:
        first = s.record(result, run_label="baseline")
    results = journal.results(wide=True)
    assert results["output_throughput"].tolist() == pytest.approx([80.0, 81.0, 82.0])
    assert results["repeat"].tolist() == [0, 1, 2] and results["run_id"].tolist()[0] == first
    gaps = journal.requests(first)["itl_ms"].tolist()
    assert len(gaps) == 4 and all(g == pytest.approx([20.0, 20.0]) for g in gaps)
    assert journal.results()["runs"].tolist() == [3]


def test_public_names_are_pinned() -> None:
    import toolkit.journal
    import toolkit.redaction
    import toolkit.report.postmortem
    import toolkit.stats

    assert set(toolkit.journal.__all__) == {
        "Journal", "StepRecorder", "StepVerdict", "StepStatus", "STEP_KINDS", "SWITCH", "flatten_spec", "SourceRepo",
    }
    assert set(toolkit.report.postmortem.__all__) == {"ReportPaths", "write", "main"}
    assert {"redact", "redact_text", "redact_mapping", "redact_spec_dict"} <= set(toolkit.redaction.__all__)
    assert {"compare_samples", "Comparison"} <= set(toolkit.stats.__all__)
