"""git's words, read: ``git rev-list``, ``git bisect log`` and the output of each bisect step.

Pure, so a bisection can be rebuilt from git's record and follow git's choice. Captured from git 2.39.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["CommitVerdict", "BisectLogEntry", "BisectStep", "parse_rev_list", "parse_bisect_log", "parse_bisect_step"]

#: What a probe says of a commit, in git bisect's own terms.
CommitVerdict = Literal["good", "bad", "skip"]

_SHA = re.compile(r"^[0-9a-f]{4,64}$")


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

    verdict: CommitVerdict
    commit: str


_LOG_START = re.compile(r"^git bisect start\b(?P<args>.*)$")
_LOG_MARK = re.compile(r"^git bisect (?P<term>[\w-]+)(?P<shas>(?: [0-9a-f]{4,64})+)\s*$")
_TERM = re.compile(r"--term-(?P<which>old|new|good|bad)[= ](?P<term>[\w-]+)")


def parse_bisect_log(text: str) -> tuple[BisectLogEntry, ...]:
    """The verdicts recorded by ``git bisect log``; custom terms (``--term-old=fast``) map to good/bad."""
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
            verdict: CommitVerdict = terms[mark.group("term")]  # type: ignore[assignment]
            entries.extend(BisectLogEntry(verdict, sha) for sha in mark.group("shas").split())
    return tuple(entries)


@dataclass(frozen=True)
class BisectStep:
    """What ``git bisect good|bad|skip|start`` printed: the ``next`` commit, ``done`` or ``ambiguous``."""

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
        return BisectStep("next", commit=step.group("sha"), subject=step.group("subject").strip() or None,
                          revisions_left=int(left) if left is not None else None,
                          steps_left=int(steps) if steps is not None else None)
    raise ValueError(f"not a git bisect step: {text.strip()[:200]!r}")
