"""Streaming a log: chunks of any size give the same summary as the whole file; bounded memory (capped rows,
capped lines); empty or binary input refused; the CLI prints one line for expected errors (issue 20)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.cli.logs import main as cli_main
from toolkit.errors import ToolkitError
from toolkit.logs import classify_chunks, classify_file_bytes
from toolkit.logs.stream import iter_lines

REPO = Path(__file__).resolve().parents[1]
CORPUS = sorted((REPO / "tests" / "data" / "logs").glob("*.log"))


def _chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("path", CORPUS[::7], ids=lambda p: p.name)
def test_chunks_of_any_size_give_the_whole_file_summary(path: Path) -> None:
    data = path.read_bytes()
    whole = classify_file_bytes(data)
    for size in (1, 7, 4096):
        assert classify_chunks(_chunked(data, size), max_metrics=None, max_lines=None) == whole, size


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.text(alphabet="ab\né\r", max_size=12), max_size=8), st.integers(min_value=1, max_value=9))
def test_line_splitting_agrees_with_split_on_newline(pieces: list[str], size: int) -> None:
    text = "x" + "".join(pieces)
    expected = text.split("\n")
    if expected[-1] == "":
        expected.pop()
    assert list(iter_lines(_chunked(text.encode(), size), max_line_chars=1000)) == expected


def test_a_line_longer_than_the_cap_is_kept_by_its_ends_and_still_decides() -> None:
    line = "x" * 200_000 + " torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    (kept,) = iter_lines(_chunked(line.encode(), 4096), max_line_chars=1000)
    assert len(kept) < 1100 and kept.startswith("x" * 500) and kept.endswith("Tried to allocate 2.00 GiB")
    summary = classify_chunks(_chunked(line.encode(), 65536))
    assert summary.state == "failed" and summary.fatal_rule == "cuda_oom"
    assert summary.fatal_reason is not None and len(summary.fatal_reason) < 700


def test_the_capped_summary_keeps_the_last_rows_and_counts_them_all() -> None:
    rows = [f"[2026-01-01 00:00:00 TP0] Decode batch. #running-req: {i}, gen throughput (token/s): 1.0, #queue-req: 0"
            for i in range(1, 51)]
    benign = ["[2026-01-01 00:00:00 TP5] Ignore import error when loading sglang.srt.models.glmasr: x"] * 30
    summary = classify_chunks(["\n".join(rows + benign).encode()], max_metrics=5, max_lines=10)
    assert summary.metric_count == 50 and [m.values["running_req"] for m in summary.metrics] == [46, 47, 48, 49, 50]
    assert summary.benign_count == 30 and summary.benign_lines == tuple(range(51, 61))
    full = classify_chunks(["\n".join(rows).encode()], max_metrics=None)
    assert [m.to_dict() for m in full.metrics[-5:]] == [m.to_dict() for m in summary.metrics]


def test_empty_and_binary_input_are_refused_with_the_reason() -> None:
    with pytest.raises(ToolkitError, match="empty"):
        classify_chunks([])
    with pytest.raises(ToolkitError, match="binary"):
        classify_chunks([b"\x7fELF\x02\x01\x01\x00\x00\x00" * 50])


@pytest.mark.parametrize(("content", "words"), [(b"", "is empty"), (b"\x00\x01\x02\x03" * 100, "is binary")])
def test_cli_says_why_in_one_line_and_exits_2(tmp_path: Path, content: bytes, words: str) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(content)
    done = subprocess.run([sys.executable, "-m", "toolkit", "logs", "classify", str(log), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and words in done.stderr and "Traceback" not in done.stderr


def test_cli_on_a_directory_and_a_missing_file_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["classify", str(tmp_path)]) == 2
    assert cli_main(["classify", str(tmp_path / "missing.log")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("error: cannot read ") for line in err)


def test_cli_json_of_a_huge_single_line_is_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "one-line.log"
    log.write_bytes(b"y" * 3_000_000 + b" RuntimeError: CUDA error: an illegal memory access was encountered")
    assert cli_main(["classify", str(log), "--json"]) == 1
    out = capsys.readouterr().out
    assert len(out) < 2000 and json.loads(out)["fatal_rule"] == "cuda_error"


def test_cli_max_metrics_caps_the_rows_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "serving.log"
    line = "(APIServer pid=1) INFO 05-12 08:01:39 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, " \
           "Avg generation throughput: 7.2 tokens/s, Running: 9 reqs, Waiting: 1 reqs, GPU KV cache usage: 68.8%\n"
    log.write_text(line * 40)
    assert cli_main(["classify", str(log), "--json", "--max-metrics", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metric_count"] == 40 and [m["line"] for m in out["metrics"]] == [38, 39, 40]
    assert (out["state"], out["ready_line"], out["ready_evidence"]) == ("ready", 1, "serving lines")
