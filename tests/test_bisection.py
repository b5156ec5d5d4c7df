"""The bisection planner, git's words, and the noise-aware judge.

git outputs below were captured from git 2.39 on a 12-commit repository; the
``real git`` tests at the bottom drive a throwaway repository with ``git bisect`` to
check that the planner and git agree.
"""

from __future__ import annotations

import doctest
import math
import os
import statistics
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.host.host import Host
from toolkit.moves import bisect as bisection_module
from toolkit.moves.bisect import (
    BisectLogEntry,
    BisectState,
    Noise,
    assess,
    expected_probes,
    expected_rounds,
    judge,
    parse_bisect_log,
    parse_bisect_step,
    parse_rev_list,
)
from toolkit.moves.bisect.checkout import GitCheckout
from toolkit.moves.bisect.judgement import pool_noise, standard_error
from toolkit.moves.bisect.ledger import write_ledger

C = [f"c{i}" for i in range(1, 9)]  # c1..c8, oldest first; c8 is the known bad


def test_docstring_examples_run() -> None:
    assert doctest.testmod(bisection_module).failed == 0


@pytest.mark.parametrize(
    ("n", "probes"), [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (100, 7), (128, 7), (129, 8)]
)
def test_expected_probes(n: int, probes: int) -> None:
    assert expected_probes(n) == probes


def test_expected_probes_needs_a_commit() -> None:
    with pytest.raises(ValueError, match="at least one commit"):
        expected_probes(0)


# --- the planner --------------------------------------------------------------------------


def run(state: BisectState, first_bad: int, skipped: frozenset[int] = frozenset()) -> tuple[BisectState, int]:
    probes = 0
    while (commit := state.next_commit()) is not None:
        index = state.commits.index(commit)
        verdict = "skip" if index in skipped else ("bad" if index >= first_bad else "good")
        state = state.apply(commit, verdict)
        probes += 1
    return state, probes


def test_a_plain_bisection_halves_each_time() -> None:
    state = BisectState.start(C, good="c0")
    assert (state.next_commit(), state.remaining, state.probes_left) == ("c4", 8, 3)
    state = state.apply("c4", "good")
    assert state.next_commit() == "c6"
    state = state.apply("c6", "bad").apply("c5", "bad")
    assert state.done and state.next_commit() is None
    outcome = state.outcome()
    assert (outcome.first_bad, outcome.last_good, outcome.message) == (
        "c5",
        "c4",
        "c5 is the first bad commit",
    )


def test_a_skipped_midpoint_moves_to_the_nearest_untested_commit() -> None:
    state = BisectState.start(C).apply("c4", "skip")
    assert state.next_commit() == "c3"  # c3 and c5 are equally near: the older one
    assert state.apply("c3", "skip").next_commit() == "c5"


def test_only_skipped_commits_left_is_reported_like_git() -> None:
    state = (
        BisectState.start(C, good="c0")
        .apply("c2", "good")
        .apply("c5", "bad")
        .apply("c3", "skip")
        .apply("c4", "skip")
    )
    outcome = state.outcome()
    assert state.done and outcome.first_bad is None
    assert outcome.candidates == ("c3", "c4", "c5")
    assert outcome.message == (
        "only skipped commits left between c2 and c5: the first bad commit could be any of c3, c4, c5"
    )


def test_outcome_while_running_names_the_next_probe() -> None:
    assert BisectState.start(C, good="c0").outcome().message == (
        "8 candidates left between c0 and c8; next: c4 (about 3 more probes)"
    )


def test_a_single_commit_is_its_own_answer() -> None:
    state = BisectState.start(["abc123"])
    assert state.done and state.next_commit() is None and state.outcome().first_bad == "abc123"


def test_a_retry_replaces_a_skip() -> None:
    state = BisectState.start(C).apply("c4", "skip").apply("c4", "good")
    assert state.verdicts == {"c4": "good"} and state.next_commit() == "c6"


def test_abbreviated_commits_resolve() -> None:
    state = BisectState.start(["1a2b3c4d5e", "1a2f000000", "9f8e7d6c5b"])
    assert state.apply("1a2b", "good").verdicts == {"1a2b3c4d5e": "good"}


@pytest.mark.parametrize(
    ("apply", "message"),
    [
        (
            lambda s: s.apply("c6", "good").apply("c3", "bad"),
            "c6 was judged good but the older c3 was judged bad: the regression is not monotonic",
        ),
        (lambda s: s.apply("c9", "good"), "c9 is not between c0 and c8"),
        (lambda s: s.apply("c", "good"), "c is ambiguous: it could be c1, c2"),
        (lambda s: s.apply("c4", "meh"), "verdict must be one of good, bad, skip; got 'meh'"),
        (lambda s: s.apply("c8", "good"), "c8 was judged good but the older c8 was judged bad"),
    ],
)
def test_bad_input_is_refused_with_a_sentence(apply, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        apply(BisectState.start(C, good="c0"))


def test_an_empty_or_repeating_range_is_refused() -> None:
    with pytest.raises(ValueError, match="nothing to bisect"):
        BisectState.start([])
    with pytest.raises(ValueError, match="repeats a commit"):
        BisectState.start(["a1", "a1"])


def test_str_and_frame() -> None:
    state = BisectState.start(C, good="c0").apply("c4", "good").apply("c6", "skip")
    assert str(state) == (
        "bisecting 8 commits: 2 probed (1 good, 0 bad, 1 skipped); "
        "4 candidates left between c4 and c8; next: c5 (about 2 more probes)"
    )
    frame = state.to_frame()
    assert list(frame.columns) == ["position", "commit", "verdict", "candidate"]
    assert frame["candidate"].tolist() == [False] * 4 + [True] * 4


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_without_skips_the_first_bad_commit_is_found_within_log2_probes(case: tuple[int, int]) -> None:
    n, first_bad = case
    state, probes = run(BisectState.start([f"{i:07x}" for i in range(n)]), first_bad)
    assert state.outcome().first_bad == f"{first_bad:07x}"
    assert probes <= expected_probes(n) <= math.ceil(math.log2(n)) + 1


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 200).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.integers(0, n - 1),
            st.frozensets(st.integers(0, n - 2), max_size=n) if n > 1 else st.just(frozenset()),
        )
    )
)
def test_with_skips_the_answer_is_right_or_the_ambiguous_range_is(
    case: tuple[int, int, frozenset[int]],
) -> None:
    n, first_bad, skipped = case
    commits = [f"{i:07x}" for i in range(n)]
    state, probes = run(BisectState.start(commits), first_bad, skipped)
    outcome = state.outcome()
    assert probes <= n - 1
    if outcome.first_bad is not None:
        assert outcome.first_bad == commits[first_bad]
    else:
        candidates = [commits.index(c) for c in outcome.candidates]
        assert first_bad in candidates
        assert candidates == list(range(candidates[0], candidates[-1] + 1))
        assert all(i in skipped for i in candidates[:-1]) and candidates[-1] not in skipped
        assert "only skipped commits left" in outcome.message


def run_rounds(state: BisectState, hosts: int, first_bad: int,
               skipped: frozenset[int] = frozenset()) -> tuple[BisectState, int]:
    """A k-ary bisection: each round judges ``hosts`` commits side by side."""
    rounds = 0
    while picks := state.next_commits(hosts):
        assert len(set(picks)) == len(picks) and all(state.verdicts.get(c) is None for c in picks)
        for commit in picks:
            index = state.commits.index(commit)
            state = state.apply(commit, "skip" if index in skipped else ("bad" if index >= first_bad else "good"))
        rounds += 1
    return state, rounds


@pytest.mark.parametrize(("n", "hosts", "rounds"), [(1, 3, 0), (2, 1, 1), (15, 1, 4), (15, 3, 2), (63, 3, 3),
                                                     (1023, 1, 10), (1023, 2, 7), (1023, 3, 5), (1023, 8, 4)])
def test_expected_rounds_is_log_base_hosts_plus_one(n: int, hosts: int, rounds: int) -> None:
    assert expected_rounds(n, hosts) == rounds == math.ceil(round(math.log(n, hosts + 1), 9))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 1100).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1), st.integers(1, 8))))
def test_k_ary_rounds_find_what_a_binary_bisect_finds_in_log_k_plus_1_rounds(case: tuple[int, int, int]) -> None:
    n, first_bad, hosts = case
    commits = [f"{i:07x}" for i in range(n)]
    state, rounds = run_rounds(BisectState.start(commits), hosts, first_bad)
    binary, _ = run(BisectState.start(commits), first_bad)
    assert state.outcome().first_bad == binary.outcome().first_bad == commits[first_bad]
    assert rounds <= expected_rounds(n, hosts)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(2, 300).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n - 1), st.frozensets(st.integers(0, n - 2), max_size=n),
                            st.integers(1, 5))
    )
)
def test_k_ary_rounds_with_skips_give_the_answer_or_the_ambiguous_range(
    case: tuple[int, int, frozenset[int], int],
) -> None:
    n, first_bad, skipped, hosts = case
    commits = [f"{i:07x}" for i in range(n)]
    state, _ = run_rounds(BisectState.start(commits), hosts, first_bad, skipped)
    binary, _ = run(BisectState.start(commits), first_bad, skipped)
    outcome = state.outcome()
    if outcome.first_bad is not None:
        assert outcome.first_bad == commits[first_bad]
    else:
        assert commits[first_bad] in outcome.candidates and "only skipped commits left" in outcome.message
    if binary.outcome().first_bad is not None:  # what binary pins down despite the skips, k-ary does too
        assert outcome.first_bad == binary.outcome().first_bad


def test_next_commits_spread_over_the_range_and_route_around_skips_and_busy_ones() -> None:
    state = BisectState.start([f"c{i}" for i in range(1, 16)])  # c15 is the known bad
    assert state.next_commits(1) == (state.next_commit(),) == ("c8",)
    assert state.next_commits(3) == ("c4", "c8", "c12")
    assert state.next_commits(3, busy=["c8"]) == ("c4", "c7", "c12")
    assert state.apply("c8", "skip").next_commits(3) == ("c4", "c7", "c12")
    narrow = state.apply("c12", "good").apply("c14", "bad")
    assert narrow.next_commits(5) == ("c13",)
    with pytest.raises(ValueError, match="k must be >= 1"):
        state.next_commits(0)


# --- git's words ------------------------------------------------------------------------------

SHA6 = "51956aa9a90e0e696ec041da8fd80f7d5836ed8f"
SHA3 = "be04e0ed260794b6b702854305a29b0983836783"
SHA4 = "844a4d3a96237cbaae322ed3cafdd2131a389857"
REAL_LOG = f"""\
# bad: [017032409e37da0985c2ad9f919e9ec15ee01d19] commit 12
# good: [3b0a626be1ebd95cd30661fb68909313c1b2f3e9] commit 1
git bisect start 'HEAD' '3b0a626be1ebd95cd30661fb68909313c1b2f3e9'
# bad: [{SHA6}] commit 6
git bisect bad {SHA6}
# skip: [{SHA3}] commit 3
git bisect skip {SHA3}
# good: [{SHA4}] commit 4
git bisect good {SHA4}
"""
TERMS_LOG = f"""\
# slow: [a336c9281e928df46bbfb9732d72b2545118b8bb] commit 5
# fast: [3b0a626be1ebd95cd30661fb68909313c1b2f3e9] commit 1
git bisect start '--term-old=fast' '--term-new=slow' 'HEAD' '3b0a626be1ebd95cd30661fb68909313c1b2f3e9'
# slow: [{SHA3}] commit 3
git bisect slow {SHA3}
git bisect fast {SHA4}
"""


def test_parse_bisect_log() -> None:
    assert parse_bisect_log(REAL_LOG) == (
        BisectLogEntry("bad", SHA6),
        BisectLogEntry("skip", SHA3),
        BisectLogEntry("good", SHA4),
    )
    assert parse_bisect_log(TERMS_LOG) == (BisectLogEntry("bad", SHA3), BisectLogEntry("good", SHA4))
    assert parse_bisect_log("# good: [abc1234] x\ngit bisect visualize\n") == ()  # comments and other verbs


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"Bisecting: 5 revisions left to test after this (roughly 3 steps)\n[{SHA6}] commit 6\n",
            ("next", SHA6, "commit 6", 5, 3, ()),
        ),
        (
            f"Bisecting: 1 revision left to test after this (roughly 1 step)\n[{SHA4}] commit 4",
            ("next", SHA4, "commit 4", 1, 1, ()),
        ),
        (
            f"Bisecting: a merge base must be tested\n[{SHA3}] commit 3",
            ("next", SHA3, "commit 3", None, None, ()),
        ),
        (
            f"{SHA4} is the first bad commit\ncommit {SHA4}\nAuthor: t <a@b>\n\n    commit 4\n",
            ("done", SHA4, None, None, None, ()),
        ),
        (
            f"There are only 'skip'ped commits left to test.\nThe first bad commit could be any of:\n{SHA3}\n{SHA4}\n"
            "We cannot bisect more!\n",
            ("ambiguous", None, None, None, None, (SHA3, SHA4)),
        ),
        (f"{SHA4} is the first slow commit\n", ("done", SHA4, None, None, None, ())),  # custom terms
    ],
)
def test_parse_bisect_step(text: str, expected) -> None:
    step = parse_bisect_step(text)
    assert (
        step.kind,
        step.commit,
        step.subject,
        step.revisions_left,
        step.steps_left,
        step.candidates,
    ) == expected


def test_parse_bisect_step_refuses_other_output() -> None:
    with pytest.raises(ValueError, match="not a git bisect step: 'error: bad rev'"):
        parse_bisect_step("error: bad rev\n")


def test_parse_rev_list() -> None:
    assert parse_rev_list(f"{SHA3}\n{SHA4}\n\n") == (SHA3, SHA4)
    assert parse_rev_list("be04e0e commit 3\n844a4d3 commit 4\n") == ("be04e0e", "844a4d3")
    with pytest.raises(
        ValueError, match="line 2 of the rev-list output is not a commit id: 'fatal: bad revision'"
    ):
        parse_rev_list(f"{SHA3}\nfatal: bad revision\n")


def test_replay_rebuilds_a_state_from_the_log() -> None:
    commits = [f"{i:040x}" for i in range(2, 13)]
    commits[4], commits[1], commits[2] = SHA6, SHA3, SHA4  # commit 6, commit 3, commit 4
    state = BisectState.start(commits).replay(parse_bisect_log(REAL_LOG))
    assert state.verdicts == {SHA6: "bad", SHA3: "skip", SHA4: "good"}
    assert state.outcome().candidates == tuple(commits[3:5])


# --- the judge ----------------------------------------------------------------------------------


QUIET = Noise(0.5, 20)  # the run-to-run spread pooled over earlier commits: 0.5 tok/s, 20 degrees of freedom


@pytest.mark.parametrize(
    ("samples", "kwargs", "verdict"),
    [
        ([82.1, 81.7, 82.4], {"good_ref": 82.5, "bad_ref": 60.0}, "good"),
        ([59.8, 61.0, 60.3], {"good_ref": 82.5, "bad_ref": 60.0}, "bad"),
        ([], {"good_ref": 82.5, "bad_ref": 60.0}, "skip"),  # failed to start
        ([82.0, float("nan")], {"good_ref": 82.5, "bad_ref": 60.0}, "skip"),
        ([71.0, 71.5, 71.3], {"good_ref": 82.5, "bad_ref": 60.0}, "skip"),  # on the threshold 71.25: measure again
        ([80.0, 81.0, 60.0], {"good_ref": 82.5, "bad_ref": 60.0}, "skip"),  # straddles: measure again
        ([80.0, 81.0, 80.5, 79.9, 60.0], {"good_ref": 82.5, "bad_ref": 60.0}, "good"),  # 5+: robust, one outlier
        ([73.0, 73.1, 72.9], {"good_ref": 82.5, "relative_drop": 0.1}, "bad"),  # threshold 74.25
        ([75.2, 75.3, 75.1], {"good_ref": 82.5, "relative_drop": 0.1}, "good"),
        ([12.5, 13.0], {"good_ref": 12.0, "bad_ref": 29.0, "lower_is_better": True}, "skip"),  # 1 df: not yet
        ([12.5, 13.0], {"good_ref": 12.0, "bad_ref": 29.0, "lower_is_better": True, "noise": QUIET}, "good"),
        ([28.0, 30.0], {"good_ref": 12.0, "bad_ref": 29.0, "lower_is_better": True, "noise": QUIET}, "bad"),
        ([13.5], {"good_ref": 12.0, "relative_drop": 0.1, "lower_is_better": True}, "skip"),  # one run, no noise yet
        ([13.5], {"good_ref": 12.0, "relative_drop": 0.1, "lower_is_better": True, "noise": Noise(0.05, 20)}, "bad"),
        ([70.0], {"good_ref": 82.5, "threshold": 70.0, "noise": QUIET}, "skip"),  # exactly on the line
        ([70.1], {"good_ref": 82.5, "threshold": 70.0, "noise": Noise(0.01, 30)}, "good"),
        ([82.0], {"good_ref": 82.5, "bad_ref": 60.0, "min_samples": 3, "noise": QUIET}, "skip"),
        ([67.0, 67.05], {"good_ref": 72.0, "bad_ref": 60.0}, "good"),  # two runs that agree ...
        ([67.0, 67.05], {"good_ref": 72.0, "bad_ref": 60.0, "noise": Noise(2.5, 20)}, "skip"),  # ... by luck
        ([67.0, 67.05], {"good_ref": 72.0, "bad_ref": 60.0, "threshold_se": 2.0}, "skip"),  # a blurred threshold
    ],
)
def test_judge(samples: list[float], kwargs: dict, verdict: str) -> None:
    assert judge(samples, **kwargs) == verdict


def test_assess_explains_itself_and_says_how_sure() -> None:
    good = assess([82.1, 81.7, 82.4], good_ref=82.5, bad_ref=60.0)
    assert (good.median, good.threshold, good.n, good.decided) == (82.1, 71.25, 3, True)
    assert good.confidence is not None and 0.99 < good.confidence < 1.0
    assert good.reason.startswith("median 82.1, 95% interval 81.") and "above the threshold 71.25 (P(good) = 0.99" \
        in good.reason
    noisy = assess([80.0, 81.0, 60.0], good_ref=82.5, bad_ref=60.0)
    assert (noisy.verdict, noisy.decided) == ("good", False) and "overlaps the threshold 71.25" in noisy.reason
    assert noisy.confidence is not None and 0.5 < noisy.confidence < 0.99
    more = assess([80.0, 81.0, 60.0, 80.7, 80.2, 81.3], good_ref=82.5, bad_ref=60.0)  # measured again
    assert (more.verdict, more.decided) == ("good", True)
    failed = assess([], good_ref=82.5, bad_ref=60.0)
    assert failed.reason == "no usable samples: the server failed to start or the benchmark failed"
    assert failed.confidence is None


def test_noise_pools_over_commits_and_the_standard_error_never_trusts_luck() -> None:
    assert pool_noise([[82.0, 84.0], [60.0, 61.0, 62.0], [70.0], []]) == Noise(math.sqrt(4 / 3), 3)
    assert pool_noise([[1.0]]) == Noise()
    assert standard_error([67.0, 67.05]) == pytest.approx(0.025)
    assert standard_error([67.0, 67.05], Noise(2.5, 20)) == pytest.approx(2.44 / math.sqrt(2), rel=0.01)
    assert standard_error([67.0, 70.0], Noise(0.1, 20)) == pytest.approx(statistics.stdev([67.0, 70.0]) / math.sqrt(2))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"good_ref": 60.0, "bad_ref": 82.5},
            "bad_ref 82.5 is better than good_ref 60 for a higher-is-better metric; swap them or pass lower_is_better=True",
        ),
        ({"good_ref": 82.5}, "give threshold=, relative_drop= or bad_ref="),
        ({"good_ref": 82.5, "relative_drop": 10}, "relative_drop is a fraction between 0 and 1, got 10"),
        ({"good_ref": 82.5, "threshold": 70.0, "confidence": 1.5}, "confidence must lie between 0.5 and 1"),
    ],
)
def test_judge_refuses_unclear_references(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        judge([80.0], **kwargs)


# --- real git ---------------------------------------------------------------------------------------


def git(repo, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
    assert done.returncode in ok, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """20 commits (made in one ``git fast-import``); from commit 13 on, the pretend benchmark is slow."""
    path = tmp_path_factory.mktemp("repo")
    git(path, "init", "-q", "-b", "main")
    stream = []
    for i in range(1, 21):
        message, content = f"commit {i}", f"{i}\n"
        stream.append(
            f"commit refs/heads/main\nmark :{i}\ncommitter t <t@example.com> {1700000000 + i} +0000\n"
            f"data {len(message)}\n{message}\n"
            + (f"from :{i - 1}\n" if i > 1 else "")
            + f"M 644 inline f\ndata {len(content)}\n{content}\n"
        )
    subprocess.run(
        ["git", "-C", str(path), "fast-import", "--quiet"], input="".join(stream), text=True, check=True
    )
    git(path, "checkout", "-q", "main")
    return path


def slow(repo, commit: str) -> bool:
    return int(git(repo, "log", "-1", "--format=%s", commit).split()[1]) >= 13


def test_following_gits_choice_reaches_gits_answer(repo) -> None:
    good = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    state = BisectState.start(parse_rev_list(git(repo, "rev-list", "--reverse", f"{good}..HEAD")), good=good)
    step = parse_bisect_step(git(repo, "bisect", "start", "HEAD", good))
    try:
        while step.kind == "next":
            assert step.commit is not None
            verdict = "bad" if slow(repo, step.commit) else "good"
            state = state.apply(step.commit, verdict)
            step = parse_bisect_step(git(repo, "bisect", verdict))
        assert step.kind == "done" and step.commit == state.outcome().first_bad
        assert slow(repo, step.commit) and not slow(repo, f"{step.commit}~1")
        assert state.replay(parse_bisect_log(git(repo, "bisect", "log"))).verdicts == state.verdicts
    finally:
        git(repo, "bisect", "reset")


def test_our_choice_and_skips_agree_with_git(repo) -> None:
    good = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    commits = parse_rev_list(git(repo, "rev-list", "--reverse", f"{good}..HEAD"))
    first_bad = next(c for c in commits if slow(repo, c))
    state = BisectState.start(commits, good=good)
    git(repo, "bisect", "start", "HEAD", good)
    try:
        output = ""
        while (commit := state.next_commit()) is not None:
            verdict = "skip" if commit == first_bad else ("bad" if slow(repo, commit) else "good")
            state = state.apply(commit, verdict)
            # git exits 2 once only skipped commits are left
            output = git(repo, "bisect", verdict, commit, ok=(0, 2))
        step = parse_bisect_step(output)
        assert step.kind == "ambiguous"
        assert set(step.candidates) == set(state.outcome().candidates)
    finally:
        git(repo, "bisect", "reset")


@pytest.mark.parametrize("hosts", [1, 2, 3, 5])
def test_k_ary_verdicts_replayed_into_git_reach_gits_own_answer_and_replay(repo, tmp_path, hosts: int) -> None:
    good = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    commits = parse_rev_list(git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..HEAD"))
    state = BisectState.start(commits, good=good)
    while picks := state.next_commits(hosts):
        for commit in picks:  # a round's bad probes come oldest first: git must not lose the oldest
            state = state.apply(commit, "bad" if slow(repo, commit) else "good")
    checkout = GitCheckout(Host.local(), str(repo))
    worktree = GitCheckout(Host.local(), checkout.add_worktree(good))
    try:
        ledger = write_ledger(worktree, good, commits[-1], [(c, v, commits.index(c)) for c, v in state.history])
    finally:
        checkout.remove_worktree(worktree.repo_dir)
    assert ledger.step is not None and ledger.step.kind == "done"
    assert ledger.step.commit == state.outcome().first_bad and slow(repo, ledger.step.commit)
    assert "git bisect start '--no-checkout' '--first-parent'" in ledger.log
    assert "We are not bisecting" in git(repo, "bisect", "log", ok=(1,))  # the checkout's own state is untouched
    (tmp_path / "log").write_text(ledger.log)
    replayed = git(repo, "bisect", "replay", str(tmp_path / "log"))
    try:
        assert f"{state.outcome().first_bad} is the first bad commit" in replayed
    finally:
        git(repo, "bisect", "reset")
