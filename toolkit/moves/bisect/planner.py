"""Which commit to probe next: the bisection planner, pure.

It accepts a verdict for any commit in the range, in any order, so :func:`perf_bisect` can probe
several commits side by side and keep its own account beside git's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from toolkit.moves.bisect.gitparse import BisectLogEntry, CommitVerdict

__all__ = ["CommitVerdict", "BisectState", "BisectOutcome", "expected_probes", "expected_rounds"]

_VERDICTS: frozenset[str] = frozenset({"good", "bad", "skip"})


def expected_probes(n_commits: int) -> int:
    """Probes a bisection of ``n_commits`` candidates (the last known bad) needs without skips: ⌈log2 N⌉.

    >>> expected_probes(100)
    7
    """
    if n_commits < 1:
        raise ValueError(f"a bisection needs at least one commit, got {n_commits}")
    return math.ceil(math.log2(n_commits))


def expected_rounds(n_commits: int, hosts: int) -> int:
    """Rounds of a k-ary bisection (``hosts`` probes side by side per round) without skips: ⌈log_{k+1} N⌉.

    >>> expected_rounds(1023, 3), expected_rounds(1023, 1), expected_rounds(1023, 8)
    (5, 10, 4)
    """
    if n_commits < 1 or hosts < 1:
        raise ValueError(f"a bisection needs at least one commit and one host, got {n_commits} and {hosts}")
    rounds, left = 0, n_commits
    while left > 1:
        left = -(-left // (hosts + 1))
        rounds += 1
    return rounds


@dataclass(frozen=True)
class BisectOutcome:
    """Where a finished (or stuck) bisection landed: ``first_bad`` if one commit is left, else candidates."""

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
    history: tuple[tuple[str, CommitVerdict], ...] = ()

    def __post_init__(self) -> None:
        if not self.commits:
            raise ValueError("nothing to bisect: the list of commits between good and bad is empty")
        if len(set(self.commits)) != len(self.commits):
            raise ValueError("the commit list repeats a commit; "
                             "pass `git rev-list --reverse GOOD..BAD` output")

    @classmethod
    def start(cls, commits: Sequence[str], *, good: str | None = None) -> BisectState:
        """A fresh bisection over ``git rev-list --reverse GOOD..BAD`` (BAD is last)."""
        return cls(commits=tuple(commits), good=good)

    def apply(self, commit: str, verdict: CommitVerdict) -> BisectState:
        """A new state with ``verdict`` for ``commit`` (full or unique short sha); a later one replaces it.

        ``ValueError`` when verdicts stop being monotonic (a noisy metric, a regression that comes and goes).
        """
        if verdict not in _VERDICTS:
            raise ValueError(f"verdict must be one of good, bad, skip; got {verdict!r}")
        full = self.resolve(commit)
        state = BisectState(self.commits, self.good, (*self.history, (full, verdict)))
        state._bounds()
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
    def verdicts(self) -> dict[str, CommitVerdict]:
        """The latest verdict per commit."""
        return dict(self.history)

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
        """The midpoint of the open range, or the untested commit nearest it (older on a tie), or None."""
        untested = self._untested()
        if not untested:
            return None
        lo, hi = self._bounds()
        middle = lo + (hi - lo + 1) // 2
        return self.commits[min(untested, key=lambda i: (abs(i - middle), i))]

    def next_commits(self, k: int, *, busy: Iterable[str] = ()) -> tuple[str, ...]:
        """Up to ``k`` commits to probe side by side, spread evenly over the open range (oldest first).

        >>> BisectState.start([f"c{i}" for i in range(1, 16)]).next_commits(3)
        ('c4', 'c8', 'c12')
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        taken = set(busy)
        untested = [i for i in self._untested() if self.commits[i] not in taken]
        lo, hi = self._bounds()
        span = hi - lo
        picked: list[int] = []
        for j in range(1, k + 1):
            target = lo - (-j * span // (k + 1))  # lo + ceil(j * span / (k + 1))
            free = [i for i in untested if i not in picked]
            if not free:
                break
            picked.append(min(free, key=lambda i: (abs(i - target), i)))
        return tuple(self.commits[i] for i in sorted(picked))

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
            return BisectOutcome(candidates[0], candidates, last_good,
                                 f"{candidates[0]} is the first bad commit")
        between = f"between {last_good or 'the good commit'} and {self.commits[hi]}"
        if self.done:
            message = (f"only skipped commits left {between}: "
                       f"the first bad commit could be any of {', '.join(candidates)}")
        else:
            message = (f"{len(candidates)} candidates left {between}; next: {self.next_commit()} "
                       f"(about {self.probes_left} more probes)")
        return BisectOutcome(None, candidates, last_good, message)

    def __str__(self) -> str:
        counts = {v: sum(1 for x in self.verdicts.values() if x == v) for v in ("good", "bad", "skip")}
        probed = f"{sum(counts.values())} probed ({counts['good']} good, {counts['bad']} bad, {counts['skip']} skipped)"
        return f"bisecting {len(self.commits)} commits: {probed}; {self.outcome().message}"

    def to_frame(self) -> pd.DataFrame:
        """One row per commit: position, commit, verdict, and whether it is still a candidate."""
        lo, hi = self._bounds()
        verdicts = self.verdicts
        return pd.DataFrame([(i, c, verdicts.get(c), lo < i <= hi) for i, c in enumerate(self.commits)],
                            columns=["position", "commit", "verdict", "candidate"])

    def replay(self, entries: Iterable[BisectLogEntry]) -> BisectState:
        """Apply the verdicts of a ``git bisect log`` (its endpoints, outside the range, are skipped)."""
        state = self
        for entry in entries:
            if entry.commit in self.commits or any(c.startswith(entry.commit) for c in self.commits):
                state = state.apply(entry.commit, entry.verdict)
        return state
