"""The post-mortem of a real simulated investigation, read as its reviewer would.

One journal from real launches of the simulator on this machine: an A/B test of the verify
mode, a comparison of two commits from temporary worktrees, and a start that dies of an OOM.
The rendered Markdown must quote the lines that decided (ready lines, the fatal line, the
metric fields that differ) and nothing the toolkit or a benign rule explains; give every
hypothesis a verdict; reproduce commit steps from a checkout, never from a deleted worktree.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import sim_process as testing

from toolkit.benchmark import Load
from toolkit.errors import ToolkitError
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.logs import classify_lines
from toolkit.logs.caused import is_toolkit_request
from toolkit.logs.rules import Verdict
from toolkit.moves import compare_flag
from toolkit.moves.bisect.worktrees import compare_commits
from toolkit.moves.plan import Plan
from toolkit.moves.trial import make_bench_call, run_launch
from toolkit.report import postmortem as report
from toolkit.server.spec import ServerSpec
from toolkit.sim.repo import make_repo

pytestmark = pytest.mark.timeout(240)
FAKE_TOKEN = "fake0token0for0tests"
BENCH = Load(num_prompts=3, input_len=8, output_len=24, max_concurrency=1)
EAGLE = {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2, "--speculative-eagle-topk": 1,
         "--speculative-num-draft-tokens": 3}


def _base(port: int) -> ServerSpec:
    return ServerSpec.simulator(tp=2, port=port, host="127.0.0.1", python=sys.executable, sim_startup_s=0.3,
                                sim_warmup_s=0.05)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Journal, str, list[str]]:
    root = tmp_path_factory.mktemp("report-sim")
    host = Host.local()
    journal = Journal(root / "sim.sqlite", investigation="EAGLE-3 verify mode (simulated)")
    base = _base(testing.free_port())
    compare_flag(host, base.with_flags(EAGLE), "--speculative-attention-mode", "prefill", "decode",
                 kind="attention_mode",
                 hypothesis="verify in extend mode without CUDA graphs is the bottleneck",
                 plan=Plan(repeats=2, bench=BENCH, journal=journal, log_dir=str(root), progress=False))
    repo = root / "sim-source"
    commits = make_repo(repo, 3, None, no_change=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", f"https://ci-bot:{FAKE_TOKEN}@git.example/team/"
                    "sim-source.git"], check=True)  # a checkout cloned with a token keeps it in its origin
    compare_commits(host, str(repo), commits[0].sha, commits[-1].sha,
                    spec=base.with_flags({"--source-dir": str(repo)}),
                    plan=Plan(repeats=2, bench=BENCH, journal=journal, log_dir=str(root), progress=False))
    oom = base.with_flags({"--sim-fault": "oom"})
    with pytest.raises(ToolkitError), journal.step("flag_change", "start with an OOM", spec=oom, host=host,
                                                   hypothesis="the server starts") as step:
        run_launch(host, oom, step=step, benches=1, bench_call=make_bench_call(BENCH, progress=False), timeout_s=60,
                   log_dir=str(root))
    paths = report.write(journal, root / "out")
    return journal, paths.markdown.read_text(encoding="utf-8"), [c.message for c in commits]


def _section(markdown: str, heading: str) -> str:
    start = markdown.index(f"\n## {heading}")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:] if end < 0 else markdown[start:end]


def _code_lines(section: str) -> list[str]:
    return [line for block in re.findall(r"```[a-z]*\n(.*?)\n```", section, re.S) for line in block.splitlines()]


def test_decisive_lines_hold_no_benign_or_probe_line(rendered: tuple[Journal, str, list[str]]) -> None:
    journal, markdown, _ = rendered
    quoted = _code_lines(_section(markdown, "Decisive log lines"))
    assert quoted, "the section quotes no line at all"
    verdicts = {e.raw.strip(): e.verdict for e in classify_lines(quoted, engine="sglang")}
    assert not [line for line, verdict in verdicts.items() if verdict is Verdict.BENIGN]
    assert not [line for line in quoted if is_toolkit_request(line)]
    # The journal did record benign lines (every rank's glmasr import error): they are counted, not quoted.
    assert (journal.log_lines()["verdict"] == "benign").any()
    assert "were judged benign (sglang_ignore_import_error" in markdown
    # What decided: the ready lines, the OOM's fatal line, and the decode lines' cuda graph per configuration.
    assert Verdict.READY in verdicts.values() and Verdict.FATAL in verdicts.values()
    assert "`cuda graph: False`" in markdown and "`cuda graph: True`" in markdown
    assert "`accept len: " in markdown


def test_every_step_with_a_hypothesis_has_a_verdict(rendered: tuple[Journal, str, list[str]]) -> None:
    journal, markdown, _ = rendered
    steps = journal.steps()
    with_hypothesis = steps[steps["hypothesis"].notna()]
    assert len(with_hypothesis) == 3
    commit_step = with_hypothesis[with_hypothesis["kind"] == "commit"].iloc[0]
    assert commit_step["verdict"] == "refuted"  # two commits of the same code: "the commit changed it" is refuted
    details = _section(markdown, "Steps")
    for row in with_hypothesis.itertuples():
        heading = next(line for line in details.splitlines() if line.startswith(f"### #{row.seq} "))
        assert heading.endswith(("confirmed", "refuted", "inconclusive", "failed")), heading
    assert "no verdict" not in markdown


def test_reproduce_checks_commits_out_and_names_no_temporary_worktree(rendered: tuple[Journal, str, list[str]]) -> None:
    journal, markdown, _ = rendered
    assert "toolkit-worktree" not in markdown
    steps = journal.steps()
    section = _section(markdown, "How to reproduce each step")
    for row in steps[steps["kind"] == "commit"].itertuples():
        block = section[section.index(f"### #{row.seq} "):]
        script = _code_lines(block[: block.find("\n### ", 1) if "\n### " in block[1:] else None])
        assert script[:3] == ["git clone https://git.example/team/sim-source.git sim-source", 'REPO="$PWD/sim-source"',
                              f'git -C "$REPO" checkout {row.spec["commit"]}'], script  # the checkout it came from
        assert any('--source-dir "$REPO"' in line for line in script)
    assert FAKE_TOKEN not in markdown and "ci-bot" not in markdown
    for file in journal.path.parent.glob(f"{journal.path.name}*"):  # the journal never held the token
        assert FAKE_TOKEN.encode() not in file.read_bytes(), file.name
    lines = _code_lines(section)
    assert all(len(line) < 120 for line in lines)  # wrapped one flag a line, never cut
    assert any(line.strip().startswith("--speculative-attention-mode decode") for line in lines)


def test_labels_and_summary_name_the_flag_and_this_runs_numbers(rendered: tuple[Journal, str, list[str]]) -> None:
    journal, markdown, subjects = rendered
    labels = set(journal.results(wide=True)["label"])
    assert {"--speculative-attention-mode=prefill", "--speculative-attention-mode=decode"} <= labels
    assert "| prefill |" not in markdown and "| decode |" not in markdown
    summary = _section(markdown, "Summary")
    results = journal.results(wide=True)
    decode_runs = results[results["label"] == "--speculative-attention-mode=decode"]
    decode = decode_runs["output_throughput"].mean()
    # issue 28: the mean with its 95 % CI, and the runs and requests behind it (this run's, not the seed's)
    requests = int(decode_runs["completed"].sum())
    measured = (rf"{decode:.1f} ± \d+\.\d output tok/s "
                rf"\(95 % CI over {len(decode_runs)} runs, {requests} requests\)")
    assert len(decode_runs) >= 2 and re.search(measured, summary), (measured, summary)
    for jargon in ("noise unknown", "run(s)", "Baseline (", "59-61", "82-83"):
        assert jargon not in summary
    # A commit subject shortened in a title ends with a whole word of it, never mid-word ("source t").
    words = {word for subject in subjects for word in subject.split()}
    cut = [m for line in markdown.splitlines() if line.startswith("#") for m in re.findall(r"(\S+)…", line)]
    assert cut and all(word in words for word in cut), cut
