"""Which commit made it slow? A bisection planner and a noise-aware judge, both pure.

In the EAGLE-3 investigation a ``git pull`` of SGLang was a suspect, ruled out by
reverting to an old commit and re-measuring. When that comparison does show a
regression, the next move is a bisection: probe the commit halfway between the
last good and the first bad one, benchmark it, and repeat.

Two pure pieces live here:

- :class:`BisectState`, an immutable record of verdicts over the commits between
  good and bad (``git rev-list --reverse GOOD..BAD``: oldest first, BAD last). It
  proposes the next commit (the midpoint, or the nearest untested commit to it when
  the midpoint was skipped, as ``git bisect`` does) and says when it is done:
  the first bad commit, or the range that only skipped commits leave ambiguous.
  It can equally be driven by ``git bisect``'s own choice: :func:`parse_bisect_step`
  reads git's "Bisecting: ..." output, and :meth:`BisectState.apply` takes a verdict
  for any commit in the range.
- :func:`judge` / :func:`assess`, which turn repeated benchmark samples into
  good/bad/skip. A throughput number from one run is noisy; a verdict is only given
  when the median clears the threshold by a margin and the samples do not straddle
  it. Otherwise the commit is skipped, which the planner routes around, rather than
  judged by a coin flip that would send the search down the wrong half.

Parsers for ``git rev-list`` and ``git bisect log`` output rebuild a state from
what git recorded. The I/O driver is described at the bottom of this module.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd

__all__ = [
    "Verdict",
    "BisectState",
    "BisectOutcome",
    "BisectStep",
    "BisectLogEntry",
    "Judgement",
    "expected_probes",
    "judge",
    "assess",
    "parse_rev_list",
    "parse_bisect_log",
    "parse_bisect_step",
]

Verdict = Literal["good", "bad", "skip"]
_VERDICTS: frozenset[str] = frozenset({"good", "bad", "skip"})
_SHA = re.compile(r"^[0-9a-f]{4,64}$")


def expected_probes(n_commits: int) -> int:
    """Probes a bisection of ``n_commits`` candidates needs without skips: ⌈log2 N⌉.

    The last candidate is the known-bad commit, so one candidate needs no probe.

    >>> expected_probes(100)
    7
    """
    if n_commits < 1:
        raise ValueError(f"a bisection needs at least one commit, got {n_commits}")
    return math.ceil(math.log2(n_commits))


@dataclass(frozen=True)
class BisectOutcome:
    """Where a finished (or stuck) bisection landed.

    ``first_bad`` is set when exactly one commit is left. Otherwise ``candidates``
    lists every commit that could be the first bad one (skipped commits, then the
    first known bad), and ``message`` says so in git's terms.
    """

    first_bad: str | None
    candidates: tuple[str, ...]
    last_good: str | None
    message: str


@dataclass(frozen=True)
class BisectState:
    """Verdicts so far over ``commits`` (oldest first; the last one is the known bad).

    >>> state = BisectState.start(["c1", "c2", "c3", "c4"], good="c0")
    >>> state.next_commit()
    'c2'
    >>> state.apply("c2", "good").apply("c3", "bad").outcome().first_bad
    'c3'
    """

    commits: tuple[str, ...]
    good: str | None = None
    history: tuple[tuple[str, Verdict], ...] = ()

    def __post_init__(self) -> None:
        if not self.commits:
            raise ValueError("nothing to bisect: the list of commits between good and bad is empty")
        if len(set(self.commits)) != len(self.commits):
            raise ValueError(
                "the commit list repeats a commit; pass `git rev-list --reverse GOOD..BAD` output"
            )

    @classmethod
    def start(cls, commits: Sequence[str], *, good: str | None = None) -> BisectState:
        """A fresh bisection over ``git rev-list --reverse GOOD..BAD`` (BAD is last)."""
        return cls(commits=tuple(commits), good=good)

    # --- recording -----------------------------------------------------------------

    def apply(self, commit: str, verdict: Verdict) -> BisectState:
        """A new state with ``verdict`` for ``commit`` (a full or unique abbreviated sha).

        A later verdict for the same commit replaces the earlier one (a re-run after
        a skip). Raises ``ValueError`` for a commit outside the range, and when the
        verdicts stop being monotonic (a good commit after a bad one), which means
        the metric is too noisy or the regression comes and goes.
        """
        if verdict not in _VERDICTS:
            raise ValueError(f"verdict must be one of good, bad, skip; got {verdict!r}")
        full = self.resolve(commit)
        state = BisectState(self.commits, self.good, (*self.history, (full, verdict)))
        state._bounds()  # validates monotonicity
        return state

    def resolve(self, commit: str) -> str:
        """The full commit id for ``commit`` (a unique prefix will do)."""
        if commit in self.commits:
            return commit
        matches = [c for c in self.commits if c.startswith(commit) or commit.startswith(c)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise ValueError(
                f"{commit} is not between {self.good or 'the good commit'} and {self.commits[-1]}; "
                "for a merge-heavy history, take the list from the same `git rev-list` that git bisect uses"
            )
        raise ValueError(f"{commit} is ambiguous: it could be {', '.join(matches)}")

    @property
    def verdicts(self) -> dict[str, Verdict]:
        """The latest verdict per commit."""
        return dict(self.history)

    # --- planning --------------------------------------------------------------------

    def _bounds(self) -> tuple[int, int]:
        """(index of the last good commit or -1, index of the first bad commit)."""
        verdicts = self.verdicts
        index = {commit: i for i, commit in enumerate(self.commits)}
        goods = [index[c] for c, v in verdicts.items() if v == "good"]
        bads = [index[c] for c, v in verdicts.items() if v == "bad"]
        lo = max(goods, default=-1)
        hi = min(bads, default=len(self.commits) - 1)
        if lo >= hi:
            raise ValueError(
                f"{self.commits[lo]} was judged good but the older {self.commits[hi]} was judged bad: "
                "the regression is not monotonic (a noisy metric, or it comes and goes); "
                "re-run both with more repeats"
            )
        return lo, hi

    def _untested(self) -> list[int]:
        lo, hi = self._bounds()
        skipped = {c for c, v in self.verdicts.items() if v == "skip"}
        return [i for i in range(lo + 1, hi) if self.commits[i] not in skipped]

    @property
    def done(self) -> bool:
        return not self._untested()

    def next_commit(self) -> str | None:
        """The commit to probe next, or ``None`` when done.

        The midpoint of the open range; when it was skipped, the untested commit
        nearest to it (the older one on a tie), so a skip costs about one probe.
        """
        untested = self._untested()
        if not untested:
            return None
        lo, hi = self._bounds()
        middle = lo + (hi - lo + 1) // 2
        return self.commits[min(untested, key=lambda i: (abs(i - middle), i))]

    @property
    def remaining(self) -> int:
        """Commits that can still be the first bad one (the known bad included)."""
        lo, hi = self._bounds()
        return hi - lo

    @property
    def probes_left(self) -> int:
        """⌈log2(remaining)⌉: the probes still needed if none is skipped."""
        return expected_probes(self.remaining)

    def outcome(self) -> BisectOutcome:
        """The answer so far: the first bad commit, or the candidates left."""
        lo, hi = self._bounds()
        last_good = self.commits[lo] if lo >= 0 else self.good
        candidates = self.commits[lo + 1 : hi + 1]
        if len(candidates) == 1:
            return BisectOutcome(
                candidates[0], candidates, last_good, f"{candidates[0]} is the first bad commit"
            )
        if self.done:
            message = (
                f"only skipped commits left between {last_good or 'the good commit'} and {self.commits[hi]}: "
                f"the first bad commit could be any of {', '.join(candidates)}"
            )
        else:
            message = (
                f"{len(candidates)} candidates left between {last_good or 'the good commit'} and "
                f"{self.commits[hi]}; next: {self.next_commit()} (about {self.probes_left} more probes)"
            )
        return BisectOutcome(None, candidates, last_good, message)

    def __str__(self) -> str:
        counts = {v: sum(1 for x in self.verdicts.values() if x == v) for v in ("good", "bad", "skip")}
        probed = f"{sum(counts.values())} probed ({counts['good']} good, {counts['bad']} bad, {counts['skip']} skipped)"
        return f"bisecting {len(self.commits)} commits: {probed}; {self.outcome().message}"

    def to_frame(self) -> pd.DataFrame:
        """One row per commit: position, commit, verdict, and whether it is still a candidate."""
        lo, hi = self._bounds()
        verdicts = self.verdicts
        return pd.DataFrame(
            [
                {"position": i, "commit": c, "verdict": verdicts.get(c), "candidate": lo < i <= hi}
                for i, c in enumerate(self.commits)
            ],
            columns=["position", "commit", "verdict", "candidate"],
        )

    # --- replay ----------------------------------------------------------------------

    def replay(self, entries: Iterable[BisectLogEntry]) -> BisectState:
        """Apply the verdicts of a ``git bisect log`` (entries outside the range are skipped).

        The log's own good and bad endpoints are outside ``GOOD..BAD`` or are the known
        bad commit, so they carry no new information here.
        """
        state = self
        for entry in entries:
            if entry.commit in self.commits or any(c.startswith(entry.commit) for c in self.commits):
                state = state.apply(entry.commit, entry.verdict)
        return state


# --- parsing git's words -------------------------------------------------------------


def parse_rev_list(text: str) -> tuple[str, ...]:
    """Commit ids from ``git rev-list --reverse GOOD..BAD`` (or ``git log --oneline --reverse``).

    >>> parse_rev_list("1a2b3c4 fix\\n5d6e7f8 speed up verify\\n")
    ('1a2b3c4', '5d6e7f8')
    """
    commits = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        sha = line.split()[0]
        if not _SHA.match(sha):
            raise ValueError(f"line {line_no} of the rev-list output is not a commit id: {line!r}")
        commits.append(sha)
    return tuple(commits)


@dataclass(frozen=True)
class BisectLogEntry:
    """One ``git bisect good|bad|skip SHA`` line of ``git bisect log``."""

    verdict: Verdict
    commit: str


_LOG_START = re.compile(r"^git bisect start\b(?P<args>.*)$")
_LOG_MARK = re.compile(r"^git bisect (?P<term>[\w-]+)(?P<shas>(?: [0-9a-f]{4,64})+)\s*$")
_TERM = re.compile(r"--term-(?P<which>old|new|good|bad)[= ](?P<term>[\w-]+)")


def parse_bisect_log(text: str) -> tuple[BisectLogEntry, ...]:
    """The verdicts recorded by ``git bisect log``, honouring custom terms.

    ``git bisect start --term-old=fast --term-new=slow`` records ``git bisect slow
    SHA``; old/new and fast/slow map to good/bad here. Comment lines are ignored.
    """
    terms = {"good": "good", "bad": "bad", "old": "good", "new": "bad", "skip": "skip"}
    entries: list[BisectLogEntry] = []
    for line in text.splitlines():
        line = line.strip()
        start = _LOG_START.match(line)
        if start:
            for term in _TERM.finditer(start.group("args")):
                terms[term.group("term")] = "good" if term.group("which") in ("old", "good") else "bad"
            continue
        mark = _LOG_MARK.match(line)
        if mark and mark.group("term") in terms:
            verdict: Verdict = terms[mark.group("term")]  # type: ignore[assignment]
            entries.extend(BisectLogEntry(verdict, sha) for sha in mark.group("shas").split())
    return tuple(entries)


@dataclass(frozen=True)
class BisectStep:
    """What ``git bisect good|bad|skip`` (or ``start``) printed.

    ``kind``: ``next`` (git checked out ``commit`` to test), ``done`` (``commit`` is
    the first bad commit) or ``ambiguous`` (only skipped commits left; ``candidates``).
    """

    kind: Literal["next", "done", "ambiguous"]
    commit: str | None = None
    subject: str | None = None
    revisions_left: int | None = None
    steps_left: int | None = None
    candidates: tuple[str, ...] = ()


_STEP_NEXT = re.compile(
    r"Bisecting: (?:(?P<left>\d+) revisions? left to test after this \(roughly (?P<steps>\d+) steps?\)"
    r"|a merge base must be tested)\s*\n\[(?P<sha>[0-9a-f]{4,64})\] ?(?P<subject>.*)"
)
_STEP_DONE = re.compile(r"^(?P<sha>[0-9a-f]{4,64}) is the first (?:bad|new|[\w-]+) commit$", re.MULTILINE)
_STEP_AMBIGUOUS = re.compile(
    r"The first (?:bad|new|[\w-]+) commit could be any of:\n(?P<shas>(?:[0-9a-f]{4,64}\n?)+)"
)


def parse_bisect_step(text: str) -> BisectStep:
    """Read git's answer after a verdict, so the driver can follow git's choice.

    >>> parse_bisect_step("Bisecting: 3 revisions left to test after this (roughly 2 steps)\\n"
    ...                   "[1a2b3c4d] speed up verify").commit
    '1a2b3c4d'
    """
    done = _STEP_DONE.search(text)
    if done:
        return BisectStep("done", commit=done.group("sha"))
    ambiguous = _STEP_AMBIGUOUS.search(text)
    if ambiguous:
        return BisectStep("ambiguous", candidates=tuple(ambiguous.group("shas").split()))
    step = _STEP_NEXT.search(text)
    if step:
        left, steps = step.group("left"), step.group("steps")
        return BisectStep(
            "next",
            commit=step.group("sha"),
            subject=step.group("subject").strip() or None,
            revisions_left=int(left) if left is not None else None,
            steps_left=int(steps) if steps is not None else None,
        )
    raise ValueError(f"not a git bisect step: {text.strip()[:200]!r}")


# --- judging noisy samples -------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    """A verdict and the numbers behind it, for the journal."""

    verdict: Verdict
    reason: str
    median: float | None = None
    threshold: float | None = None
    margin: float | None = None
    n: int = 0


def judge(
    samples: Sequence[float],
    *,
    good_ref: float,
    bad_ref: float | None = None,
    threshold: float | None = None,
    relative_drop: float | None = None,
    margin: float | None = None,
    lower_is_better: bool = False,
    min_samples: int = 1,
) -> Verdict:
    """good, bad or skip for one commit's benchmark samples (see :func:`assess`).

    >>> judge([82.1, 81.7, 82.4], good_ref=82.5, bad_ref=60.0)
    'good'
    >>> judge([], good_ref=82.5, bad_ref=60.0)  # the server failed to start
    'skip'
    """
    return assess(
        samples,
        good_ref=good_ref,
        bad_ref=bad_ref,
        threshold=threshold,
        relative_drop=relative_drop,
        margin=margin,
        lower_is_better=lower_is_better,
        min_samples=min_samples,
    ).verdict


def assess(
    samples: Sequence[float],
    *,
    good_ref: float,
    bad_ref: float | None = None,
    threshold: float | None = None,
    relative_drop: float | None = None,
    margin: float | None = None,
    lower_is_better: bool = False,
    min_samples: int = 1,
) -> Judgement:
    """Judge samples of a metric (tok/s by default; ``lower_is_better`` for latency).

    The threshold is ``threshold`` if given, else ``good_ref`` degraded by
    ``relative_drop`` (a drop for throughput, a rise for latency), else halfway
    between ``good_ref`` and ``bad_ref``. ``margin`` (metric units) defaults to a
    tenth of the distance from ``good_ref`` to the threshold.

    - no samples, or a NaN (the server failed to start, the benchmark broke): skip;
    - fewer than ``min_samples``: skip;
    - the median within ``threshold ± margin``: skip (undecidable);
    - the samples straddle the band (min and max for up to 4 samples, the quartiles
      from 5 on, so one outlier does not veto): skip;
    - otherwise good or bad by the side of the band the median is on.
    """
    limit = _threshold(good_ref, bad_ref, threshold, relative_drop, lower_is_better)
    band = abs(good_ref - limit) / 10 if margin is None else margin
    if band < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    values = [float(x) for x in samples]
    if not values or any(math.isnan(x) for x in values):
        return Judgement(
            "skip",
            "no usable samples: the server failed to start or the benchmark failed",
            threshold=limit,
            margin=band,
            n=len(values),
        )
    median = statistics.median(values)
    if len(values) < min_samples:
        return Judgement(
            "skip", f"only {len(values)} of {min_samples} samples", median, limit, band, len(values)
        )
    low_edge, high_edge = limit - band, limit + band
    if low_edge < median < high_edge or (band == 0 and median == limit):
        reason = f"median {median:g} is within {limit:g} ± {band:g}: undecidable"
        return Judgement("skip", reason, median, limit, band, len(values))
    if len(values) >= 5:
        quartiles = statistics.quantiles(values, n=4, method="inclusive")
        spread_low, spread_high = quartiles[0], quartiles[2]
    else:
        spread_low, spread_high = min(values), max(values)
    if spread_low <= low_edge and spread_high >= high_edge:
        reason = f"samples {spread_low:g}..{spread_high:g} straddle {limit:g} ± {band:g}: too noisy to call"
        return Judgement("skip", reason, median, limit, band, len(values))
    better = median <= low_edge if lower_is_better else median >= high_edge
    side = "below" if median < limit else "above"
    verdict: Verdict = "good" if better else "bad"
    return Judgement(
        verdict, f"median {median:g} is {side} {limit:g} ± {band:g}", median, limit, band, len(values)
    )


def _threshold(
    good_ref: float, bad_ref: float | None, threshold: float | None, relative_drop: float | None, lower: bool
) -> float:
    if bad_ref is not None and (bad_ref < good_ref if lower else bad_ref > good_ref):
        kind = "lower" if lower else "higher"
        raise ValueError(
            f"bad_ref {bad_ref:g} is better than good_ref {good_ref:g} for a {kind}-is-better metric; "
            f"swap them or pass lower_is_better={not lower}"
        )
    if threshold is not None:
        return float(threshold)
    if relative_drop is not None:
        if not 0 < relative_drop < 1:
            raise ValueError(f"relative_drop is a fraction between 0 and 1, got {relative_drop}")
        return good_ref * (1 + relative_drop) if lower else good_ref * (1 - relative_drop)
    if bad_ref is not None:
        return (good_ref + bad_ref) / 2
    raise ValueError("give threshold=, relative_drop= or bad_ref= so that good and bad can be told apart")


# --- the driver (for the lead) ------------------------------------------------------------
#
# TODO(lead): perf_bisect, the I/O driver, once hosts/launch/bench land. Contract:
#
# def perf_bisect(host: Host, repo_dir: str, good: str, bad: str, spec: ServerSpec, *,
#                 journal: Journal | None = None, repeats: int = 3, num_prompts: int = 64,
#                 max_concurrency: int = 1, metric: str = "output_throughput",
#                 lower_is_better: bool = False, relative_drop: float | None = 0.1,
#                 follow_git: bool = False, ready_timeout_s: float = 900.0,
#                 install: str | None = None) -> BisectOutcome:
#     """Find the commit that made ``metric`` regress between ``good`` and ``bad``.
#
#     1. ``git -C repo_dir status --porcelain`` must be empty (else raise; never stash
#        for the user). Record the current HEAD to restore.
#     2. ``git rev-list --reverse good..bad`` -> parse_rev_list -> BisectState.start(..., good=good).
#     3. Reference runs: benchmark ``good`` and ``bad`` themselves (``repeats`` each) to get
#        good_ref/bad_ref, and check they differ by more than the noise; if not, stop
#        with "no regression to bisect" and the numbers (the seed's "old commit, same
#        baseline" result is exactly this case).
#     4. ``git bisect start bad good`` (``--term-old/--term-new`` not needed). Loop:
#        commit = state.next_commit(), or with follow_git the commit from
#        parse_bisect_step(<git's last output>); ``git checkout`` it (follow_git: git did);
#        run ``install`` if given (e.g. ``pip install -e python``); launch(host, spec),
#        wait_ready (ServerDied/ReadinessTimeout -> samples = [] -> skip), bench
#        ``repeats`` times; verdict = assess(samples, good_ref=..., bad_ref=..., ...);
#        ``git bisect good|bad|skip <commit>``; state = state.apply(commit, verdict);
#        journal one step per probe (commit, samples, Judgement, git output).
#        Stop when state.done; cross-check with parse_bisect_step (git's first bad
#        commit must equal state.outcome().first_bad; if not, journal both and say so).
#     5. Always, in ``finally``: stop the server (verify no survivors), ``git bisect log``
#        into the journal, ``git bisect reset`` (back to the recorded HEAD).
#     Returns state.outcome(); the journal holds every probe.
#     """
