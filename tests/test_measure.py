"""tk.measure: one configuration, one journal step, on the simulator (a real HTTP server on loopback)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_process import free_port

import toolkit as tk
from toolkit.errors import ServerDied
from toolkit.moves.measure import measure
from toolkit.observe.equivalence import GreedyOutputs

BENCH = tk.Load(num_prompts=4, max_concurrency=2, input_len=16, output_len=16)


def _spec(**flags: object) -> tk.ServerSpec:
    return tk.ServerSpec.simulator(tp=2, port=free_port(), host="127.0.0.1", sim_startup_s=0.5, sim_warmup_s=0.2,
                                   **flags)


@pytest.mark.slow
def test_a_configuration_is_measured_shown_and_recorded_as_one_step(tmp_path: Path) -> None:
    journal = tk.Journal(tmp_path / "j.sqlite")
    shown = []
    m = measure(tk.Host.local(), _spec(), title="baseline", watch=shown.append,
                plan=tk.Plan(journal=journal, bench=BENCH, repeats=2, log_dir=str(tmp_path)))
    assert m.ok and len(m.runs) == 2 and m.summary["completed"] == 4
    assert m.time_to_ready_s is not None and "baseline: " in repr(m) and "over 2 run(s)" in repr(m)
    assert len(shown) == 1 and not shown[0].is_alive()  # shown while it ran, stopped on the way out
    steps = journal.steps()
    assert list(steps["title"]) == ["baseline"] and list(steps["status"]) == ["done"]
    assert list(steps["n_runs"]) == [2] and steps["ready"].iloc[0]


@pytest.mark.slow
def test_a_failed_start_is_a_step_with_its_evidence(tmp_path: Path) -> None:
    journal = tk.Journal(tmp_path / "j.sqlite")
    m = measure(tk.Host.local(), _spec(sim_fault="oom"), title="too big", check=False,
                plan=tk.Plan(journal=journal, bench=BENCH, log_dir=str(tmp_path)))
    assert not m.ok and isinstance(m.error, ServerDied) and not m.runs
    assert "failed (ServerDied" in repr(m)
    with pytest.raises(ServerDied):
        _ = m.result
    step = journal.steps().iloc[0]
    assert step["status"] == "failed" and "out of memory" in (step["error"] or "").lower() + str(step["evidence"]).lower()
    assert any("out of memory" in text.lower() for text in journal.log_lines()["text"])
    with pytest.raises(ServerDied):  # check=True (the default) raises once the step is stored
        measure(tk.Host.local(), _spec(sim_fault="oom"),
                plan=tk.Plan(journal=journal, bench=BENCH, log_dir=str(tmp_path)))
    assert list(journal.steps()["status"]) == ["failed", "failed"]


@pytest.mark.slow
def test_greedy_outputs_are_kept_and_a_later_configuration_is_checked_against_them(tmp_path: Path) -> None:
    """What notebook 01's hand-written measure() did: keep the baseline's greedy outputs, compare a change's."""
    journal = tk.Journal(tmp_path / "j.sqlite")
    host = tk.Host.local()
    base = measure(host, _spec(), title="baseline", greedy_tokens=12,
                   plan=tk.Plan(journal=journal, bench=BENCH, log_dir=str(tmp_path)))
    assert base.outputs is not None and base.equivalence is None
    assert base.outputs.label == "baseline" and base.outputs.max_tokens == 12 and not any(base.outputs.errors)
    assert len(base.outputs.prompts) == 6 and all(len(o) == 12 for o in base.outputs.outputs), base.outputs
    assert base.placement is not None and base.placement.kind == "host" and base.placement.pid

    same = measure(host, _spec(), title="same model", reference=base.outputs,
                   plan=tk.Plan(journal=journal, bench=BENCH, log_dir=str(tmp_path)))
    changed = measure(host, _spec(sim_fault="greedy-divergence"), title="changes tokens",
                      reference=base.outputs,
                      plan=tk.Plan(journal=journal, bench=BENCH, log_dir=str(tmp_path)))
    assert same.equivalence is not None and same.equivalence.holds, same.equivalence
    assert changed.equivalence is not None and not changed.equivalence.holds, changed.equivalence
    assert changed.equivalence.first_divergence is not None and "prompts identical" in repr(changed)
    assert changed.outputs is not None and changed.outputs.prompts == base.outputs.prompts

    assert changed.step is not None and changed.step.id == changed.step_id
    changed.step.set_verdict("confirmed", note="the fault changes greedy tokens")  # after the step ended
    checks = journal.metric_lines().query("kind == 'equivalence'").set_index("label")
    assert bool(checks.loc["same model", "holds"]) and not bool(checks.loc["changes tokens", "holds"])
    assert "baseline" not in checks.index  # a reference is kept, not compared
    steps = journal.steps().set_index("title")
    assert "output equivalence: changes tokens vs baseline" in steps.loc["changes tokens", "notes"]
    assert steps.loc["changes tokens", "verdict"] == "confirmed"


def test_a_reference_and_another_length_are_refused_before_launching(tmp_path: Path) -> None:
    reference = GreedyOutputs("base", ("p",), (("a",),), "token", 24)
    with pytest.raises(ValueError, match="differs from the reference's 24 tokens"):
        measure(tk.Host.local(), _spec(), reference=reference, greedy_tokens=12, plan=tk.Plan(bench=BENCH,
                                                                                              progress=False))
    with pytest.raises(ValueError, match="greedy_tokens must be >= 0"):
        measure(tk.Host.local(), _spec(), greedy_tokens=-1, plan=tk.Plan(bench=BENCH, progress=False))
