"""The journal on real SQLite files: steps, runs, failures, read-back frames and a fresh process."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from toolkit.errors import JournalError, ServerDied
from toolkit.journal import Journal

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Spec:
    flags: tuple[tuple[str, str | None], ...]
    env: tuple[tuple[str, str], ...] = (("NCCL_ALGO", "Ring"),)
    commit: str | None = "3eef625"

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": "sglang",
            "launcher": ["python", "-m", "sglang.launch_server"],
            "model": "m",
            "port": 8000,
            "flags": [list(f) for f in self.flags],
            "env": [list(e) for e in self.env],
            "workdir": None,
            "python": None,
            "commit": self.commit,
            "label": None,
            "simulated": True,
        }

    def command(self) -> str:
        return "python -m sglang.launch_server " + " ".join(
            n if v is None else f"{n} {v}" for n, v in self.flags
        )

    def describe(self) -> str:
        algo = dict(self.flags).get("--speculative-algorithm")
        return f"{algo} steps={dict(self.flags)['--speculative-num-steps']}" if algo else "baseline"


@dataclass
class Bench:
    summary: dict[str, Any]
    requests: pd.DataFrame
    workload: dict[str, Any] | None = None


class Verdict(Enum):
    FATAL = "fatal"


@dataclass(frozen=True)
class Event:
    line_no: int
    raw: str
    text: str
    rank: str | None
    verdict: Verdict
    rule: str | None
    timestamp: datetime | None = None


@dataclass(frozen=True)
class Readiness:
    ready: bool
    time_to_ready_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"ready": self.ready, "time_to_ready_s": self.time_to_ready_s, "phases": ["load", "graphs"]}


BASE = Spec((("--tp", "8"),))
EAGLE = Spec(
    (
        ("--tp", "8"),
        ("--speculative-algorithm", "EAGLE3"),
        ("--speculative-num-steps", "2"),
        ("--enable-torch-compile", None),
    )
)


def bench(tok_s: float, n: int = 4) -> Bench:
    requests = pd.DataFrame(
        {
            "ttft_ms": np.linspace(100, 130, n),
            "output_tokens": np.full(n, 128),
            "itl_ms": [np.array([10.0, 11.5]) for _ in range(n)],
            "error": [None] * n,
        }
    )
    summary = {
        "completed": np.int64(n),
        "failed": 0,
        "output_throughput": np.float64(tok_s),
        "median_ttft_ms": 115.0,
        "p99_itl_ms": float("nan"),
    }
    return Bench(summary, requests, workload={"num_prompts": n})


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with Journal(tmp_path / "j.sqlite", investigation="EAGLE-3 regression") as journal:
        yield journal


def test_a_step_records_runs_readiness_metrics_logs_and_verdict(journal: Journal) -> None:
    with journal.step(
        "baseline", hypothesis="82 tok/s", spec=BASE, host="gpu-a", versions={"sglang": "0.5.9"}
    ) as s:
        assert s.record(Readiness(True, 312.5)) is None
        run_id = s.record(bench(82.5), run_label="baseline")
        s.record_metrics(
            [
                {
                    "kind": "decode",
                    "values": {"gen_throughput": 81.0},
                    "timestamp": 1.0e9,
                    "rank": "TP0",
                    "line_no": 7,
                }
            ]
        )
        s.record_log_lines(
            [Event(3, "[TP5] Ignore import error", "Ignore import error", "TP5", Verdict.FATAL, "r1")]
        )
        s.set_verdict("confirmed", note="as expected")
        s.note("first note")
    step = journal.steps().iloc[0]
    assert (step.kind, step.title, step.status, step.verdict, step.verdict_note) == (
        "baseline",
        "baseline",
        "done",
        "confirmed",
        "as expected",
    )
    assert step.hosts == "gpu-a" and step.versions["sglang"] == "0.5.9" and "toolkit" in step.versions
    assert step.ready and step.time_to_ready_s == 312.5 and step.notes == "first note"
    assert step.command.startswith("python -m sglang.launch_server") and step.n_runs == 1
    requests = journal.requests(run_id)
    assert list(requests["ttft_ms"]) == pytest.approx([100, 110, 120, 130])
    assert requests["itl_ms"].iloc[0] == [10.0, 11.5] and requests["label"].iloc[0] == "baseline"
    metrics = journal.metric_lines(run_id)
    assert metrics["gen_throughput"].tolist() == [81.0] and metrics["t_s"].tolist() == [0.0]
    logs = journal.log_lines()
    assert logs[["text", "rank", "verdict", "rule"]].iloc[0].tolist() == [
        "[TP5] Ignore import error",
        "TP5",
        "fatal",
        "r1",
    ]


def test_results_are_tidy_with_flattened_spec(journal: Journal) -> None:
    for spec, tok_s in ((BASE, 82.5), (EAGLE, 60.1)):
        with journal.step("flag_change", spec=spec) as s:
            s.record(bench(tok_s), repeat=0)
            s.record(bench(tok_s + 0.4), repeat=1)
    results = journal.results()
    assert len(results) == 4
    assert results["label"].tolist() == ["baseline", "baseline", "EAGLE3 steps=2", "EAGLE3 steps=2"]
    assert results["flag:--speculative-algorithm"].tolist()[2:] == ["EAGLE3", "EAGLE3"]
    assert results["flag:--enable-torch-compile"].tolist()[2:] == ["on", "on"]
    assert results["env:NCCL_ALGO"].unique().tolist() == ["Ring"]
    assert results["output_throughput"].tolist() == pytest.approx([82.5, 82.9, 60.1, 60.5])
    assert {"step_id", "kind", "title", "verdict", "engine", "commit", "completed"} <= set(results.columns)
    assert str(results["recorded_at"].dtype).startswith("datetime64")


def test_compare_by_step_run_and_label(journal: Journal) -> None:
    ids = []
    for spec, values in ((BASE, (82.1, 83.0, 82.6)), (EAGLE, (59.4, 60.8, 61.0))):
        with journal.step("flag_change", spec=spec) as s:
            for v in values:
                s.record(bench(v))
        ids.append(s.id)
    by_step = journal.compare(ids[0], ids[1]).set_index("name")
    assert by_step.loc["flag:--speculative-algorithm", ["section", "a", "b"]].tolist() == [
        "spec",
        "(absent)",
        "EAGLE3",
    ]
    row = by_step.loc["output_throughput"]
    assert row["ratio"] == pytest.approx(60.4 / 82.5667, abs=1e-3) and row["verdict"] == "a_faster"
    assert row["n_a"] == 3 and row["n_b"] == 3
    by_label = journal.compare("baseline", "EAGLE3 steps=2")
    pd.testing.assert_frame_equal(by_label, journal.compare(ids[0], ids[1]))
    one_run = journal.compare("run:1", "run:4").set_index("name")
    assert pd.isna(one_run.loc["output_throughput", "verdict"])  # one run each: noise unknown
    with pytest.raises(ValueError, match="baseline"):
        journal.compare("baseline", "no such thing")


def test_a_failing_step_is_stored_with_evidence_then_reraised(journal: Journal) -> None:
    with pytest.raises(ServerDied), journal.step("attention_mode", "decode verify", spec=EAGLE) as s:
        s.record(bench(59.0))
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
    assert first.steps()[["kind", "status", "notes"]].iloc[0].tolist() == [
        "note",
        "done",
        "no CUDA graphs in verify",
    ]
    listing = Journal(path).investigations()
    assert listing["name"].tolist() == ["first", "second"] and listing["n_steps"].tolist() == [1, 1]
    assert listing["root_cause"].tolist()[0] == "verify ran in extend mode"
    assert Journal(path).investigation == "second"  # the latest, when none is named


def test_a_fresh_process_finds_everything(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    journal = Journal(path, investigation="EAGLE-3 regression")
    with journal.step("baseline", spec=BASE) as s:
        s.record(bench(82.5))
        s.set_verdict("confirmed")
    with pytest.raises(RuntimeError), journal.step("flag_change", spec=EAGLE):
        raise RuntimeError("boom")
    journal.root_cause("verify in extend mode")
    journal.close()
    code = textwrap.dedent(f"""
        import json
        from toolkit.journal import Journal
        j = Journal({str(path)!r})
        steps, results = j.steps(), j.results()
        print(json.dumps({{"investigation": j.investigation, "status": steps["status"].tolist(),
                          "verdicts": steps["verdict"].fillna("none").tolist(), "tok_s": results["output_throughput"].tolist(),
                          "requests": len(j.requests()), "root_cause": j.root_cause_text(),
                          "error": steps["error"].tolist()[1]}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    seen = json.loads(out.stdout)
    assert seen == {
        "investigation": "EAGLE-3 regression",
        "status": ["done", "failed"],
        "verdicts": ["confirmed", "none"],
        "tok_s": [82.5],
        "requests": 4,
        "root_cause": "verify in extend mode",
        "error": "RuntimeError: boom",
    }


def test_record_rejects_what_it_cannot_store(journal: Journal) -> None:
    with journal.step("note") as s, pytest.raises(TypeError, match="record_metrics"):
        s.record(object())


def test_plain_dicts_are_enough(journal: Journal) -> None:
    with journal.step("baseline", spec=BASE.to_dict()) as s:
        s.record({"output_throughput": 80.0})
        s.record({"summary": {"output_throughput": 81.0}, "requests": [{"ttft_ms": 5.0}]})
        s.record({"ready": False, "time_to_ready_s": None})
        s.record_log_lines(["plain line"])
        s.record_metrics(
            [
                {
                    "kind": "decode",
                    "values": {"accept_len": 2.1},
                    "timestamp": datetime(2026, 2, 26, tzinfo=UTC),
                    "rank": None,
                    "line_no": 1,
                }
            ]
        )
    assert journal.results()["output_throughput"].tolist() == [80.0, 81.0]
    assert journal.steps()["command"].iloc[0] == "NCCL_ALGO=Ring python -m sglang.launch_server --tp 8"


def test_not_a_journal_is_explained(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("this is not sqlite " * 100)
    with pytest.raises(JournalError, match="not a journal"):
        Journal(path)


def test_file_is_wal_and_schema_is_versioned(journal: Journal) -> None:
    with sqlite3.connect(journal.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "1"
    conn.close()


@dataclass(frozen=True)
class Record:
    chunk_times: tuple[float, ...]


@dataclass
class RepeatedBench:
    """Like bench.BenchResult with runs=3: the median summary plus the repeats it came from."""

    summary: dict[str, Any]
    requests: pd.DataFrame
    runs: tuple[Any, ...] = ()
    records: tuple[Record, ...] = ()


def test_repeats_become_runs_and_itl_gaps_come_from_chunk_times(journal: Journal) -> None:
    def one(tok_s: float) -> RepeatedBench:
        frame = pd.DataFrame({"ttft_ms": [50.0, 60.0], "itl_mean_ms": [10.0, 20.0]})
        return RepeatedBench(
            {"output_throughput": tok_s}, frame, records=(Record((1.0, 1.010, 1.020)), Record((2.0, 2.020)))
        )

    repeated = RepeatedBench(
        {"output_throughput": 81.0}, pd.DataFrame(), runs=(one(80.0), one(81.0), one(82.0))
    )
    with journal.step("baseline", spec=BASE) as s:
        first = s.record(repeated, run_label="baseline")
    results = journal.results()
    assert results["output_throughput"].tolist() == [80.0, 81.0, 82.0]
    assert results["repeat"].tolist() == [0, 1, 2] and results["run_id"].tolist()[0] == first
    gaps = journal.requests(first)["itl_ms"].tolist()
    assert gaps[0] == pytest.approx([10.0, 10.0]) and gaps[1] == pytest.approx([20.0])


def test_public_names_are_pinned() -> None:
    import toolkit.journal
    import toolkit.redaction
    import toolkit.report.postmortem
    import toolkit.stats
    import toolkit.views.plots

    assert set(toolkit.journal.__all__) == {
        "Journal",
        "StepRecorder",
        "StepVerdict",
        "StepStatus",
        "STEP_KINDS",
        "SWITCH",
        "flatten_spec",
        "SpecLike",
        "BenchLike",
        "ReadinessLike",
        "MetricRowLike",
        "LogEventLike",
    }
    assert set(toolkit.views.plots.__all__) == {
        "throughput",
        "latency_ecdf",
        "server_metrics",
        "timeline",
        "bisect",
        "env_matrix",
        "metric_label",
        "VERDICT_COLORS",
        "ab",
        "sweep",
        "bisection",
        "env",
        "telemetry",
        "server_metrics_over_time",
        "kernels",
        "profile_phases",
        "profile_comparison",
    }
    assert set(toolkit.report.postmortem.__all__) == {"ReportPaths", "write", "main"}
    assert {"redact", "redact_text", "redact_mapping", "redact_spec_dict"} <= set(toolkit.redaction.__all__)
    assert {"compare_samples", "Comparison"} <= set(toolkit.stats.__all__)
