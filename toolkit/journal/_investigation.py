"""Which investigation an opened journal records into, and the line that tells the user (pure).

Issue 14: running a notebook twice silently merged into the previous run's journal (16 steps in the
plots); opening one now starts a new investigation unless ``resume=True``, and says so.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import count

from toolkit.errors import JournalError

__all__ = ["Investigation", "Choice", "choose", "free_name"]


@dataclass(frozen=True)
class Investigation:
    """One investigation in the file: its id, name (as stored, redacted), step count and latest activity."""

    id: int
    name: str
    steps: int
    last_at: float


@dataclass(frozen=True)
class Choice:
    """The investigation to use: ``id`` None means new, created by the first record."""

    name: str
    id: int | None
    notice: str | None


def free_name(base: str, taken: Collection[str]) -> str:
    """``base``, or ``base (2)``, ``base (3)``... whichever is not taken yet."""
    if base not in taken:
        return base
    return next(name for name in (f"{base} ({number})" for number in count(2)) if name not in taken)


def _described(investigation: Investigation) -> str:
    steps = f"{investigation.steps} step{'' if investigation.steps == 1 else 's'}"
    when = datetime.fromtimestamp(investigation.last_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{investigation.name!r} ({steps}, last activity {when})"


def choose(existing: Sequence[Investigation], *, requested: str | None, resume: bool, read_only: bool,
           default_name: str, path: str) -> Choice:
    """The investigation to open; ``existing`` in creation order, ``requested`` already redacted.

    >>> first = Investigation(1, "EAGLE-3", 8, 1_772_136_000.0)
    >>> choose([first], requested="EAGLE-3", resume=False, read_only=False, default_name="j", path="j.sqlite").name
    'EAGLE-3 (2)'
    >>> choose([first], requested=None, resume=True, read_only=False, default_name="j", path="j.sqlite").id
    1
    """
    by_name = {investigation.name: investigation for investigation in existing}
    if resume or read_only:
        found = (existing[-1] if existing else None) if requested is None else by_name.get(requested)
        if found is None and requested is not None and existing:
            raise JournalError(f"{path} holds no investigation named {requested!r}",
                               evidence=[f"investigations: {', '.join(repr(n) for n in by_name)}"],
                               hint="pass one of those names, or leave resume=True out to start a new investigation")
        if found is None:  # nothing to continue yet: this one starts the file
            return Choice(requested or default_name, None, None)
        verb = "Reading" if read_only and not resume else "Continuing"
        return Choice(found.name, found.id, f"{verb} the investigation {_described(found)} in {path}.")
    name = free_name(requested or default_name, by_name)
    if not existing:
        return Choice(name, None, None)
    if requested is not None and requested in by_name:
        previous = by_name[requested]
        held = f"{path} already holds the investigation {_described(previous)}"
    else:
        previous = existing[-1]
        plural = "s" if len(existing) > 1 else ""
        held = f"{path} holds {len(existing)} earlier investigation{plural}, the latest {_described(previous)}"
    notice = (f"{held}. This run records a new investigation, {name!r}: steps(), results() and the "
              f"post-mortem show only its steps. To add to {previous.name!r} instead: "
              f"Journal({path!r}, investigation={previous.name!r}, resume=True).")
    return Choice(name, None, notice)
