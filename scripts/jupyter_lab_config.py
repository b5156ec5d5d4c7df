"""``make lab``'s Jupyter configuration: the notebooks in ``notebooks/`` are saved without their outputs.

They are tracked templates. Saving one after a run wrote its outputs, widget state and execution
counts into the repository (issue 28): a diff of thousands of lines per save, and executed
output that reads as if it were the template. The executed record of a run is the copy
``make demo`` and ``papermill`` write under ``out/`` (ignored by git), not the template.
A notebook of your own that should keep its outputs belongs outside ``notebooks/``.
"""

from __future__ import annotations

from typing import Any


def strip_outputs(model: dict[str, Any], **_: Any) -> None:
    """Jupyter's pre-save hook: empty every code cell's outputs and count, drop saved widget state."""
    if model.get("type") != "notebook":
        return
    content = model.get("content") or {}
    for cell in content.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    content.get("metadata", {}).pop("widgets", None)


if "get_config" in globals():  # loaded by `jupyter lab --config=scripts/jupyter_lab_config.py`
    c = get_config()  # type: ignore[name-defined]  # noqa: F821
    c.ContentsManager.pre_save_hook = strip_outputs
