"""JupyterLab in headless Chromium: widgets render, and live log lines arrive while a cell runs.

The first test proves the harness itself on a notebook generated here: a plain ipywidgets
HTML (the widget manager works), then a LogView over a file that a thread appends to
while the cell blocks, as `server.wait_ready()` would. The benign TP5 line must appear,
dimmed and with its rule on hover, before the cell finishes. The second drives a
ServerPanel over the simulated server: the badge goes starting -> ready, and the Stop
button, clicked in the browser, stops the server. The third replays the onboarding
notebook and checks ends, not only starts: every panel stopped or failed (never left at
"stopping"), no fatal line from a stop the toolkit asked for, its probes hidden by default.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
from system.browser import LabPage, write_notebook

from toolkit.host.host import Host

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TP5_BENIGN = (
    "[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: "
    "cannot import name 'GlmAsrConfig' from 'transformers' "
    "(/root/ml-env/lib/python3.12/site-packages/transformers/__init__.py)"
)

PROBE_CELL = """\
import ipywidgets as widgets
widgets.HTML('<span class="tk-probe tk-benign" data-verdict="benign" title="rule: probe" '
             'style="opacity:0.5">harness probe</span>')
"""

LOGVIEW_CELL = f"""\
import pathlib, threading, time
from toolkit.server.follow import LogFollower
from toolkit.host.host import Host
from toolkit.views.widgets import LogView

log = pathlib.Path("server.log")
log.write_text("")
follower = LogFollower(Host.local(), str(log), engine="sglang").start()
view = LogView(follower)
display(view)

LINES = [
    "[2026-02-26 20:25:01] server_args=ServerArgs(model_path='kimi', tp_size=8)",
    "[2026-02-26 20:25:30 TP0] Load weight begin. avail mem=70.00 GB",
    {TP5_BENIGN!r},
    "[2026-02-26 20:26:40 TP0] Decode batch. #running-req: 1, #token: 90, gen throughput (token/s): 81.20",
    "[2026-02-26 20:27:06] The server is fired up and ready to roll!",
]

def write():
    with log.open("a") as out:
        for line in LINES:
            out.write(line + "\\n")
            out.flush()
            time.sleep(0.3)

writer = threading.Thread(target=write)
writer.start()
time.sleep(10)  # the cell blocks, as wait_ready does; the view must still update
writer.join()
"""

SUMMARY_CELL = """\
print(view)  # the text an executed notebook keeps
"""


def test_harness_runs_a_notebook_and_a_live_logview_renders(lab_page: LabPage, lab_root: Path) -> None:
    notebook = write_notebook(lab_root / "harness_probe.ipynb", [PROBE_CELL, LOGVIEW_CELL, SUMMARY_CELL])
    lab_page.open_notebook(str(notebook.relative_to(lab_page.lab.root_dir)))
    lab_page.run_all()

    # A plain ipywidgets HTML: proves the widget manager (jupyterlab_widgets) is loaded.
    probe = lab_page.wait_for(".tk-probe", timeout_s=90)
    assert probe.inner_text() == "harness probe"

    # The benign TP5 line arrives while the LogView cell is still running.
    benign = '.tk-line[data-verdict="benign"]'
    lab_page.wait_for(benign, timeout_s=60)
    assert lab_page.cell_running(), "the line only appeared after the cell finished: the view is not live"
    assert "GlmAsrConfig" in lab_page.page.locator(benign).first.inner_text()
    assert float(lab_page.style(benign, "opacity")) < 0.8  # dimmed
    assert "rule: " in (lab_page.attribute(benign, "title") or "")
    lab_page.wait_for('.tk-line[data-verdict="ready"]', timeout_s=30)
    lab_page.screenshot("live-logview", selector=".tk-logview")

    lab_page.wait_until_executed(timeout_s=120)
    counts = lab_page.wait_for(".tk-count", timeout_s=10)
    assert counts.get_attribute("data-benign") == "1"
    assert lab_page.page.locator('.tk-line[data-verdict="metric"]').count() == 1
    summary = lab_page.page.locator(".jp-OutputArea-output pre").last.inner_text()
    assert summary.startswith("LogView of ") and "5 lines, 1 benign, 0 fatal" in summary
    lab_page.screenshot("executed")  # the page as a person sees it


PANEL_CELL = """\
import pathlib, socket
from toolkit.host.host import Host
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec
from toolkit.views.widgets import LogView, ServerPanel

with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
spec = ServerSpec.simulator(tp=2, port=port, host="127.0.0.1", sim_startup_s=3, sim_warmup_s=0.5)
server = launch(Host.local(), spec, log_dir=str(pathlib.Path("logs").resolve()))
pathlib.Path("server.pid").write_text(str(server.pid))  # the test's safety net
panel, view = ServerPanel(server), LogView(server)
display(panel, view)
server.wait_ready(timeout_s=60)  # blocks; the badge and the log update meanwhile
"""


def test_server_panel_turns_ready_and_its_stop_button_stops_the_server(
    lab_page: LabPage, lab_root: Path
) -> None:
    notebook = write_notebook(lab_root / "panel.ipynb", [PANEL_CELL, "print(panel)"])
    try:
        lab_page.open_notebook(str(notebook.relative_to(lab_page.lab.root_dir)))
        lab_page.run_all()
        lab_page.wait_for('.tk-status[data-state="starting"]', timeout_s=90)
        lab_page.wait_for(
            '.tk-status[data-phase="weights_loaded"], .tk-status[data-phase="ready"]', timeout_s=60
        )
        lab_page.wait_for('.tk-status[data-state="ready"]', timeout_s=60)
        lab_page.wait_until_executed(timeout_s=60)
        assert lab_page.page.locator(".tk-status a.tk-url").first.inner_text().startswith("http://127.0.0.1:")
        lab_page.screenshot("panel-ready", selector=".tk-server-panel")

        lab_page.page.locator(".tk-stop").first.click()
        lab_page.wait_for('.tk-status[data-state="stopped"]', timeout_s=60)
        assert lab_page.page.locator(".tk-stop").first.is_disabled()
        lab_page.screenshot("panel-stopped", selector=".jp-Notebook")
    finally:
        _kill_leftover_server(lab_root / "server.pid")


def _kill_leftover_server(pid_file: Path) -> None:
    """A failed test must not leave the simulator running (it is launched detached)."""
    if not pid_file.exists():
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(int(pid_file.read_text()), signal.SIGKILL)


FAST_PARAMETERS = """\
# parameters (the browser test's fast values)
out_dir = "out"
journal_path = "out/eagle3.sqlite"
ssh_host = ""
ssh_port = 22
ssh_user = None
ssh_key = None
known_hosts = None
startup_s = 2.0
num_prompts = 2
output_len = 32
repeats = 1
base_port = 30400
"""


@pytest.mark.timeout(900)  # the replay is given 600 s to execute (below); a busy 2-core machine needs them
def test_onboarding_notebook_replays_the_seed_live(lab_page: LabPage, lab_root: Path) -> None:
    """The newcomer's view: logs stream while the server starts, the badge turns ready, the benign
    TP5 line is dimmed, a throughput plot renders, and the post-mortem link is there at the end."""
    import nbformat

    source = Path(__file__).resolve().parents[2] / "notebooks" / "01_onboarding_eagle3.ipynb"
    notebook = nbformat.read(source, as_version=4)
    parameters = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    parameters.source = FAST_PARAMETERS
    target = lab_root / source.name
    nbformat.write(notebook, target)

    try:
        _replay_onboarding(lab_page, target)
    finally:  # servers are detached (they outlive a kernel): a failed run must not leave one on the port
        host = Host.local()
        holder = host.port_holder(30400)
        if holder is not None and holder[0]:
            host.stop(holder[0], grace_s=3)


# For each cell's output area: the states of its panels, and its log views' fatal, shutdown and toolkit-request lines.
_ENDS_JS = """() => [...document.querySelectorAll('.jp-OutputArea')].map(area => ({
    states: [...area.querySelectorAll('.tk-status')].map(e => e.dataset.state),
    fatal: area.querySelectorAll('.tk-line[data-verdict="fatal"]').length,
    shutdown: area.querySelectorAll('.tk-line[data-verdict="shutdown"]').length,
    ours_shown: area.querySelectorAll('.tk-line[data-toolkit="1"]').length,
    ours_counted: [...area.querySelectorAll('.tk-count')].reduce((n, e) => n + Number(e.dataset.toolkit || 0), 0),
})).filter(a => a.states.length)"""


def _check_ends(lab_page: LabPage) -> None:
    """After Run All: every panel shows its end (never "stopping"), a stop the toolkit asked for wrote no fatal
    line, the toolkit's own probe lines are hidden by default and one click on the toggle shows them."""
    areas = lab_page.page.evaluate(_ENDS_JS)
    assert areas, "no ServerPanel rendered"
    for area in areas:
        assert all(state in ("stopped", "failed") for state in area["states"]), areas
        if all(state == "stopped" for state in area["states"]):
            assert area["fatal"] == 0, area  # the engine's shutdown lines are `shutdown`, never fatal
    assert sum(a["shutdown"] for a in areas) > 0, areas  # they are there, dimmed
    assert all(a["ours_shown"] == 0 for a in areas) and sum(a["ours_counted"] for a in areas) > 0, areas
    view = lab_page.page.locator(".tk-logview").first
    view.scroll_into_view_if_needed()
    lab_page.screenshot("onboarding-ended-panel", selector=".tk-server-panel")
    lab_page.screenshot("onboarding-ended-log", selector=".tk-logview")
    view.locator(".tk-filter-toolkit").click()
    lab_page.wait_for('.tk-line[data-toolkit="1"]', timeout_s=30)
    lab_page.screenshot("onboarding-toolkit-requests-shown", selector=".tk-logview")
    view.locator(".tk-filter-toolkit").click()


def _replay_onboarding(lab_page: LabPage, target: Path) -> None:
    lab_page.open_notebook(str(target.relative_to(lab_page.lab.root_dir)))
    lab_page.run_all()
    lab_page.wait_for('.tk-status[data-state="starting"]', timeout_s=120)
    lab_page.wait_for(".tk-line", timeout_s=60)
    assert lab_page.page.locator('.tk-status[data-state="starting"]').count() >= 1, "lines came only after start"
    lab_page.page.locator(".tk-server-panel").first.scroll_into_view_if_needed()
    lab_page.screenshot("onboarding-starting")

    lab_page.wait_for('.tk-status[data-state="ready"]', timeout_s=120)
    benign_tp5 = '.tk-line[data-verdict="benign"][data-rank="TP5"]'
    lab_page.wait_for(benign_tp5, timeout_s=60)
    # read in one step: the view replaces its HTML up to 10 times a second
    assert "GlmAsrConfig" in lab_page.page.eval_on_selector(benign_tp5, "e => e.textContent")
    assert float(lab_page.style(benign_tp5, "opacity")) < 0.8
    assert "rule: sglang_ignore_import_error" in (lab_page.attribute(benign_tp5, "title") or "")
    lab_page.page.locator(".tk-server-panel").first.scroll_into_view_if_needed()
    lab_page.screenshot("onboarding-ready")

    lab_page.wait_until_executed(timeout_s=600)
    _check_ends(lab_page)
    assert lab_page.page.locator(".jp-RenderedImage img").count() >= 3  # throughput, env matrix, A/B, timeline
    link = lab_page.wait_for("a.tk-postmortem", timeout_s=10)
    assert "out/postmortem.html" in (link.get_attribute("href") or "")
    assert (target.parent / "out" / "postmortem.html").exists()
    lab_page.page.locator(".jp-RenderedImage img").first.scroll_into_view_if_needed()
    lab_page.screenshot("onboarding-throughput-plot", selector=".jp-RenderedImage")
    link.scroll_into_view_if_needed()
    lab_page.screenshot("onboarding-postmortem-link")
