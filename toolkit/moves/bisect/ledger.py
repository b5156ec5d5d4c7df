"""The bisection's record in git's own words: ``git bisect`` fed the verdicts, without moving anyone's checkout.

``git bisect`` cannot drive rounds of probes side by side, but it accepts verdicts in any order:
they are replayed with ``--no-checkout`` in a probe worktree, and the log replays in any clone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.moves.bisect.checkout import GitCheckout
from toolkit.moves.bisect.gitparse import BisectStep, CommitVerdict, parse_bisect_step

__all__ = ["Ledger", "write_ledger"]

_FIRST_BAD = re.compile(r"^# first (?:bad|new) commit: \[([0-9a-f]{7,64})\]", re.MULTILINE)


@dataclass(frozen=True)
class Ledger:
    """``git bisect log`` after the verdicts, and what git concluded from them (None if it could not say)."""

    log: str
    step: BisectStep | None


def write_ledger(worktree: GitCheckout, good: str, bad: str,
                 verdicts: Sequence[tuple[str, CommitVerdict, int]]) -> Ledger:
    """Replay ``verdicts`` (commit, verdict, place in the history) into ``git bisect`` in ``worktree`` (ours).

    Bad verdicts go last, newest first: git keeps a single bad ref, and a newer bad one would move
    it back (two bad probes of one round, oldest first, left git two revisions short). Git before
    2.29 has no ``--first-parent`` for bisect: it is left out there.
    """
    ordered: list[tuple[str, CommitVerdict]] = [(sha, v) for sha, v, _ in verdicts if v != "bad"]
    ordered += [(sha, v) for sha, v, _ in sorted((e for e in verdicts if e[1] == "bad"), key=lambda e: -e[2])]
    if not worktree.git("bisect", "start", "--no-checkout", "--first-parent", check=False).ok:
        worktree.git("bisect", "reset", check=False)
        worktree.git("bisect", "start", "--no-checkout")
    try:
        worktree.git("bisect", "bad", bad)
        last = worktree.git("bisect", "good", good, ok=(0, 1, 2))
        for sha, verdict in ordered:
            last = worktree.git("bisect", verdict, sha, ok=(0, 1, 2))
        log = worktree.git("bisect", "log").stdout
    finally:
        worktree.git("bisect", "reset", check=False)
    found = _FIRST_BAD.findall(log)  # git notes its conclusion in the log, whichever verdict came last
    if found:
        return Ledger(log, BisectStep("done", commit=found[-1]))
    try:
        step: BisectStep | None = parse_bisect_step(f"{last.stdout}\n{last.stderr}")
    except ValueError:
        step = None
    return Ledger(log, step)
