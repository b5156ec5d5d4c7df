"""Issue 25: text from a journal, a log or a server is inert in every output (plots, Markdown,
HTML, widgets, the terminal), and a damaged journal is refused in one line."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from journal_data import bench_result
from sim_process import terminal_signals

from toolkit.__main__ import main as toolkit_main
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.logs.inert import inert_text
from toolkit.logs.stream import MAX_LINE_CHARS
from toolkit.report.document import Code, Paragraph, Table, to_html, to_markdown
from toolkit.server.follow import LogFollower
from toolkit.views.widgets._log_markup import display_text


def test_dollar_signs_in_a_step_title_do_not_abort_the_report(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "dollars.sqlite", investigation="pid $$ in a path")
    for title in ("relaunch with --log /tmp/sgl-$$.log", r"$\foo$ and a $x^$", "baseline"):
        with journal.step(r"costs $\bar or $6", title) as step:
            step.record(bench_result(82.0))
    journal.close()
    assert toolkit_main(["report", str(journal.path), "--out", str(tmp_path / "out")]) == 0
    assert "/tmp/sgl-$$.log" in (tmp_path / "out" / "postmortem.html").read_text(encoding="utf-8")


HOSTILE = ("\x1b]52;c;cm0gLXJmIH4=\x07clipboard \x1b]0;owned\x07title \x1b[2J\x1b[Hclear "
           "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\ bell\x07 nul\x00 back\rspace \u202eevil\u2066 \x1bc")


def test_inert_text_drops_escape_sequences_and_shows_every_other_control() -> None:
    shown = inert_text(HOSTILE)
    assert not set(shown) & {"\x1b", "\x07", "\x00", "\r", "\u202e", "\u2066"}
    assert shown == ("clipboard title clear link bell\\x07 nul\\x00 back\\rspace \\u202eevil\\u2066 \\x1bc")
    assert inert_text("tab\tand\nnewline stay; CRLF ends\r\n") == "tab\tand\nnewline stay; CRLF ends\n"


def test_the_post_mortem_and_the_widgets_show_escapes_not_obey_them() -> None:
    blocks = [Paragraph(HOSTILE), Code(HOSTILE), Table(("what",), ((HOSTILE,),))]
    for page in (to_html(blocks, title=HOSTILE), to_markdown(blocks)):
        assert not set(page) & {"\x1b", "\x07", "\x00", "\u202e", "\u2066"}
        assert "u202eevil" in page
    assert "\x1b" not in display_text(HOSTILE) and "]52;" not in display_text(HOSTILE)


def test_logs_follow_writes_no_escape_and_no_note_of_tail_as_a_log_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"INFO first\nERROR {HOSTILE}\nINFO END-ONE\n", encoding="utf-8")
    # SIGINT at its default, as a terminal starts it (a run in a script's background has it ignored, and inherited)
    follower = subprocess.Popen([sys.executable, "-m", "toolkit", "logs", "follow", str(log), "--color", "never"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=terminal_signals)
    assert follower.stdout is not None
    seen = b""
    try:
        while b"END-ONE" not in seen:
            seen += follower.stdout.readline()
        log.write_text("INFO END-TWO\n", encoding="utf-8")  # truncated: tail notes it on its stderr
        while b"END-TWO" not in seen:
            seen += follower.stdout.readline()
    finally:
        follower.send_signal(signal.SIGINT)
        try:
            rest, _ = follower.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            follower.kill()
            follower.communicate(timeout=30)
            raise
    seen += rest
    assert b"\x1b" not in seen and b"\x07" not in seen and "\u202e".encode() not in seen
    assert b"truncated" not in seen and b"tail:" not in seen


def test_the_follower_keeps_a_long_line_by_its_ends_and_marks_the_cut(tmp_path: Path) -> None:
    """A 50 MB line once took 26.6 s and 305 MB, and was kept whole in the ring buffer."""
    log = tmp_path / "server.log"
    log.write_bytes(b"INFO start " + b"x" * (5 << 20) + b" the end\nINFO next\n")
    with LogFollower(Host.local(), str(log), engine="sglang") as follower:
        deadline = time.monotonic() + 60
        while follower.stats.lines < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        events = follower.events()
    assert [e.line_no for e in events] == [1, 2]
    assert len(events[0].raw) <= MAX_LINE_CHARS + 100 and "characters not read" in events[0].raw
    assert events[0].raw.startswith("INFO start") and events[0].raw.endswith(" the end")
