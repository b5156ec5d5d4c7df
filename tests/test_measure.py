"""tk.measure: one configuration, one journal step, on the simulator (a real HTTP server on loopback)."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolkit as tk
from toolkit.errors import ServerDied
from toolkit.moves.measure import measure
from toolkit.sim.testing import free_port

BENCH = {"num_prompts": 4, "max_concurrency": 2, "input_len": 16, "output_len": 16, "progress": False}


def _spec(**flags: object) -> tk.ServerSpec:
    return tk.ServerSpec.simulator(tp=2, port=free_port(), host="127.0.0.1", sim_startup_s=0.5, sim_warmup_s=0.2,
                                   **flags)


@pytest.mark.slow
def test_a_configuration_is_measured_shown_and_recorded_as_one_step(tmp_path: Path) -> None:
    journal = tk.Journal(tmp_path / "j.sqlite")
    shown = []
    m = measure(tk.Host.local(), _spec(), journal=journal, bench=BENCH, title="baseline", repeats=2,
                log_dir=str(tmp_path), watch=shown.append)
    assert m.ok and len(m.runs) == 2 and m.summary["completed"] == 4
    assert m.time_to_ready_s is not None and "baseline: " in repr(m) and "over 2 run(s)" in repr(m)
    assert len(shown) == 1 and not shown[0].is_alive()  # shown while it ran, stopped on the way out
    steps = journal.steps()
    assert list(steps["title"]) == ["baseline"] and list(steps["status"]) == ["done"]
    assert list(steps["n_runs"]) == [2] and steps["ready"].iloc[0]


@pytest.mark.slow
def test_a_failed_start_is_a_step_with_its_evidence(tmp_path: Path) -> None:
    journal = tk.Journal(tmp_path / "j.sqlite")
    m = measure(tk.Host.local(), _spec(sim_fault="oom"), journal=journal, bench=BENCH, title="too big",
                log_dir=str(tmp_path), check=False)
    assert not m.ok and isinstance(m.error, ServerDied) and not m.runs
    assert "failed (ServerDied" in repr(m)
    with pytest.raises(ServerDied):
        _ = m.result
    step = journal.steps().iloc[0]
    assert step["status"] == "failed" and "out of memory" in (step["error"] or "").lower() + str(step["evidence"]).lower()
    assert any("out of memory" in text.lower() for text in journal.log_lines()["text"])
    with pytest.raises(ServerDied):  # check=True (the default) raises once the step is stored
        measure(tk.Host.local(), _spec(sim_fault="oom"), journal=journal, bench=BENCH, log_dir=str(tmp_path))
    assert list(journal.steps()["status"]) == ["failed", "failed"]
