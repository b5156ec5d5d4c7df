"""Widgets are views: bounded, throttled, escaped, and readable as text.

The log events are real `toolkit.logs` values (classified from real lines where the line
matters); `Feed` below is a publisher with LogFollower's subscribe contract, so the
view's own behaviour is tested without a reader thread's timing. The end-to-end test
follows a real file through a real `LogFollower` on `Host.local()`.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
from sim_process import free_port as _free_port

import toolkit.views.widgets as tkw
from toolkit.errors import ServerDied
from toolkit.host.host import Host, ProcessInfo, StopReport
from toolkit.journal import Journal
from toolkit.logs import LogEvent, MetricRow, Phase, Verdict, classify_lines
from toolkit.moves.envcheck import check_env
from toolkit.server.follow import LogFollower
from toolkit.server.launch import launch
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec
from toolkit.server.state import ServerState
from toolkit.views.widgets import EnvMatrix, JournalSteps, LogView, ResultsTable, ServerPanel
from toolkit.views.widgets._log_markup import LogFilter, display_text, line_html, log_html
from toolkit.views.widgets._throttle import Throttle

TP5_BENIGN = (
    "[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: "
    "cannot import name 'GlmAsrConfig' from 'transformers' "
    "(/root/ml-env/lib/python3.12/site-packages/transformers/__init__.py)"
)
READY = "[2026-02-26 20:31:40] The server is fired up and ready to roll!"


def event(
    line_no: int,
    raw: str,
    verdict: Verdict = Verdict.INFO,
    *,
    rank: str | None = None,
    rule: str | None = None,
    phase: Phase | None = None,
    metric: MetricRow | None = None,
    context: tuple[str, ...] = (),
) -> LogEvent:
    return LogEvent(
        line_no=line_no,
        raw=raw,
        text=raw,
        timestamp=None,
        rank=rank,
        level=None,
        verdict=verdict,
        rule=rule,
        phase=phase,
        metric=metric,
        context=context,
    )


class Feed:
    """LogFollower's subscriber contract as a plain publisher: `publish` plays the reader thread."""

    def __init__(self, backlog: list[LogEvent] | None = None) -> None:
        self._subscribers: list[Callable[[list[LogEvent]], None]] = []
        self._events = list(backlog or [])
        self.stopped = False

    def subscribe(
        self, callback: Callable[[list[LogEvent]], None], *, replay: bool = True
    ) -> Callable[[], None]:
        self._subscribers.append(callback)
        if replay and self._events:
            callback(list(self._events))
        return lambda: self._subscribers.remove(callback)

    def publish(self, batch: list[LogEvent]) -> None:
        self._events.extend(batch)
        for callback in list(self._subscribers):
            callback(batch)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def stop(self) -> None:
        self.stopped = True


@dataclass
class StandInServer:
    """A Server's attributes with a real ServerState; the feed plays its follower, `stop()` records its thread."""

    feed: Feed = field(default_factory=Feed)
    url: str = "http://127.0.0.1:30000"
    pid: int = 4242
    log_path: str = "/tmp/server.log"
    started_at: float = field(default_factory=time.time)
    stop_delay_s: float = 0.0
    stop_error: Exception | None = None
    stopped_on: list[str] = field(default_factory=list)
    stop_report: StopReport | None = None
    spec: ServerSpec = field(default_factory=lambda: ServerSpec.simulator(tp=8, port=30000))
    host: Host = field(default_factory=Host.local)
    state: ServerState = field(init=False)

    def __post_init__(self) -> None:
        self.state = ServerState(started_at=self.started_at)
        self.feed.subscribe(lambda batch: self.state.observe(batch, time.time()))

    def follow(self) -> Feed:
        return self.feed

    def stop(self) -> StopReport:
        self.state.stop_requested(time.time())
        time.sleep(self.stop_delay_s)
        self.stopped_on.append(threading.current_thread().name)
        if self.stop_error is not None:
            raise self.stop_error
        self.stop_report = StopReport("localhost", self.pid, already_stopped=False, sigkill_sent=True)
        self.state.stopped(sigkill_sent=True, at=time.time())
        return self.stop_report


@pytest.fixture
def feed() -> Feed:
    return Feed()


@pytest.fixture
def view(feed: Feed) -> Iterator[LogView]:
    widget = LogView(feed, max_lines=50, history=500)
    yield widget
    widget.close()


def test_public_api_is_pinned() -> None:
    assert tkw.__all__ == ["LogView", "ServerPanel", "ResultsTable", "EnvMatrix", "JournalSteps", "measure", "show_live"]


# -- markup (pure) --------------------------------------------------------------------------


def test_benign_line_is_marked_dimmable_with_its_rule_in_the_title() -> None:
    (benign,) = classify_lines([TP5_BENIGN], engine="sglang")
    assert benign.verdict is Verdict.BENIGN
    markup = line_html(benign)
    assert markup.startswith(
        '<div class="tk-line tk-benign" data-verdict="benign" data-line="1" data-rank="TP5"'
    )
    assert f'data-rule="{benign.rule}"' in markup
    assert f'title="benign · rule: {benign.rule} · line 1"' in markup
    assert ".tk-log .tk-benign{opacity:0.5}" in log_html([benign])


def test_log_text_is_escaped_in_content_and_attributes() -> None:
    hostile = event(7, '<script>alert("x")</script> & <b>', Verdict.FATAL, rank='TP"1', rule='r"><img src=x>')
    markup = line_html(hostile)
    assert "<script>" not in markup and "<img" not in markup and "<b>" not in markup
    assert '&lt;script&gt;alert("x")&lt;/script&gt; &amp; &lt;b&gt;' in markup
    assert 'data-rank="TP&quot;1"' in markup
    assert 'data-rule="r&quot;&gt;&lt;img src=x&gt;"' in markup


def test_traceback_context_precedes_the_decisive_line() -> None:
    fatal = event(
        9, "ValueError: boom", Verdict.FATAL, context=("Traceback (most recent call last):", '  File "x"')
    )
    markup = line_html(fatal)
    assert (
        '<div class="tk-context">Traceback (most recent call last):\n  File "x"</div>ValueError: boom</div>'
        in markup
    )


def test_metric_line_title_carries_the_parsed_values() -> None:
    metric = MetricRow("sglang_decode", {"gen_throughput": 81.2, "running_req": 1}, None, "TP0", 3)
    markup = line_html(event(3, "Decode batch. #running-req: 1", Verdict.METRIC, metric=metric))
    assert 'class="tk-line tk-metric"' in markup
    assert "sglang_decode: gen_throughput=81.2, running_req=1" in markup


def test_display_text_is_what_a_terminal_shows() -> None:
    assert display_text("\x1b[32mINFO\x1b[0m ok\r\n") == "INFO ok"
    assert display_text("Loading  10%\rLoading  50%\rLoading 100%") == "Loading 100%"
    long = display_text("x" * 5000)
    assert long.startswith("x" * 2000) and long.endswith("… [3,000 more characters]")


def test_filter_by_verdict_rank_and_regex() -> None:
    lines = [event(1, "a TP5 line", rank="TP5"), event(2, "a TP0 line", Verdict.BENIGN, rank="TP0")]
    assert [e.line_no for e in lines if LogFilter(verdicts=frozenset({"benign"})).matches(e)] == [2]
    assert [e.line_no for e in lines if LogFilter(rank="TP5").matches(e)] == [1]
    assert [e.line_no for e in lines if LogFilter(pattern=re.compile("TP0")).matches(e)] == [2]


# -- LogView --------------------------------------------------------------------------------


def _frame_lines(widget: LogView) -> int:
    match = re.search(r'class="tk-log" data-lines="(\d+)"', widget.lines.value)
    assert match is not None
    return int(match.group(1))


@pytest.mark.slow
def test_a_100k_line_burst_keeps_the_frame_bounded_and_redraws_throttled(feed: Feed) -> None:
    widget = LogView(feed, max_lines=500, history=5_000, rate_hz=10)
    changes: list[float] = []
    widget.lines.observe(lambda _change: changes.append(time.monotonic()), "value")
    lengths: list[int] = []
    widget.lines.observe(lambda change: lengths.append(len(change["new"])), "value")

    def reader() -> None:  # what LogFollower's thread does: batches as they are read
        for start in range(0, 100_000, 200):
            batch = [
                event(
                    n,
                    f"[2026-02-26 20:26:06 TP{n % 8}] line {n} <tag>",
                    Verdict.BENIGN if n % 1000 == 0 else Verdict.INFO,
                    rank=f"TP{n % 8}",
                    rule="r" if n % 1000 == 0 else None,
                )
                for n in range(start + 1, start + 201)
            ]
            feed.publish(batch)
            time.sleep(0.0005)

    started = time.monotonic()
    thread = threading.Thread(target=reader)
    thread.start()
    thread.join()
    time.sleep(0.25)  # let the last frame out
    window_s = time.monotonic() - started
    try:
        assert widget.total_lines == 100_000
        assert widget.counts == {"info": 99_900, "benign": 100}
        assert _frame_lines(widget) == 500
        assert "line 100000 &lt;tag&gt;" in widget.lines.value
        # Bounded: 500 lines of ~150 characters of markup each, whatever the log's length.
        assert max(lengths) < 500 * 300
        # Throttled: at most 10 frames a second (+1 for the frame that opens the window).
        assert 1 <= len(changes) <= 10 * window_s + 1, (len(changes), window_s)
        assert widget.count_label.value.count("100,000 lines, 100 benign, 0 fatal") == 1
    finally:
        widget.close()


def test_verdict_toggles_rank_dropdown_and_regex_filter_the_frame(view: LogView, feed: Feed) -> None:
    feed.publish(
        [
            event(1, "loading weights", Verdict.PROGRESS, rank="TP0"),
            event(2, TP5_BENIGN, Verdict.BENIGN, rank="TP5", rule="sglang.ignored_import_error"),
            event(3, "CUDA out of memory", Verdict.FATAL, rank="TP10", rule="cuda_oom"),
            event(4, "nccl ALGO=Ring", Verdict.INFO, rank="TP2"),
        ]
    )
    view.flush()
    assert [label for label, _ in view.rank.options] == ["all ranks", "TP0", "TP2", "TP5", "TP10"]

    view.verdict_toggles["benign"].value = False
    assert [e.line_no for e in view.visible_events()] == [1, 3, 4]
    view.verdict_toggles["benign"].value = True

    view.rank.value = "TP5"
    view.flush()
    assert [e.line_no for e in view.visible_events()] == [2]
    assert 'data-verdict="benign"' in view.lines.value and 'data-verdict="fatal"' not in view.lines.value
    view.rank.value = ""

    view.pattern.value = "ring"  # smart case: lower case ignores case
    assert [e.line_no for e in view.visible_events()] == [4]
    view.pattern.value = "Ring"
    assert [e.line_no for e in view.visible_events()] == [4]
    view.pattern.value = "RING"
    assert view.visible_events() == []
    view.pattern.value = "out of ("
    view.flush()
    assert "invalid regex" in view.count_label.value
    assert view.visible_events() == []  # the previous filter stays


def test_pause_freezes_the_frame_but_not_the_counts(view: LogView, feed: Feed) -> None:
    feed.publish([event(1, "first")])
    view.flush()
    frozen = view.lines.value
    view.pause.value = True
    feed.publish([event(2, "second", Verdict.FATAL)])
    view.flush()
    assert view.lines.value == frozen
    assert "1 fatal" in view.count_label.value and "paused" in view.count_label.value
    view.pause.value = False
    view.flush()
    assert "second" in view.lines.value


def test_a_late_view_replays_what_the_follower_holds() -> None:
    feed = Feed(backlog=classify_lines([TP5_BENIGN, READY], engine="sglang"))
    with LogView(feed) as view:
        view.flush()
        assert 'data-verdict="benign"' in view.lines.value
        assert 'data-verdict="ready"' in view.lines.value


def test_text_repr_says_counts_and_last_lines(view: LogView, feed: Feed) -> None:
    feed.publish(
        classify_lines(["[2026-02-26 20:26:00] Load weight begin.", TP5_BENIGN, READY], engine="sglang")
    )
    text = repr(view)
    assert text.splitlines()[0] == "LogView: 3 lines, 1 benign, 0 fatal"
    assert "benign   | [2026-02-26 20:26:06 TP5] Ignore import error" in text
    assert text.splitlines()[-1].endswith("The server is fired up and ready to roll!")
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"] == text
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_close_unsubscribes_and_joins_its_thread(feed: Feed) -> None:
    view = LogView(feed)
    thread = view._throttle._thread
    assert feed.subscribers == 1 and thread is not None and thread.is_alive()
    view.close()
    assert feed.subscribers == 0
    assert not thread.is_alive()  # this view's own thread: another test's view may still be closing beside it
    assert not feed.stopped  # a follower passed in belongs to the caller
    assert repr(view).endswith("(closed)")
    view.close()  # idempotent


def test_a_view_over_a_server_follows_its_shared_log(tmp_path: Path) -> None:
    script = f"import time; print({READY!r}, flush=True); time.sleep(60)"
    spec = ServerSpec.command([sys.executable, "-c", script], port=_free_port())
    with launch(Host.local(), spec, log_dir=str(tmp_path), validate=False) as server:
        view = LogView(server)
        try:
            _wait(lambda: view.counts.get("ready", 0) >= 1, timeout_s=30)
            view.flush()
            assert 'data-verdict="ready"' in view.lines.value
            assert view.follower is server.follow()  # one follower per server, shared by every view
        finally:
            view.close()
        assert not server.follow().finished.is_set()  # closing a view never stops the server's follower


def test_a_source_without_a_log_is_refused_with_the_fix() -> None:
    with pytest.raises(TypeError, match=r"pass server or server.follow\(\)"):
        LogView(object())


# -- ServerPanel ----------------------------------------------------------------------------


def _state(panel: ServerPanel) -> str:
    panel.flush()
    match = re.search(r'class="tk-status" data-state="(\w+)"', panel.status.value)
    assert match is not None
    return match.group(1)


def _make_ready(server: StandInServer, ready_at: float, lines: list[str]) -> None:
    """What wait_ready does to the server's state: the log, then one passing probe."""
    server.state.observe(classify_lines(lines, engine="sglang"), ready_at)
    server.state.probe(ok=True, detail="POST /generate 200", proves_generation=True, at=ready_at)


def test_the_log_moves_the_phase_but_only_a_readiness_report_makes_it_ready() -> None:
    server = StandInServer(started_at=1000.0)
    panel = ServerPanel(server, tick_s=0.05)
    try:
        assert _state(panel) == "starting"
        server.feed.publish(
            classify_lines(["[2026-02-26 20:26:00 TP0] Load weight begin. avail mem=70.00 GB"])
        )
        server.feed.publish(classify_lines([READY], engine="sglang"))
        assert _state(panel) == "starting"  # a ready line is not proof: readiness wants a probe
        assert "the log says ready" in panel.status.value
        _make_ready(server, 1073.25, [TP5_BENIGN, READY])
        assert _state(panel) == "ready"
        assert 'data-phase="ready"' in panel.status.value
        assert 'href="http://127.0.0.1:30000"' in panel.status.value
        assert 'pid <code class="tk-pid">4242</code>' in panel.status.value
        assert repr(panel) == (
            "ServerPanel: ready after 1 min 13 s · phase 'ready' · sim baseline · http://127.0.0.1:30000 · host localhost"
            " · pid 4242 · 1 benign error lines ignored"
        )
    finally:
        panel.close()
    # the panel subscribed to the server's state, not to its log: only the state's own subscription remains
    assert server.feed.subscribers == 1 and not server.feed.stopped


def test_a_fatal_line_fails_the_panel_with_wait_readys_message_and_quotes() -> None:
    server = StandInServer()
    panel = ServerPanel(server)
    server.feed.publish(
        [
            event(
                12,
                "RuntimeError: CUDA error: out of memory <oops>",
                Verdict.FATAL,
                rank="TP3",
                rule="cuda_oom",
                context=("Traceback (most recent call last):", '  File "model_runner.py", line 3'),
            )
        ]
    )
    server.feed.publish([event(13, "ValueError: a later, secondary error", Verdict.FATAL)])
    assert _state(panel) == "failed"
    value = panel.status.value
    # the context that led to the fatal line; the line itself is quoted once, in the message above it
    assert '<pre class="tk-evidence">Traceback (most recent call last):\n  File "model_runner.py", line 3</pre>' in value
    assert value.count("out of memory &lt;oops&gt;") == 1
    assert "secondary" not in value  # the first fatal line is the cause
    assert repr(panel).splitlines()[1] == (
        "  ServerDied: the server failed on TP3 (rule cuda_oom, line 12): RuntimeError: CUDA error: out of memory <oops>"
    )
    panel.close()


def test_set_failed_shows_the_errors_evidence_and_hint() -> None:
    panel = ServerPanel(StandInServer(), follow=False)
    panel.set_failed(
        ServerDied(
            "the server exited during startup",
            host="gpu-a",
            evidence=["[TP5] boom"],
            hint="read the fatal line",
        )
    )
    assert _state(panel) == "failed"
    assert '<b class="tk-error-kind">ServerDied</b>' in panel.status.value
    assert '<div class="tk-hint">what to do: read the fatal line</div>' in panel.status.value
    assert repr(panel).splitlines()[1:] == [
        "  ServerDied: the server exited during startup",
        "  | [TP5] boom",
        "  what to do: read the fatal line",
    ]
    panel.close()


def test_a_process_exit_shows_as_a_failure() -> None:
    server = StandInServer(started_at=0.0)
    panel = ServerPanel(server, follow=False)
    server.state.process_exited(-9, at=5.0)
    assert _state(panel) == "failed"
    assert (
        repr(panel).splitlines()[1]
        == "  ServerDied: the server process exited with code -9 before it was ready"
    )
    panel.close()


def test_elapsed_time_ticks_while_starting() -> None:
    now = [1000.0]
    panel = ServerPanel(StandInServer(started_at=1000.0), follow=False, clock=lambda: now[0])
    now[0] = 1012.5
    assert panel.snapshot().elapsed_s == 12.5
    panel.flush()
    assert 'data-elapsed-s="12.5"' in panel.status.value
    assert "starting for 12.5 s" in panel.status.value
    panel.close()


def test_stop_button_stops_off_the_kernel_thread() -> None:
    server = StandInServer(stop_delay_s=0.5)
    panel = ServerPanel(server)
    panel.stop_button.click()
    assert _state(panel) == "stopping"
    assert panel.wait_stopped(timeout_s=5)
    assert _state(panel) == "stopped"
    assert server.stopped_on == ["ServerPanel-stop"]
    assert panel.stop_button.disabled
    assert "SIGKILL was needed" in repr(panel)
    server.feed.publish([event(99, "Traceback: killed", Verdict.FATAL)])
    assert _state(panel) == "stopped"  # a killed server's tracebacks do not fail the panel

def test_a_stop_the_toolkit_asked_for_ends_clean_and_its_shutdown_lines_are_not_fatal() -> None:
    server = StandInServer(started_at=100.0)
    panel = ServerPanel(server, follow=False)
    _make_ready(server, 103.0, [READY])
    server.state.stop_requested(at=130.0)
    server.feed.publish([event(50, "Child process unexpectedly failed with an exit code 15", Verdict.FATAL)])
    server.state.stopped(sigkill_sent=False, at=131.0)
    assert _state(panel) == "stopped"
    assert "clean exit (stopped by the toolkit after 30.0 s)" in repr(panel)
    panel.close()


def test_a_server_that_died_before_the_stop_stays_failed() -> None:
    server = StandInServer(started_at=100.0)
    panel = ServerPanel(server, follow=False)
    server.feed.publish([event(12, "RuntimeError: CUDA error: out of memory", Verdict.FATAL, rank="TP3", rule="cuda_oom")])
    server.state.stop_requested(at=130.0)
    server.state.stopped(sigkill_sent=False, at=131.0)
    assert _state(panel) == "failed"
    assert "out of memory" in panel.status.value
    panel.close()
    panel.close()


def test_a_failed_stop_is_shown() -> None:
    server = StandInServer(stop_error=RuntimeError("pid 4242 survived SIGKILL"))
    panel = ServerPanel(server, follow=False)
    panel.stop()
    panel.wait_stopped(timeout_s=5)
    assert _state(panel) == "failed"
    assert "pid 4242 survived SIGKILL" in panel.status.value
    panel.close()


def test_a_server_stopped_elsewhere_shows_stopped() -> None:
    server = StandInServer()
    panel = ServerPanel(server, follow=False, tick_s=0.05)
    server.stop()  # a `with launch(...)` block ended, on another thread of the program
    deadline = time.monotonic() + 5
    while panel.state != "stopped" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _state(panel) == "stopped"
    panel.close()


# -- end to end: the simulated server, a real follower -----------------------------------------


def _launch_simulator(tmp_path: Path, fault: str) -> Server:
    spec = ServerSpec.simulator(
        tp=2, port=_free_port(), host="127.0.0.1", sim_startup_s=1, sim_warmup_s=0.5, sim_fault=fault
    )
    return launch(Host.local(), spec, log_dir=str(tmp_path))


def _wait(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.slow
def test_a_simulated_oom_turns_the_panel_red_with_the_traceback(tmp_path: Path) -> None:
    with _launch_simulator(tmp_path, "oom") as server:
        panel = ServerPanel(server)
        view = LogView(server)
        try:
            _wait(lambda: panel.state == "failed")
            assert _state(panel) == "failed"
            assert (
                "CUDA out of memory" in panel.status.value
                and '<pre class="tk-evidence">' in panel.status.value
            )
            assert "what to do: GPU memory ran out" in repr(panel)
            _wait(lambda: view.counts.get("fatal", 0) >= 1)
            view.flush()
            assert 'data-verdict="fatal"' in view.lines.value
        finally:
            panel.close()
            view.close()


@pytest.mark.slow
def test_a_simulated_start_turns_ready_from_wait_ready_and_the_stop_button_stops_it(tmp_path: Path) -> None:
    with _launch_simulator(tmp_path, "none") as server:
        panel = ServerPanel(server)
        view = LogView(server)
        try:
            assert _state(panel) == "starting"
            server.wait_ready(timeout_s=60)
            assert _state(panel) == "ready"
            assert 'data-phase="ready"' in panel.status.value
            view.flush()
            assert 'data-verdict="ready"' in view.lines.value
            panel.stop_button.click()
            assert panel.wait_stopped(timeout_s=30)
            assert _state(panel) == "stopped"
            assert not server.is_alive()
        finally:
            panel.close()
            view.close()


# -- tables ---------------------------------------------------------------------------------


def test_results_table_is_bounded_escaped_and_thread_safe() -> None:
    table = ResultsTable(columns=["spec", "output_tok_s"], max_rows=20, rate_hz=10)
    threads = [
        threading.Thread(
            target=lambda k=k: [
                table.append({"spec": f"<s{k}>", "output_tok_s": i + 0.5}) for i in range(500)
            ]
        )
        for k in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    table.flush()
    assert table.row_count == 2000
    assert table.table.value.count("<tr>") == 21  # header + the last 20
    assert "&lt;s" in table.table.value and "<s0>" not in table.table.value
    assert "showing the last 20 of 2,000 rows" in table.table.value
    assert repr(table).startswith("ResultsTable: 2,000 rows\n")
    assert list(table.dataframe().columns) == ["spec", "output_tok_s"]
    table.close()


def test_env_matrix_pivots_an_env_report_and_colours_by_status() -> None:
    workers = [
        ProcessInfo("gpu-a", 11, 10, ("sglang::scheduler_TP0",), {"NCCL_ALGO": "Ring"}, None),
        # a titled process's environ is partly its title's memory (issue 23): TP5's absence is decided by its
        # parent, which lacks NCCL_ALGO too
        ProcessInfo("gpu-a", 12, 10, ("sglang::scheduler_TP5",), {"PATH": "/usr/bin"}, None),
        ProcessInfo("gpu-a", 10, 1, ("python3", "-m", "sglang.launch_server"), {"PATH": "/usr/bin"}, None),
    ]
    report = check_env(workers, {"NCCL_ALGO": "Ring"})
    matrix = EnvMatrix(report)
    value = matrix.matrix.value
    assert "<th>variable</th><th>server [10]</th><th>TP0 [11]</th><th>TP5 [12]</th>" in value
    assert '<td class="tk-cell-status tk-status-ok" data-status="ok"' in value
    missing = re.findall(
        r'<td class="tk-cell-status tk-status-missing" data-status="missing" title="([^"]*)"', value
    )
    assert len(missing) == 2 and missing[1].startswith("TP5 [12] NCCL_ALGO: missing; observed (unset); expected Ring")
    assert "read from its parent 10" in missing[1]
    assert "background:#ffebee" in value
    assert repr(matrix).startswith(f"EnvMatrix: {report.summary()}")


def test_env_matrix_takes_a_long_frame_and_names_missing_columns() -> None:
    frame = pd.DataFrame(
        [{"rank": "TP5", "variable": "NCCL_ALGO", "expected": "Ring", "observed": None, "status": "missing"}]
    )
    matrix = EnvMatrix(frame, columns="rank", value="observed")
    assert repr(matrix).splitlines() == [
        "EnvMatrix: 1 processes × 1 variables: 1 missing",
        "  TP5 NCCL_ALGO: missing, observed (unset), expected Ring",
    ]
    with pytest.raises(ValueError, match=r"no column\(s\) \['rank'\]"):
        matrix.update(frame.rename(columns={"rank": "process"}))
    matrix.close()


def test_journal_steps_render_and_refresh(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.sqlite", investigation="EAGLE-3 regression")
    with journal.step("baseline", "no speculation") as step:
        step.set_verdict("confirmed", note="82 tok/s")
    steps = JournalSteps(journal)
    assert '<td class="tk-cell-status tk-status-confirmed" data-status="confirmed"' in steps.table.value
    with pytest.raises(RuntimeError), journal.step("attention_mode", "EAGLE3 <decode>"):
        raise RuntimeError("server died")
    steps.refresh_button.click()
    assert "EAGLE3 &lt;decode&gt;" in steps.table.value
    assert 'data-status="failed"' in steps.table.value
    assert "<th>spec</th>" not in steps.table.value  # the long columns stay in the journal
    assert repr(steps).startswith("JournalSteps: 2 steps\n")
    steps.close()


# -- the throttle ---------------------------------------------------------------------------


def test_throttle_renders_at_most_rate_hz_and_survives_a_failing_frame() -> None:
    frames: list[float] = []

    def render() -> None:
        frames.append(time.monotonic())
        if len(frames) == 2:
            raise RuntimeError("one bad frame")

    throttle = Throttle(render, rate_hz=20)
    started = time.monotonic()
    while time.monotonic() - started < 0.5:
        throttle.poke()
        time.sleep(0.001)
    time.sleep(0.1)
    throttle.close()
    assert 3 <= len(frames) <= 20 * 0.6 + 1
    assert isinstance(throttle.error, RuntimeError)
    assert all(b - a >= 0.045 for a, b in zip(frames, frames[1:], strict=False))


# -- end to end: a real follower on a real file ------------------------------------------------


def test_a_real_follower_on_a_growing_file(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("")
    with LogFollower(Host.local(), str(log), engine="sglang") as follower:
        view = LogView(follower, max_lines=500)
        changes: list[float] = []
        view.lines.observe(lambda _change: changes.append(time.monotonic()), "value")
        started = time.monotonic()
        with log.open("a") as out:
            for n in range(100_000):
                out.write(f"[2026-02-26 20:26:06 TP{n % 8}] Decode batch. #running-req: 1, line {n}\n")
            out.write(TP5_BENIGN + "\n")
        deadline = time.monotonic() + 120
        while view.counts.get("benign", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.25)
        window_s = time.monotonic() - started
        try:
            assert view.total_lines == 100_001
            assert _frame_lines(view) == 500
            assert 'data-verdict="benign" data-line="100001" data-rank="TP5"' in view.lines.value
            assert len(changes) <= 10 * window_s + 1
        finally:
            view.close()


# -- ends and the toolkit's own traffic (issue 14) -------------------------------------------------

PROBE_503 = '[2026-02-09 14:38:44] INFO:     127.0.0.1:40330 - "GET /health_generate HTTP/1.1" 503 Service Unavailable'
SCRAPE_404 = '[2026-02-09 14:38:45] INFO:     127.0.0.1:40332 - "GET /metrics HTTP/1.1" 404 Not Found'
BENCH_REQUEST = '[2026-02-09 14:39:00] INFO:     127.0.0.1:40400 - "POST /v1/completions HTTP/1.1" 200 OK'


def test_the_toolkits_own_requests_are_hidden_by_default_and_one_toggle_shows_them(view: LogView, feed: Feed) -> None:
    feed.publish(classify_lines([PROBE_503, SCRAPE_404, READY, BENCH_REQUEST], engine="sglang"))
    view.flush()
    assert '"GET /health_generate' not in view.lines.value and '"GET /metrics' not in view.lines.value
    assert '"POST /v1/completions' in view.lines.value  # a benchmark's request is not the toolkit's probe
    assert view.counts.get("warning", 0) == 0  # the probes' 503 is not counted as the engine's warning
    assert "2 toolkit requests (hidden)" in view.count_label.value and 'data-toolkit="2"' in view.count_label.value
    assert "2 toolkit requests (hidden)" in repr(view)
    view.toolkit_toggle.value = True
    view.flush()
    assert view.lines.value.count('data-toolkit="1"') == 2
    assert '"GET /health_generate HTTP/1.1" 503' in view.lines.value
    assert "toolkit requests shown" in view.count_label.value


@pytest.mark.slow
def test_a_completion_before_readiness_is_the_toolkits_probe(tmp_path: Path) -> None:
    """vLLM's /health does not prove generation: wait_ready sends a one-token completion, which is ours;
    a completion after readiness (a benchmark's, a user's) is shown."""
    spec = ServerSpec.simulator(engine="vllm", port=_free_port(), host="127.0.0.1", sim_startup_s=1, sim_warmup_s=0.5)
    with launch(Host.local(), spec, log_dir=str(tmp_path)) as server:
        view = LogView(server)
        try:
            server.wait_ready(timeout_s=60)
            follower = server.follow()
            _wait(lambda: any('"POST /v1/completions' in e.raw for e in follower.events()), timeout_s=30)
            probe = next(e for e in follower.events() if '"POST /v1/completions' in e.raw)
            assert view.is_ours(probe)
            view.flush()
            assert f'data-line="{probe.line_no}"' not in view.lines.value
        finally:
            view.close()


def test_a_follower_marks_what_is_written_after_the_stop_request_as_shutdown(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"{READY}\n[2026-02-26 20:31:41] Received sigquit from a child process. It usually means the child failed.\n")
    with LogFollower(Host.local(), str(log), engine="sglang") as follower:
        assert follower.wait_for_lines(2, timeout_s=30)
        assert follower.stop_requested() == 2 and follower.stop_requested() == 2  # the first mark stands
        with log.open("a") as out:
            out.write("[2026-02-26 20:32:00] Child process unexpectedly failed with an exit code 15. pid=4242\n")
            out.write(f"{TP5_BENIGN}\n")
        assert follower.wait_for_lines(4, timeout_s=30)
        _wait(lambda: len(follower.events()) >= 4, timeout_s=30)
        verdicts = [(e.line_no, e.verdict.value) for e in follower.events()]
    # written before the stop: a death stays fatal; after it: shutdown, and a benign line stays benign
    assert verdicts == [(1, "ready"), (2, "fatal"), (3, "shutdown"), (4, "benign")], verdicts


@pytest.mark.slow
def test_a_simulated_server_ends_stopped_with_no_fatal_line_and_its_probes_hidden(tmp_path: Path) -> None:
    with _launch_simulator(tmp_path, "none") as server:
        panel = ServerPanel(server)
        view = LogView(server)
        try:
            server.wait_ready(timeout_s=60)
            follower = server.follow()
            server.stop()
            # drawn on the stopping thread: no flush, no wait
            assert panel.state == "stopped" and 'data-state="stopped"' in panel.status.value
            assert "clean exit (stopped by the toolkit after" in panel.status.value
            assert 'data-verdict="fatal"' not in view.lines.value and view.counts.get("fatal", 0) == 0
            events = follower.events()
            stop_line = follower.stop_line
            assert stop_line is not None
            assert all(e.verdict is not Verdict.FATAL for e in events if e.line_no > stop_line)
            assert any(e.verdict is Verdict.SHUTDOWN for e in events), [e.raw for e in events[-8:]]
            probes = [e for e in events if '"GET /health_generate' in e.raw]
            assert probes and all(f'data-line="{e.line_no}"' not in view.lines.value for e in probes)
        finally:
            panel.close()
            view.close()


def test_a_failed_server_reads_failed_once_and_its_stop_button_is_off() -> None:
    """Issue 28: `failed … · clean exit (stopped by the toolkit after 1.6 s)`, the OOM four times, Stop enabled."""
    server = StandInServer(started_at=100.0)
    panel = ServerPanel(server, follow=False)
    server.feed.publish([event(12, "RuntimeError: CUDA error: out of memory", Verdict.FATAL, rank="TP3",
                               rule="cuda_oom")])
    server.state.stop_requested(at=101.0)
    server.state.stopped(sigkill_sent=False, at=101.6)
    assert _state(panel) == "failed"
    text = repr(panel)
    assert "clean exit" not in text and "clean exit" not in panel.status.value
    assert text.count("out of memory") == 1, text
    assert panel.stop_button.disabled
    panel.close()
