"""The bisection's record in git's own words: ``git bisect`` fed the verdicts, without moving anyone's checkout.

``git bisect`` probes one commit at a time, so it cannot drive rounds of several probes
side by side. It can still *keep the record*: ``git bisect good|bad|skip SHA`` accepts a
verdict on any commit, in any order. So at the end of a bisection the verdicts are replayed
into ``git bisect start --no-checkout --first-parent`` inside one of our probe worktrees (a
linked worktree has its own bisect state; ``--no-checkout`` moves only ``BISECT_HEAD``),
``git bisect log`` is read back, and the state is reset. The log replays with
``git bisect replay`` in any clone, and git's own conclusion checks the planner's.
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
    """Replay ``verdicts`` (commit, verdict, place in the history) into ``git bisect`` in ``worktree``.

    Good and skip verdicts go in the order given (measured); bad ones after them, newest
    first: git keeps a single bad ref, and ``git bisect bad`` on a commit newer than the bad
    one it holds would move it back (two bad probes of one round, given oldest first, left
    git two revisions short of its answer). ``worktree`` must be a checkout of ours (a probe
    worktree): its bisect state is started and reset here. Git before 2.29 has no
    ``--first-parent`` for bisect; it is left out there (the same for a linear history).
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
