"""The log follower on real files: from the start, or joined mid-run with the file's own line numbers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from toolkit.host.host import Host
from toolkit.logs.window import LogLedger
from toolkit.server.follow import LogFollower

SERVING = ("[2026-02-26 20:40:01 TP0] Decode batch. #running-req: 1, #token: 512, token usage: 0.01, "
           "cuda graph: True, gen throughput (token/s): {n}.5, #queue-req: 0")


def _wait_for(follower: LogFollower, lines: int) -> None:
    deadline = time.monotonic() + 30
    while follower.stats.lines < lines and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_follower_reads_the_log_from_its_first_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(SERVING.format(n=i) + "\n" for i in range(50)))
    with LogFollower(Host.local(), str(log), engine="sglang") as follower:
        _wait_for(follower, 50)
        events = follower.events()
    assert [e.line_no for e in events] == list(range(1, 51))


def test_joined_mid_run_it_numbers_lines_as_the_file_does(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(SERVING.format(n=i) + "\n" for i in range(1000)))
    with LogFollower(Host.local(), str(log), engine="sglang", backlog_lines=10) as follower:
        _wait_for(follower, 10)
        with log.open("a") as f:
            f.write(SERVING.format(n=1000) + "\n")
        _wait_for(follower, 11)
        events = follower.events()
    assert [e.line_no for e in events] == list(range(991, 1002))
    assert "1000.5" in events[-1].raw
    assert events[0].ready_evidence == "serving lines"  # attached to a server that was already serving


def test_a_negative_backlog_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="backlog_lines must be >= 0"):
        LogFollower(Host.local(), str(tmp_path / "x.log"), backlog_lines=-1)


_ENGINE = "(EngineCore_DP0 pid=2) ERROR 01-04 04:31:09 [core.py:844] "
DIES_IN_SILENCE = [
    "(APIServer pid=1) INFO:     Application startup complete.",
    _ENGINE + "Traceback (most recent call last):",
    _ENGINE + '  File "/opt/vllm/v1/engine/core.py", line 701, in run_engine_core',
    _ENGINE + "    engine_core.run_busy_loop()",
]


@pytest.mark.parametrize("server_died", [False, True])
def test_an_engine_traceback_that_ends_a_dead_servers_log_is_its_death(tmp_path: Path, server_died: bool) -> None:
    """Issue 24: the EngineCore's traceback is cut, the process writes nothing more. A quiet spell leaves it a
    warning (it may still end); once wait_ready knows the server died, the log's last words are the death."""
    log = tmp_path / "server.log"
    log.write_text("".join(line + "\n" for line in DIES_IN_SILENCE))
    with LogFollower(Host.local(), str(log), engine="vllm") as follower:
        _wait_for(follower, len(DIES_IN_SILENCE))
        follower.flush(server_died=server_died)
        fatal = [(e.line_no, e.rule) for e in follower.events() if e.is_fatal]
    assert fatal == ([(2, "traceback_ends_log")] if server_died else [])


def test_a_ledger_keeps_what_the_followers_ring_buffer_dropped(tmp_path: Path) -> None:
    """A long, chatty run: the start-up's benign line and the first run's metric rows leave a small ring buffer,
    never the ledger that heard them (what a journal step stores)."""
    log = tmp_path / "server.log"
    benign = ("[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: cannot import "
              "name 'GlmAsrConfig' from 'transformers'")
    access = '[2026-02-26 20:40:02] INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK'
    log.write_text(benign + "\n" + "".join(SERVING.format(n=i) + "\n" for i in range(5))
                   + (access + "\n") * 200)
    ledger = LogLedger()
    follower = LogFollower(Host.local(), str(log), engine="sglang", capacity=50)
    follower.subscribe(ledger)
    with follower:
        _wait_for(follower, 206)
        events = follower.events()
    assert follower.stats.dropped_from_buffer > 0 and events[0].line_no > 6  # the ring holds the access lines only
    assert [r.line_no for r in ledger.metric_rows(1, 6)] == [2, 3, 4, 5, 6]
    assert [e.line_no for e in ledger.decisive()] == [1]
