"""The public API of the log and readiness modules is deliberate: pinned here; the examples run."""

from __future__ import annotations

import doctest
import importlib

import pytest

import toolkit.logs
import toolkit.logs.classify
import toolkit.logs.line
import toolkit.logs.metric_lines
import toolkit.logs.packs
import toolkit.logs.rules
import toolkit.logs.summary
import toolkit.server.readiness


def test_logs_public_api() -> None:
    assert sorted(toolkit.logs.__all__) == sorted(
        [
            "Verdict",
            "Phase",
            "Rule",
            "RulePack",
            "LogEvent",
            "MetricRow",
            "LogClassifier",
            "LogSummary",
            "ParsedLine",
            "classify_lines",
            "classify_file_bytes",
            "classify_chunks",
            "SummaryBuilder",
            "summarize",
            "decisive_fatal",
            "parse_line",
            "parse_metric",
            "strip_ansi",
            "detect_engine",
            "log_engine",
            "add_rule",
            "Hints",
            "COMMON",
            "GENERIC",
            "SGLANG",
            "VLLM",
            "PACKS",
            "ENGINES",
            "METRIC_KINDS",
            "is_toolkit_request",
            "is_probe_completion",
            "after_stop",
            "TOOLKIT_REQUESTS",
        ]
    )
    for name in toolkit.logs.__all__:
        assert hasattr(toolkit.logs, name), name


def test_readiness_public_api() -> None:
    assert sorted(toolkit.server.readiness.__all__) == sorted(
        ["ReadinessState", "ProbeResult", "PhaseMark", "Failure", "ReadinessReport", "ReadinessTracker"]
    )


@pytest.mark.parametrize(
    "module",
    [
        "toolkit.logs",
        "toolkit.logs.line",
        "toolkit.logs.rules",
        "toolkit.logs.packs",
        "toolkit.logs.metric_lines",
        "toolkit.logs.classify",
        "toolkit.logs.summary",
        "toolkit.server.readiness",
    ],
)
def test_docstring_examples_run(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0


def test_pure_modules_do_no_io() -> None:
    """The pure core imports no I/O library and opens nothing (STYLE: pure core, thin shell)."""
    from pathlib import Path

    for module in (
        toolkit.logs.classify,
        toolkit.logs.line,
        toolkit.logs.rules,
        toolkit.logs.packs,
        toolkit.logs.metric_lines,
        toolkit.logs.summary,
        toolkit.server.readiness,
    ):
        text = Path(module.__file__ or "").read_text(encoding="utf-8")
        for forbidden in (
            "import fabric",
            "import paramiko",
            "import aiohttp",
            "import ipywidgets",
            "import sqlite3",
            "import socket",
            "import subprocess",
            "open(",
            "import time",
        ):
            assert forbidden not in text, (module.__name__, forbidden)
