"""make-repo histories: the perf parameters change at commit K only, and the simulator follows the checkout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sim_process import SimProcess, measure_rate

from toolkit.sim import load_source_perf, make_repo
from toolkit.sim.latency import DecodeSetup, LatencyModel

pytestmark = pytest.mark.timeout(90)
READY = "The server is fired up and ready to roll!"


def checkout(repo: Path, sha: str) -> None:
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", sha], check=True)


def test_regression_appears_at_commit_k_and_stays(tmp_path: Path) -> None:
    repo = tmp_path / "sglang"
    commits = make_repo(repo, commits=6, regression_at=4)
    assert [c.index for c in commits] == [1, 2, 3, 4, 5, 6]
    assert len({c.sha for c in commits}) == 6 and "[Perf]" in commits[3].message
    steps = []
    for commit in commits:
        checkout(repo, commit.sha)
        steps.append(load_source_perf(repo).params.decode_step_ms)
    base = steps[0]
    for index, step in enumerate(steps, start=1):
        if index < 4:
            assert step == pytest.approx(base, rel=0.005)  # small harmless changes only
        else:
            assert step == pytest.approx(base * 1.2, rel=0.01)
    again = make_repo(tmp_path / "again", commits=6, regression_at=4)
    assert [c.sha for c in again] == [c.sha for c in commits]  # fixed authors and dates


def test_no_change_history_and_json_listing(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit.sim",
            "make-repo",
            str(tmp_path / "r"),
            "--commits",
            "4",
            "--no-change",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    listing = json.loads(done.stdout)
    assert [c["index"] for c in listing] == [1, 2, 3, 4] and all(len(c["sha"]) == 40 for c in listing)
    assert len({c["decode_step_ms"] for c in listing}) == 1
    log = subprocess.run(
        ["git", "-C", str(tmp_path / "r"), "log", "--format=%s"], capture_output=True, text=True
    )
    assert log.stdout.splitlines()[::-1] == [c["message"] for c in listing]
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit.sim",
            "make-repo",
            str(tmp_path / "x"),
            "--commits",
            "3",
            "--regression-at",
            "7",
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--regression-at must be between 2 and --commits (3)" in bad.stderr


def test_broken_commit_dies_with_import_error(tmp_path: Path) -> None:
    repo = tmp_path / "sglang"
    commits = make_repo(repo, commits=4, regression_at=4, broken_at=2)
    checkout(repo, commits[1].sha)
    done = subprocess.run(
        [sys.executable, "-m", "toolkit.sim", "--model-path", "m", "--source-dir", str(repo)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("Traceback (most recent call last):")
    assert f'File "{repo}/python/sglang/launch_server.py", line 7, in <module>' in done.stderr
    assert (
        "ImportError: cannot import name 'compute_dp_attention_world_info' from "
        "'sglang.srt.layers.dp_attention'" in done.stderr
    )
    checkout(repo, commits[2].sha)
    assert load_source_perf(repo).import_error is None  # J + 1 fixes it


def test_measured_rate_drops_at_the_regression(tmp_path: Path) -> None:
    repo = tmp_path / "sglang"
    commits = make_repo(repo, commits=4, regression_at=3)
    sims, expected = [], []
    for commit in (commits[1], commits[2]):  # K - 1 and K
        checkout(repo, commit.sha)
        expected.append(LatencyModel(load_source_perf(repo).params, DecodeSetup()).tokens_per_s())
        sim = SimProcess(["--model-path", "m", "--sim-startup-s", "0.5", "--source-dir", str(repo)])
        sim.wait_for("SIMULATED")  # the checkout is read before the first log line
        sims.append(sim)
    try:
        for sim in sims:
            sim.wait_for(READY)
        rates = [
            measure_rate(sim.port, rate, max_tokens=60) for sim, rate in zip(sims, expected, strict=True)
        ]
    finally:
        for sim in sims:
            sim.__exit__()
    assert rates[0][-1] == pytest.approx(expected[0], rel=0.05), rates
    assert rates[1][-1] == pytest.approx(expected[1], rel=0.05), rates
    assert rates[1][-1] < 0.88 * rates[0][-1]
