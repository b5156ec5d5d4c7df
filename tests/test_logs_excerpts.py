"""Small log excerpts reconstructed from issue 24's descriptions of public logs the classifier got wrong
(tests/data/excerpts, each marked so in its label's `source`): the structure of a traceback under any prefix,
with or without its header, its exception line or Python frames; the runtime's crash words in their bare forms;
the engines' phrasings the packs lacked. Each is held like a corpus log (state, first fatal line, ready line,
no labelled benign line fatal), and read the same through the fast lane."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolkit.logs import LogClassifier, Verdict, classify_file_bytes, classify_lines, summarize

EXCERPTS = Path(__file__).resolve().parent / "data" / "excerpts"
LABELS: list[dict[str, Any]] = json.loads((EXCERPTS / "labels.json").read_text())


def _lines(name: str) -> list[str]:
    return (EXCERPTS / name).read_text().splitlines()


def test_every_excerpt_is_labelled_and_marked_reconstructed() -> None:
    assert sorted(e["file"] for e in LABELS) == sorted(p.name for p in EXCERPTS.glob("*.log"))
    assert all(e["source"].startswith("this project: reconstructed") for e in LABELS)


@pytest.mark.parametrize("entry", LABELS, ids=[e["file"] for e in LABELS])
def test_excerpt_is_read_right(entry: dict[str, Any]) -> None:
    summary = classify_file_bytes((EXCERPTS / entry["file"]).read_bytes())
    assert summary.state == entry["expected_state"], (summary.fatal_line, summary.fatal_reason)
    fair = set(entry["acceptable_fatal_lines"]) if entry["first_fatal_line"] is not None else {None}
    assert summary.fatal_line in fair, (summary.fatal_line, summary.fatal_reason)
    assert summary.ready_line == entry["ready_line"]
    events = classify_lines(_lines(entry["file"]))
    assert summarize(events) == summary  # the fast lane and the full reading agree
    assert [e.line_no for e in events if e.verdict is Verdict.FATAL and e.line_no in entry["benign_error_lines"]] == []


def test_a_frame_line_opens_a_traceback_but_a_faulthandler_dump_does_not() -> None:
    frame = '  File "/x/model_agent.py", line 512, in _tp_build_model'
    assert summarize(classify_lines([frame])).fatal_rule == "traceback_ends_log"
    assert summarize(classify_lines(["[rank3]:" + frame])).fatal_rule == "engine_traceback_incomplete"  # a rank's
    # near misses: faulthandler's stack dump (no comma before `in`) and a source line quoting a path
    dump = ['Thread 0x00007f3b (most recent call first):', '  File "/x/scheduler.py", line 98 in event_loop']
    assert summarize(classify_lines(dump)).state == "starting"
    quoted = ['    open("File \\"x\\", line 3, in f")']
    assert summarize(classify_lines(quoted)).state == "starting"


def test_bare_frames_interrupted_by_another_line_state_nothing_yet() -> None:
    """A terminal that wraps a long frame line breaks the frames; only the end of the log decides."""
    wrapped = ['(EngineCore pid=3)   File "/x/vllm/v1/core/kv_cache_utils.py", line 758, in _chec',
               "k_enough_kv_cache_memory", "(EngineCore pid=3)     raise ValueError(",
               "(EngineCore pid=3) ValueError: To serve at least one request with the model's max seq len (100000)"]
    assert summarize(classify_lines(wrapped)).fatal_line == 4


def test_an_engine_traceback_after_ready_is_a_death_only_when_nothing_follows() -> None:
    entry = next(e for e in LABELS if e["file"].startswith("14_"))
    lines = _lines(entry["file"])
    assert summarize(classify_lines(lines)).fatal_rule == "traceback_ends_log"
    # near misses: the engine writes on; something fatal follows and says it first; the live follower's quiet flush
    on = [*lines, "(EngineCore pid=2210) INFO 03-06 11:09:58 [core.py:700] still here"]
    assert summarize(classify_lines(on)).state == "ready"
    dead = [*lines, "(APIServer pid=2001) ERROR 03-06 11:10:00 [async_llm.py:480] EngineDeadError: EngineCore encountered an issue."]
    assert summarize(classify_lines(dead)).fatal_line == 7
    live = LogClassifier()
    events = [e for line in lines for e in live.feed(line)] + live.finish()
    assert summarize(events).state == "ready"


def test_llamacpp_json_lines_speak_like_its_text_lines() -> None:
    loaded = '{"function":"main","level":"INFO","line":2890,"msg":"model loaded","tid":"1","timestamp":1710000000}'
    assert summarize(classify_lines([loaded])).ready_line == 1
    # near miss: a JSON line about loading is no readiness
    loading = '{"function":"main","level":"INFO","line":2850,"msg":"loading model","tid":"1","timestamp":1710000000}'
    assert summarize(classify_lines([loading])).ready_line is None
