"""tk.diagnose against the simulator: the seed's answer found, identical sides within noise, vLLM's --enforce-eager."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sim_process as testing

from toolkit.benchmark import Load
from toolkit.errors import ServerDied
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.moves import compare_flag
from toolkit.moves.diagnose import diagnose, diagnose_commits, load_diagnosis
from toolkit.moves.plan import Plan
from toolkit.report import postmortem
from toolkit.server.spec import ServerSpec

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]
BENCH = Load(num_prompts=3, input_len=8, output_len=24, max_concurrency=1)
EAGLE = {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2, "--speculative-eagle-topk": 1,
         "--speculative-num-draft-tokens": 3}


def _base(engine: str = "sglang") -> ServerSpec:
    return ServerSpec.simulator(engine, tp=2 if engine == "sglang" else 1, port=testing.free_port(), host="127.0.0.1",
                                python=sys.executable, sim_startup_s=0.3, sim_warmup_s=0.05)


def test_the_seed_top_reason_is_the_verify_outside_cuda_graphs(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "seed.sqlite", investigation="EAGLE-3 slower than plain decoding")
    base = _base()
    eagle = base.with_flags(EAGLE)

    diagnosis = diagnose(Host.local(), base, eagle, env=("NCCL_ALGO", "NCCL_CUMEM_ENABLE"),
                         plan=Plan(repeats=2, bench=BENCH, journal=journal, progress=False))
    print(f"\n{diagnosis.text()}")

    assert diagnosis.beyond_noise and diagnosis.gap.slow < diagnosis.gap.fast
    top = diagnosis.reasons[0]
    assert top.topic == "cuda_graphs" and top.confidence == "high"
    assert top.title == "the speculative verify step runs outside CUDA graphs on the slow side (launch-bound)"
    assert {"log_metric", "profile"} <= set(top.kinds)  # the log's `cuda graph: False` and the profile, both
    assert any("cuda graph: False" in line for line in top.evidence)
    assert any("100% of its GPU time outside CUDA graphs" in d.slow and "verify" in d.slow for d in top.differences)
    proposal = diagnosis.proposal(1)
    assert proposal is not None and proposal.flag == "--speculative-attention-mode" and proposal.values[1] == "decode"
    ruled_out = {r.topic: r for r in diagnosis.reasons if r.ruled_out}
    assert {"environment", "code"} <= set(ruled_out)  # the seed's NCCL and git-pull suspects
    assert diagnosis.reasons.index(ruled_out["environment"]) > diagnosis.reasons.index(top)

    # one journal step: both sides' runs, the profiles and the record the post-mortem draws
    steps = journal.steps()
    assert list(steps["kind"]) == ["diagnosis"]
    step = steps.iloc[0]
    assert step["n_runs"] == 4 and "profile: " in step["notes"] and "diagnosis: " in step["notes"]
    assert "[REDACTED]" not in step["notes"]
    # the sides are named by what sets them apart, not by the flags they share
    assert step["title"] == "diagnosis: why is sim EAGLE3 steps=2 topk=1 draft-tokens=3 slower than sim baseline?"
    assert set(journal.results(wide=True)["label"]) == {"fast: sim baseline", "slow: sim EAGLE3 steps=2 topk=1 draft-tokens=3"}
    record = load_diagnosis(tmp_path / "seed.diagnoses" / f"step-{diagnosis.step_id}")
    assert record["reasons"][0]["topic"] == "cuda_graphs"

    # the proposal tested by the existing move links back to the diagnosis, and the post-mortem says so
    compare_flag(Host.local(), eagle, "--speculative-attention-mode", "prefill", "decode",
                 hypothesis=diagnosis.hypothesis(1),
                 plan=Plan(repeats=2, bench=BENCH, journal=journal, progress=False))
    report = postmortem.write(journal, tmp_path / "report")
    text = report.markdown.read_text(encoding="utf-8")
    assert "## Diagnoses: why the slow side is slow" in text
    assert "- reason 1 tested in step #3 --speculative-attention-mode: decode vs prefill" in text
    assert "verdict: confirmed: --speculative-attention-mode=decode is " in text


def test_two_identical_configurations_give_no_difference_beyond_noise(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "same.sqlite", investigation="identical")
    base = _base()

    diagnosis = diagnose(Host.local(), base, base, env=(),
                         plan=Plan(repeats=3, bench=BENCH, journal=journal, progress=False))

    assert not diagnosis.beyond_noise and diagnosis.reasons == () and diagnosis.proposals == ()
    assert diagnosis.summary_text.startswith("no difference beyond noise between fast: ")
    assert "profile" not in diagnosis.costs_s  # it stopped there: nothing was profiled
    notes = journal.steps().iloc[0]["notes"]
    assert "no difference beyond noise" in notes and "profile: " not in notes


def test_vllm_enforce_eager_is_named_from_the_resolved_config_and_the_profile(tmp_path: Path) -> None:
    base = _base("vllm")

    diagnosis = diagnose(Host.local(), base, base.with_flags({"--enforce-eager": True}), env=(),
                         plan=Plan(repeats=2, bench=BENCH, progress=False))

    top = diagnosis.reasons[0]
    assert top.topic == "cuda_graphs" and {"config", "profile"} <= set(top.kinds)
    config = next(d for d in top.differences if d.kind == "config")
    assert (config.name, config.fast, config.slow) == ("enforce_eager", "False", "True")
    assert any("enforce_eager=True" in line for line in config.evidence)  # the engine's own config line
    proposal = diagnosis.proposal(1)
    assert proposal is not None and proposal.flag == "--enforce-eager" and proposal.values == (True, None)


def test_a_side_that_dies_fails_the_diagnosis_step_with_its_evidence(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "dies.sqlite", investigation="a side that dies")
    base = _base()

    with pytest.raises(ServerDied):
        diagnose(Host.local(), base, base.with_flags({"--sim-fault": "oom"}), env=(),
                 plan=Plan(repeats=2, bench=BENCH, journal=journal, progress=False))

    step = journal.steps().iloc[0]
    assert (step["kind"], step["status"]) == ("diagnosis", "failed") and "ServerDied" in step["error"]
    assert step["n_runs"] == 1  # the fast side's finished run is kept with the failure


def test_one_repeat_is_refused_before_any_launch() -> None:
    with pytest.raises(ValueError, match="repeats must be >= 2: a diagnosis needs the noise of each side"):
        diagnose(Host.local(), _base(), _base(), plan=Plan(repeats=1))


@pytest.mark.timeout(900)  # two worktrees, up to three rounds, two profiled launches
def test_two_commits_with_a_regression_blame_the_code_and_propose_a_bisection(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    made = subprocess.run([sys.executable, "-m", "toolkit.sim", "make-repo", str(repo), "--commits", "4",
                           "--regression-at", "3", "--json"], capture_output=True, text=True, check=True)
    commits = json.loads(made.stdout)
    spec = _base().with_flags({"--source-dir": str(repo)})

    diagnosis = diagnose_commits(Host.local(), str(repo), commits[0]["sha"], commits[-1]["sha"], spec=spec,
                                 env=(), plan=Plan(repeats=2, bench=BENCH, progress=False))

    assert diagnosis.beyond_noise, diagnosis.summary_text
    top = diagnosis.reasons[0]
    assert top.topic == "code" and "profile" in top.kinds, diagnosis.text()
    assert any("git diff --name-only" in line for line in top.evidence)
    proposal = diagnosis.proposal(1)
    assert proposal is not None and proposal.call.startswith(f"tk.perf_bisect(host, {str(repo)!r}, "
                                                             f"good={commits[0]['sha']!r}")
