"""Differences in the environment the two sides' processes ran with, and in their code. Pure.

Each side's environment is rows ``(process, variable, value or None)`` read on every rank (issue 21).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.moves.diagnose.difference import Difference, same_record

__all__ = ["EnvRow", "CodeRange", "env_differences", "code_differences"]

EnvRow = tuple[str, str, str | None]  # (process, e.g. "TP3 [4242]"; variable; value, None when unset)


@dataclass(frozen=True)
class CodeRange:
    """Where the two sides' commits come from, and the files that changed between them."""

    repo_dir: str
    changed_files: tuple[str, ...] = ()


def _values(rows: Sequence[EnvRow]) -> dict[str, dict[str, str | None]]:
    out: dict[str, dict[str, str | None]] = {}
    for process, variable, value in rows:
        out.setdefault(variable, {})[process] = value
    return out


def _shown(values: dict[str, str | None]) -> str:
    distinct = sorted({"(unset)" if v is None else v for v in values.values()})
    n = len(values)
    if len(distinct) == 1:
        return f"{distinct[0]} on all {n} processes"
    return " / ".join(f"{v} on {sum(1 for x in values.values() if ('(unset)' if x is None else x) == v)}"
                      for v in distinct)


def env_differences(fast: Sequence[EnvRow], slow: Sequence[EnvRow]) -> list[Difference]:
    """Each variable whose set of values over the ranks differs between sides; one sameness for the rest."""
    a, b = _values(fast), _values(slow)
    if not a and not b:
        return []
    out, alike = [], []
    for variable in sorted(set(a) | set(b)):
        fast_values, slow_values = a.get(variable, {}), b.get(variable, {})
        if set(fast_values.values()) == set(slow_values.values()):
            alike.append(variable)
            continue
        evidence = tuple(f"{side}: {process}: {variable}={'(unset)' if v is None else v}"
                         for side, values in (("fast", fast_values), ("slow", slow_values))
                         for process, v in list(values.items())[:3])
        out.append(Difference("env", "environment", variable, _shown(fast_values) if fast_values else "(not read)",
                              _shown(slow_values) if slow_values else "(not read)", evidence))
    if alike:
        processes = max(len({p for p, _, _ in fast}), len({p for p, _, _ in slow}))
        shown = ", ".join(alike[:8]) + (f" and {len(alike) - 8} more" if len(alike) > 8 else "")
        sample = [f"{p}: {v}={'(unset)' if x is None else x}" for p, v, x in fast if v in alike][:4]
        out.append(same_record("env", "environment", f"environment ({len(alike)} variables)",
                               f"{shown}: identical on every rank ({processes} processes per side)", tuple(sample)))
    return out


def code_differences(fast_commit: str | None, slow_commit: str | None, changed_files: Sequence[str] = ()
                     ) -> list[Difference]:
    """The code: the same commit (or the same checkout) on both sides, or two commits and what changed."""
    fast_text, slow_text = fast_commit or "(the installed engine)", slow_commit or "(the installed engine)"
    if fast_commit == slow_commit:
        return [same_record("code", "code", "code", f"{fast_text}: the same code on both sides")]
    files = list(changed_files)
    shown = ", ".join(files[:12]) + (f" and {len(files) - 12} more" if len(files) > 12 else "")
    evidence = (f"git diff --name-only {fast_text[:12]} {slow_text[:12]}: {len(files)} files: {shown}",) if files else ()
    return [Difference("code", "code", "commit", fast_text, slow_text, evidence)]
