"""A/B tests of the simulator: a real difference is judged beyond noise, identical sides within it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import sim_process as testing  # noqa: E402

from toolkit.benchmark import BenchResult, Load, bench
from toolkit.errors import ServerDied
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.moves import compare, compare_flag
from toolkit.moves.envcheck import env_report
from toolkit.moves.plan import Plan
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec
from toolkit.views import plots as tk_plots

pytestmark = pytest.mark.timeout(90)
BENCH = Load(num_prompts=4, input_len=8, output_len=16, max_concurrency=1)
EAGLE = {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2, "--speculative-eagle-topk": 1,
         "--speculative-num-draft-tokens": 3}


def _base(port: int) -> ServerSpec:
    return ServerSpec.simulator(tp=2, port=port, host="127.0.0.1", python=sys.executable, sim_startup_s=0.3,
                                sim_warmup_s=0.05)


def _nothing_left(host: Host, pids: Any) -> bool:
    return not any(host.is_alive(int(pid)) for pid in pids)


@pytest.mark.ssh
def test_decode_vs_prefill_is_beyond_noise_and_confirms_the_hypothesis(ssh_host: Host, tmp_path: Path) -> None:
    eagle = _base(testing.free_port()).with_flags(EAGLE)
    journal = Journal(tmp_path / "ab.sqlite", investigation="attention mode")

    ab = compare_flag(ssh_host, eagle, "--speculative-attention-mode", "prefill", "decode",
                      kind="attention_mode",
                      hypothesis="verify in extend mode without CUDA graphs is the bottleneck",
                      plan=Plan(repeats=2, bench=BENCH, journal=journal, log_dir=str(tmp_path), progress=False))

    prefill, decode = "--speculative-attention-mode=prefill", "--speculative-attention-mode=decode"
    assert (ab.label_a, ab.label_b, ab.verdict, ab.journal_verdict) == (prefill, decode, "b_faster", "confirmed")
    assert ab.ratio > 1.5 and ab.comparison.ci_low > 0
    assert ab.summary_text.startswith(f"{decode} is {ab.ratio:.2f}x {prefill} on output tok/s (")
    assert ab.summary_text.endswith(f"2+2 runs): {decode} better beyond noise")
    print(f"\n{ab.summary_text}")
    frame = ab.frame
    assert list(frame["side"]) == ["a", "b", "b", "a"]  # counterbalanced against drift
    assert frame["server_pid"].nunique() == 4  # a fresh launch per side-round

    steps = journal.steps().set_index("title")
    a = steps.loc[f"--speculative-attention-mode: decode vs prefill [A: {prefill}]"]
    b = steps.loc[f"--speculative-attention-mode: decode vs prefill [B: {decode}]"]
    assert (a["status"], b["status"], b["verdict"]) == ("done", "done", "confirmed") and pd.isna(a["verdict"])
    assert b["hypothesis"].startswith("verify in extend mode") and b["verdict_note"] == ab.summary_text
    assert f"step {b['step_id']}" in a["notes"] and a["n_runs"] == b["n_runs"] == 2
    runs = journal.results(wide=True)
    assert sorted(runs["flag:--speculative-attention-mode"]) == ["decode", "decode", "prefill", "prefill"]

    png = tmp_path / "ab.png"
    tk_plots.ab(ab).savefig(png, dpi=72)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 3_000
    assert "-> confirmed (expected b_faster)" in repr(ab)
    assert _nothing_left(ssh_host, frame["server_pid"])


def test_identical_specs_are_within_noise(local_host: Host, tmp_path: Path) -> None:
    spec = _base(testing.free_port())
    journal = Journal(tmp_path / "same.sqlite", investigation="noise")

    ab = compare(local_host, spec, spec, launches="reused",
                 plan=Plan(repeats=3, bench=BENCH, journal=journal, log_dir=str(tmp_path), progress=False))

    assert (ab.label_a, ab.label_b, ab.verdict, ab.journal_verdict) == ("A", "B", "within_noise", "inconclusive")
    assert ": within noise (" in ab.summary_text and abs(ab.ratio - 1) < 0.05
    assert list(ab.frame["side"]) == ["a", "a", "a", "b", "b", "b"]
    assert ab.frame["server_pid"].nunique() == 2  # reuse_launch: one server per side
    verdicts = journal.steps()["verdict"]
    assert pd.isna(verdicts.iloc[0]) and verdicts.iloc[1] == "inconclusive"
    assert _nothing_left(local_host, ab.frame["server_pid"])
    with pytest.raises(ValueError, match="launches must be one of 'interleaved', 'in_blocks', 'reused'"):
        compare(local_host, spec, spec, launches="both")  # type: ignore[arg-type]


def test_compare_flag_on_an_environment_variable_reaches_every_rank(local_host: Host, tmp_path: Path) -> None:
    spec = _base(testing.free_port())
    seen: dict[str, set[str | None]] = {}
    processes: dict[str, int] = {}

    def bench_and_look(server: Server) -> BenchResult:
        # Read as the toolkit does: a renamed rank's /proc environ is its title's memory (setproctitle),
        # so a variable's absence there is decided by env_report from a sibling, its parent or NCCL's echo.
        frame = env_report(server, ["NCCL_ALGO"]).frame
        seen[server.spec.describe()] = {a if isinstance(a, str) else None for a in frame["actual"]}
        processes[server.spec.describe()] = frame["pid"].nunique()
        return bench(server, BENCH, progress=False)

    ab = compare_flag(local_host, spec, "env:NCCL_ALGO", None, "Tree", expect=None,
                      plan=Plan(repeats=1, bench=bench_and_look, log_dir=str(tmp_path), progress=False))

    assert (ab.label_a, ab.label_b) == ("without NCCL_ALGO", "NCCL_ALGO=Tree")
    assert dict(ab.spec_b.env) == {"NCCL_ALGO": "Tree"} and not dict(ab.spec_a.env)
    assert sorted(seen.values(), key=lambda values: None in values) == [{"Tree"}, {None}]
    assert list(processes.values()) == [3, 3]  # the server and both TP workers, on each side
    assert ab.verdict == "within_noise" and "one run per side: noise unknown" in ab.summary_text
    assert ab.journal_verdict is None and ab.step_ids == (None, None)


def test_a_side_that_fails_stops_the_comparison_and_both_steps_say_why(local_host: Host, tmp_path: Path) -> None:
    spec = _base(testing.free_port())
    journal = Journal(tmp_path / "fail.sqlite", investigation="fail")

    with pytest.raises(ServerDied) as raised:
        compare_flag(local_host, spec, "--sim-fault", None, "oom",
                     plan=Plan(repeats=2, bench=BENCH, journal=journal, log_dir=str(tmp_path), progress=False))

    assert any("compare() stopped after 1+0 runs, at side B (--sim-fault=oom)" in note for note in raised.value.__notes__)
    a, b = journal.steps().itertuples()
    assert (a.status, b.status) == ("failed", "failed")
    assert a.error.startswith("the A/B comparison stopped: side B (--sim-fault=oom) failed with ServerDied")
    assert b.error.startswith("ServerDied") and b.n_runs == 0 and a.n_runs == 1
    assert journal.log_lines(b.step_id)["text"].str.contains("CUDA out of memory").any()
