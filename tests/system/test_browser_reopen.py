"""An executed notebook, reopened in JupyterLab, reads as it ended (issue 28, item 6).

tqdm's notebook bar was an ipywidget: reopened, the executed file showed "Error displaying widget:
model not found" for each finished bar, or its first text frozen (`bench: 0%| 0/3`). The test
executes a small notebook with papermill, as `make demo` does (a `tk.measure` cell: a ServerPanel, a
LogView and a bench progress bar over the simulator), opens the executed `.ipynb` in JupyterLab in
headless Chromium without running it, and reads the DOM: no widget error, no bar left at 0 %, the bar's
last state (3/3) there as text. Seen failing on the toolkit of cba123b (before toolkit/progress.py,
run from a worktree of that commit with this file copied in): the tqdm widget's saved text,
`bench:   0%|          | 0/3`, was what the reopened page showed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from sim_process import quiet_port
from system.browser import REPO_ROOT, LabPage, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MEASURE_CELL = """\
import toolkit as tk
journal = tk.Journal("reopen.sqlite")
spec = tk.ServerSpec.simulator(tp=1, port={port}, host="127.0.0.1", sim_startup_s=1, sim_warmup_s=0.2)
baseline = tk.measure(tk.Host.local(), spec, title="baseline",
                      plan=tk.Plan(bench=tk.Load(num_prompts=3, max_concurrency=1, input_len=32, output_len=16),
                                   journal=journal))
"""

SUMMARY_CELL = "print(baseline)"

# Text a reader must never see in a reopened notebook: a lost widget, or a bar that never moved.
WIDGET_ERRORS = ("Error displaying widget", "model not found")
FROZEN_BAR = re.compile(r"\b0%\|[^\n]*\b0/\d+")


def execute_with_papermill(source: Path, executed: Path) -> None:
    """Run the notebook as `make demo` does (papermill, nbclient saves the widget state), in its own process."""
    command = [sys.executable, "-m", "papermill", str(source), str(executed), "--cwd", str(source.parent),
               "--kernel", "python3", "--no-progress-bar"]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert finished.returncode == 0, finished.stderr[-4000:]


@pytest.mark.timeout(600)
def test_a_reopened_executed_notebook_shows_no_widget_error_and_no_frozen_bar(
    lab_page: LabPage, lab_root: Path
) -> None:
    port = quiet_port()  # bound by a kernel started later: not an ephemeral port it could take itself
    source = write_notebook(lab_root / "reopen" / "measure.ipynb",
                            [MEASURE_CELL.format(port=port), SUMMARY_CELL])
    executed = source.with_name("measure-executed.ipynb")
    execute_with_papermill(source, executed)
    record = nbformat.read(executed, as_version=4)
    saved = json.dumps([o for c in record.cells for o in c.get("outputs", [])])
    assert "bench" in saved, "the notebook drew no bench progress: the test would prove nothing"

    lab_page.open_notebook(str(executed.relative_to(lab_page.lab.root_dir)))  # opened, never run
    lab_page.wait_for(".jp-OutputArea-output", timeout_s=60)
    lab_page.wait_for(".tk-server-panel, .jp-OutputArea-output pre", timeout_s=60)
    lab_page.page.wait_for_timeout(3000)  # the widget manager restores saved state, or reports a lost model
    text = lab_page.page.evaluate("() => document.querySelector('.jp-Notebook').innerText")
    (lab_page.artifacts_dir / "notebook.txt").write_text(text)
    lab_page.screenshot("reopened", selector=".jp-Notebook")

    for words in WIDGET_ERRORS:
        assert words not in text, f"{words!r} in the reopened notebook:\n{text[-3000:]}"
    frozen = FROZEN_BAR.search(text)
    assert frozen is None, f"a progress bar frozen at {frozen.group(0)!r} in the reopened notebook"
    assert re.search(r"100%\|[^\n]*3/3", text), f"no finished bench bar (3/3) in the reopened notebook:\n{text[-3000:]}"
