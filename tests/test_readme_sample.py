"""The README's notebook sample runs as written, on the simulator (issue 28: it used `server` and `step` after
their `with` had closed them, and built `watch` without using it).

Only what ties it to a GPU cluster is replaced: the host (this machine), the spec (the simulator imitating
SGLang), the sizes (a few short prompts) and the paths (a temporary folder). Every other line is executed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import matplotlib
import pytest
import sim_process as testing

matplotlib.use("Agg")
REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _sample() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## In a notebook", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def _on_this_machine(code: str, tmp_path: Path, port: int) -> str:
    spec = (f"tk.ServerSpec.simulator(tp=2, port={port}, host='127.0.0.1', python={sys.executable!r}, "
            "sim_startup_s=0.3, sim_warmup_s=0.05)")
    replacements = {
        'tk.Host("gpu-a", user="root")': "tk.Host.local()",
        'tk.ServerSpec.sglang("moonshotai/Kimi-K2.5", tp=8, port=30000)': spec,
        '"journals/eagle3.sqlite"': repr(str(tmp_path / "eagle3.sqlite")),
        '"out/"': repr(str(tmp_path / "out")),
        "num_prompts=32, max_concurrency=1, input_len=1024, output_len=256": "num_prompts=3, input_len=8, output_len=8",
        "timeout_s=900": "timeout_s=60",
        "plan.replace(repeats=3)": "plan.replace(repeats=2)",
    }
    for old, new in replacements.items():
        assert old in code, f"the README sample no longer has {old!r}: update this test's replacements"
        code = code.replace(old, new)
    return code


def test_the_readme_sample_runs_as_written(tmp_path: Path) -> None:
    code = _on_this_machine(_sample(), tmp_path, testing.free_port())
    shown: list[object] = []
    namespace = {"display": lambda *objects: shown.extend(objects)}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the sample is the test's subject
    assert len(shown) == 2  # the panel and the log view
    assert (tmp_path / "out" / "postmortem.html").is_file()
    journal = namespace["journal"]
    steps = journal.steps()  # type: ignore[attr-defined]
    assert list(steps["kind"][:2]) == ["baseline", "flag_change"] and (steps["status"] == "done").all()
