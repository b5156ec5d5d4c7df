"""``make lab`` saves the tracked notebooks without outputs; git ignores what Jupyter writes beside them (issue 28)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import nbformat
from jupyter_server.services.contents.filemanager import FileContentsManager
from traitlets.config.loader import PyFileConfigLoader

REPO = Path(__file__).resolve().parents[1]


def test_make_lab_runs_jupyter_with_the_stripping_config() -> None:
    lab = (REPO / "Makefile").read_text().split("\nlab:")[1].split("\n\n")[0]
    assert "--config=scripts/jupyter_lab_config.py" in lab


def test_a_notebook_saved_by_the_lab_config_has_no_outputs(tmp_path: Path) -> None:
    config = PyFileConfigLoader("jupyter_lab_config.py", path=str(REPO / "scripts")).load_config()
    manager = FileContentsManager(root_dir=str(tmp_path))
    # (given as config= the hook is validated twice, and traitlets warns that it overrides itself)
    manager.pre_save_hook = config.ContentsManager.pre_save_hook
    cell = nbformat.v4.new_code_cell("1 + 1", execution_count=3,
                                     outputs=[nbformat.v4.new_output("execute_result", {"text/plain": "2"},
                                                                     execution_count=3)])
    notebook = nbformat.v4.new_notebook(cells=[cell, nbformat.v4.new_markdown_cell("# kept")],
                                        metadata={"widgets": {"application/vnd.jupyter.widget-state+json": {}}})
    manager.save({"type": "notebook", "format": "json", "content": notebook}, "template.ipynb")
    saved = json.loads((tmp_path / "template.ipynb").read_text())
    assert saved["cells"][0]["outputs"] == [] and saved["cells"][0]["execution_count"] is None
    assert "".join(saved["cells"][1]["source"]) == "# kept" and "widgets" not in saved["metadata"]


def test_jupyter_checkpoints_are_ignored() -> None:
    ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q",
                              "notebooks/.ipynb_checkpoints/01_onboarding_eagle3-checkpoint.ipynb"])
    assert ignored.returncode == 0
