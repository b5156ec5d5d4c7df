#!/usr/bin/env python3
"""Score the log classifier on a folder of hand-labelled logs, the way docs/log-rules.md counts.

A folder holds ``*.log`` files and a ``labels.json`` in the corpus format (``expected_state``,
``first_fatal_line``, ``acceptable_fatal_lines``, ...; see ``tests/data/logs/labels.json``).
Each log is read whole by :func:`toolkit.logs.classify_file_bytes`, the function the CLI's
``logs classify FILE --json`` calls. A log is *right* when its state is right and, on a log
labelled failed, the fatal line found is one of the acceptable ones. A *false abort* is a log
labelled ready or starting that the classifier calls failed: the mistake that stops a healthy
server, so it is counted on its own.

Why a script and not a test: a held-out folder (``tests/data/logs-heldout/``) must stay out of
the tests the rule writers run, and a fresh batch is scored once, before any rule changes.

    python scripts/score_logs.py tests/data/logs-heldout
    python scripts/score_logs.py tests/data/logs --batch 9 --misses
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.logs import classify_file_bytes


@dataclass(frozen=True)
class Verdict:
    """One labelled log next to what the classifier said of it."""

    file: str
    server: str
    expected_state: str
    state: str
    acceptable_fatal_lines: tuple[int, ...]
    fatal_line: int | None
    fatal_reason: str | None

    @property
    def state_right(self) -> bool:
        return self.state == self.expected_state

    @property
    def fatal_right(self) -> bool:
        """On a failed log: the fatal line found is an acceptable one (vacuously true otherwise)."""
        return self.expected_state != "failed" or self.fatal_line in self.acceptable_fatal_lines

    @property
    def right(self) -> bool:
        return self.state_right and self.fatal_right

    @property
    def false_abort(self) -> bool:
        return self.expected_state != "failed" and self.state == "failed"


@dataclass(frozen=True)
class Score:
    """The figures docs/log-rules.md records per batch."""

    logs: int
    right: int
    state_right: int
    failed_logs: int
    fatal_right: int
    healthy_logs: int
    false_aborts: int

    def line(self) -> str:
        pct = f"{100 * self.right / self.logs:.0f}%" if self.logs else "-"
        return (
            f"{self.logs} logs: {self.right} right ({pct}); state right {self.state_right}/{self.logs}; "
            f"first fatal line right {self.fatal_right}/{self.failed_logs} failed logs; "
            f"healthy called failed {self.false_aborts}/{self.healthy_logs}"
        )


def load_labels(folder: Path, batch: str | None = None) -> list[dict[str, Any]]:
    """The folder's labels, optionally only one batch's (``9``, ``heldout``: compared as text)."""
    entries: list[dict[str, Any]] = json.loads((folder / "labels.json").read_text())
    return [e for e in entries if batch is None or str(e.get("batch")) == batch]


def judge(folder: Path, entry: dict[str, Any]) -> Verdict:
    """Classify one labelled log and pair the answer with its label."""
    summary = classify_file_bytes((folder / str(entry["file"])).read_bytes())
    first = entry["first_fatal_line"]
    acceptable = {int(x) for x in entry.get("acceptable_fatal_lines") or []}
    if isinstance(first, int):
        acceptable.add(first)
    return Verdict(
        file=str(entry["file"]),
        server=str(entry["server"]),
        expected_state=str(entry["expected_state"]),
        state=summary.state,
        acceptable_fatal_lines=tuple(sorted(acceptable)),
        fatal_line=summary.fatal_line,
        fatal_reason=summary.fatal_reason,
    )


def score(verdicts: list[Verdict]) -> Score:
    """Count the verdicts the way the per-batch table does."""
    return Score(
        logs=len(verdicts),
        right=sum(v.right for v in verdicts),
        state_right=sum(v.state_right for v in verdicts),
        failed_logs=sum(v.expected_state == "failed" for v in verdicts),
        fatal_right=sum(v.expected_state == "failed" and v.fatal_right for v in verdicts),
        healthy_logs=sum(v.expected_state != "failed" for v in verdicts),
        false_aborts=sum(v.false_abort for v in verdicts),
    )


def miss_line(v: Verdict) -> str:
    said = f"state {v.state}, fatal line {v.fatal_line}" + (f" ({v.fatal_reason})" if v.fatal_reason else "")
    return f"{v.file}: said {said}; label {v.expected_state}, fatal lines {list(v.acceptable_fatal_lines)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a folder with *.log files and labels.json")
    parser.add_argument("--batch", default=None, help="only the logs of this batch (9, 10, heldout, ...)")
    parser.add_argument("--misses", action="store_true", help="list every log that is not right")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    if not (args.folder / "labels.json").exists():
        parser.error(
            f"{args.folder} has no labels.json; pass a folder of labelled logs such as tests/data/logs"
        )
    verdicts = [judge(args.folder, e) for e in load_labels(args.folder, args.batch)]
    figures = score(verdicts)
    if args.json:
        print(json.dumps({**figures.__dict__, "misses": [miss_line(v) for v in verdicts if not v.right]}))
        return 0
    print(figures.line())
    by_engine = Counter(v.server for v in verdicts)
    right_by_engine = Counter(v.server for v in verdicts if v.right)
    print("by engine: " + ", ".join(f"{k} {right_by_engine[k]}/{n}" for k, n in by_engine.most_common()))
    if args.misses:
        for v in verdicts:
            if not v.right:
                print("  miss " + miss_line(v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
