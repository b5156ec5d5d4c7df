"""No secret of a launch reaches an executed notebook (issue 20, item 1: "executed notebook").

A notebook does what an investigation does with a secret-bearing spec: shows the spec, measures
it with the live panel and log view (``tk.measure``), records a failed start and shows its error,
shows the journal's results and writes the post-mortem. It runs under papermill as a user would,
and the secrets reach it only through the environment, so every byte of the executed ``.ipynb``
(sources, outputs, the saved widget state) can be searched for them: none may be there. The
simulator is SGLang 0.5.18, which logs ``api_key='...'`` raw, so the secret is in the server's log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = [pytest.mark.slow]

API_KEY = "Xk9s3cr3tpass"  # no known shape: only its flag's name says it is a secret
HF_TOKEN = "hf_Zq8xP2mK9vL4tR7wY1nB5cD3fG6hJ0sAq"  # a known shape
PASSWORD = "plainvalue77"  # no shape, named like a password

CELLS = [
    """\
import os
import toolkit as tk
from sim_process import free_port

host = tk.Host.local()
journal = tk.Journal(os.environ["NB_JOURNAL"])
BENCH = tk.Load(num_prompts=4, max_concurrency=2, input_len=16, output_len=16)
spec = tk.ServerSpec.simulator(tp=2, port=free_port(), host="127.0.0.1", sim_startup_s=0.5, sim_warmup_s=0.2,
                               sim_engine_version="0.5.18")
spec = spec.with_flags({"--api-key": os.environ["NB_API_KEY"]}).with_env(
    {"HF_TOKEN": os.environ["NB_HF_TOKEN"], "MY_DB_PASSWORD": os.environ["NB_PASSWORD"]})
spec""",
    "print(spec.describe())\nprint(spec)",
    """\
plan = tk.Plan(bench=BENCH, journal=journal, log_dir=os.environ["NB_LOGS"])
ready = tk.measure(host, spec, plan=plan, title="with a key")
ready""",
    """\
oom = tk.measure(host, spec.with_flags({"--sim-fault": "oom"}), plan=plan, title="too big", check=False)
print(oom.error)
oom.error""",
    "journal.results()",
    """\
from toolkit.report import postmortem
postmortem.write(journal, os.environ["NB_REPORT"])
print(open(os.path.join(os.environ["NB_REPORT"], "postmortem.md")).read())""",
]


def test_an_executed_notebook_holds_no_secret(tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source, executed = tmp_path / "secrets.ipynb", tmp_path / "secrets-executed.ipynb"
    nbformat.write(notebook, source)
    env = {**os.environ, "NB_API_KEY": API_KEY, "NB_HF_TOKEN": HF_TOKEN, "NB_PASSWORD": PASSWORD,
           "NB_JOURNAL": str(tmp_path / "j.sqlite"), "NB_LOGS": str(tmp_path / "logs"),
           "NB_REPORT": str(tmp_path / "report"),
           # the kernel imports the tests' own helpers (sim_process), as the tests do
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")]))}
    finished = subprocess.run([sys.executable, "-m", "papermill", str(source), str(executed), "--kernel", "python3",
                               "--no-progress-bar", "--cwd", str(tmp_path)], env=env, capture_output=True, text=True,
                              timeout=600)
    assert finished.returncode == 0, finished.stderr[-4000:]

    written = executed.read_bytes()
    leaks = [secret for secret in (API_KEY, HF_TOKEN, PASSWORD) if secret.encode() in written]
    assert not leaks, f"the executed notebook holds {leaks}"
    # The run did reach the places where the secrets were: else the test proves nothing.
    logs = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "logs").rglob("*.log"))
    assert f"api_key='{API_KEY}'" in logs  # the server printed it raw
    text = written.decode()
    assert "[REDACTED]" in text  # and the notebook shows it hidden
    assert "application/vnd.jupyter.widget-state+json" in text  # the live panel and log view were saved
    assert "ServerDied" in text or "out of memory" in text.lower()  # the failed start's error was shown
