"""Table-driven tests over real logs: the shared set (../shared/real-logs) and the set collected
from public SGLang and vLLM issues (tests/data/logs, sources in its labels.json).

For every log: the state at the end is right, the first fatal line is found (or an equally fair
one), no line labelled benign is judged fatal, and the metric lines parse to the labelled values.
The seed's wait loop (grep -i 'error|exception|traceback') is replayed on the same logs to show
what it would have done.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from toolkit.logs import LogSummary, Verdict, classify_file_bytes, classify_lines

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "real-logs"
COLLECTED = REPO / "tests" / "data" / "logs"


def _corpus(directory: Path) -> list[dict[str, Any]]:
    labels = directory / "labels.json"
    if not labels.exists():
        return []
    entries: list[dict[str, Any]] = json.loads(labels.read_text())
    for entry in entries:
        entry["_path"] = directory / entry["file"]
    return entries


def _require_shared() -> None:
    if not (SHARED / "labels.json").exists():
        message = f"the shared real logs are missing at {SHARED} (CI lays shared/ beside the repository)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


SHARED_LOGS = _corpus(SHARED)
COLLECTED_LOGS = _corpus(COLLECTED)
ALL_LOGS = [pytest.param(e, id=f"shared/{e['file']}") for e in SHARED_LOGS] + [
    pytest.param(e, id=f"collected/{e['file']}") for e in COLLECTED_LOGS
]


def _lines(path: Path) -> list[str]:
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _summary(entry: dict[str, Any]) -> LogSummary:
    return classify_file_bytes(entry["_path"].read_bytes())


def seed_grep_finds_error(lines: list[str]) -> str | None:
    """The seed's wait loop: ``grep -i 'error\\|exception\\|traceback' LOG | tail -1``; non-empty -> abort."""
    pattern = re.compile(r"error|exception|traceback", re.IGNORECASE)
    hits = [line for line in lines if pattern.search(line)]
    return hits[-1] if hits else None


def test_the_shared_corpus_is_present() -> None:
    _require_shared()
    assert len(SHARED_LOGS) >= 11


def test_the_collected_corpus_is_large_and_cites_its_sources() -> None:
    assert len(COLLECTED_LOGS) >= 367  # 267 before issue 24, + 50 (batch 9) + 50 (batch 10)
    for entry in COLLECTED_LOGS:
        assert entry["source"].startswith(("https://github.com/", "this project: ")), entry["file"]
        assert entry["_path"].exists(), entry["file"]
        assert entry["expected_state"] in ("ready", "failed", "starting")


@pytest.mark.parametrize("entry", ALL_LOGS)
def test_state_at_end_of_log(entry: dict[str, Any]) -> None:
    if entry in SHARED_LOGS:
        _require_shared()
    assert _summary(entry).state == entry["expected_state"]


@pytest.mark.parametrize("entry", ALL_LOGS)
def test_first_fatal_line_is_found(entry: dict[str, Any]) -> None:
    if entry in SHARED_LOGS:
        _require_shared()
    summary = _summary(entry)
    if entry["first_fatal_line"] is None:
        assert summary.fatal_line is None, summary.fatal_reason
    else:
        fair = {entry["first_fatal_line"], *(entry.get("acceptable_fatal_lines") or [])}
        assert summary.fatal_line in fair, (summary.fatal_line, summary.fatal_reason)


@pytest.mark.parametrize("entry", ALL_LOGS)
def test_ready_line_is_found(entry: dict[str, Any]) -> None:
    if entry in SHARED_LOGS:
        _require_shared()
    summary = _summary(entry)
    if entry["expected_state"] == "ready" or entry.get("ready_line"):
        fair = {entry["ready_line"], *(entry.get("acceptable_ready_lines") or [])}
        assert summary.ready_line in fair
    else:
        assert summary.ready_line is None


@pytest.mark.parametrize("entry", ALL_LOGS)
def test_no_benign_line_is_judged_fatal(entry: dict[str, Any]) -> None:
    if entry in SHARED_LOGS:
        _require_shared()
    events = classify_lines(_lines(entry["_path"]))
    benign = set(entry["benign_error_lines"])
    fatal_here = [e.line_no for e in events if e.verdict is Verdict.FATAL and e.line_no in benign]
    assert fatal_here == []


@pytest.mark.parametrize("entry", ALL_LOGS)
def test_metric_lines_match_the_labels(entry: dict[str, Any]) -> None:
    if entry in SHARED_LOGS:
        _require_shared()
    got = {m.line_no: m.to_dict() for m in _summary(entry).metrics}
    assert sorted(got) == [m["line"] for m in entry["metric_lines"]]
    for label in entry["metric_lines"]:
        row = got[label["line"]]
        assert row["kind"] == label["kind"]
        for key, value in label["values"].items():  # every key the label lists, exactly
            assert row["values"][key] == value, (label["line"], key)


def test_required_metric_keys_are_named_exactly() -> None:
    required = {
        "sglang_decode": {"running_req", "queue_req", "gen_throughput"},
        "sglang_prefill": {"running_req", "queue_req", "new_token"},
        "vllm_throughput": {"prompt_throughput", "gen_throughput", "running_reqs"},
        "vllm_specdecode": {"mean_acceptance_length", "accepted_tokens", "drafted_tokens"},
    }
    seen: set[str] = set()
    for entry in SHARED_LOGS + COLLECTED_LOGS:
        if not entry["_path"].exists():
            continue
        for row in _summary(entry).metrics:
            assert required[row.kind] <= set(row.values), (entry["file"], row.line_no)
            seen.add(row.kind)
    assert seen == set(required)


def test_seed_grep_falsely_aborts_healthy_logs_and_the_classifier_does_not() -> None:
    """On logs that are not failed, the seed's grep finds an 'error' (and would abort) on several;
    the classifier reports none of them failed."""
    healthy = [
        e for e in SHARED_LOGS + COLLECTED_LOGS if e["expected_state"] != "failed" and e["_path"].exists()
    ]
    grep_aborts = [e["file"] for e in healthy if seed_grep_finds_error(_lines(e["_path"]))]
    classifier_aborts = [e["file"] for e in healthy if _summary(e).state == "failed"]
    assert len(grep_aborts) >= 5, grep_aborts
    assert classifier_aborts == []


def test_the_seed_grep_helper_reproduces_the_incident() -> None:
    incident = (
        "[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: "
        "cannot import name 'GlmAsrConfig' from 'transformers' (/root/ml-env/lib/python3.12/site-packages/transformers/__init__.py)"
    )
    lines = ["[2026-02-26 20:25:00] server_args=ServerArgs(model_path='kimi')", incident]
    assert seed_grep_finds_error(lines) == incident
    assert classify_file_bytes("\n".join(lines).encode()).state == "starting"
