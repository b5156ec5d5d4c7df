"""What a performance bisection found, with every probe as evidence: :class:`BisectResult`.

Each probe keeps its samples, verdict, reason and journal step: the table shows why each half went.
"""

from __future__ import annotations

import html
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.moves.bisect.gitparse import CommitVerdict
from toolkit.moves.bisect.judgement import Judgement

__all__ = ["Probe", "BisectResult", "NothingToBisect"]

ProbeRole = Literal["good_ref", "bad_ref", "probe", "recheck"]
FRAME_COLUMNS = ["probe", "round", "host", "order", "commit", "subject", "role", "samples", "median", "verdict",
                 "confidence", "reason", "error"]


class NothingToBisect(ToolkitError):
    """The good and bad ends measure the same within noise (or the "bad" one is faster)."""

    def __init__(self, message: str, *, good_samples: Sequence[float], bad_samples: Sequence[float],
                 evidence: Sequence[str] = (), hint: str | None = None, could_resolve: bool = False) -> None:
        self.good_samples = tuple(good_samples)
        self.bad_samples = tuple(bad_samples)
        self.could_resolve = could_resolve  # within noise, yet the change is large enough that more runs may tell
        super().__init__(message, evidence=evidence, hint=hint)


@dataclass(frozen=True)
class Probe:
    """One measured commit: an end or a probe; ``order`` its place in the history, ``probe`` in measuring.

    ``samples``: one per run (NaN: failed); ``confidence``: that the verdict is right (None: skip).
    """

    probe: int
    order: int
    commit: str
    subject: str
    role: ProbeRole
    samples: tuple[float, ...]
    verdict: CommitVerdict
    reason: str
    error: str | None = None
    judgement: Judgement | None = None
    step_id: int | None = None
    wall_s: float = 0.0
    host: str = ""
    round: int = 0
    confidence: float | None = None

    @property
    def median(self) -> float:
        finite = [x for x in self.samples if not math.isnan(x)]
        return statistics.median(finite) if finite else math.nan

    def row(self) -> dict[str, object]:
        return {"probe": self.probe, "round": self.round, "host": self.host, "order": self.order,
                "commit": self.commit, "subject": self.subject, "role": self.role,
                "samples": list(self.samples), "median": self.median, "verdict": self.verdict,
                "confidence": self.confidence, "reason": self.reason, "error": self.error}


@dataclass(frozen=True, eq=False)
class BisectResult:
    """The first bad commit (or the candidates skips left), the probes behind it (``frame``), git's log."""

    metric: str
    good: str
    bad: str
    first_bad: str | None
    candidates: tuple[str, ...]
    probes: tuple[Probe, ...]
    threshold: float
    margin: float
    lower_is_better: bool
    git_log: str = ""
    notes: tuple[str, ...] = ()
    wall_s: float = 0.0
    subjects: tuple[tuple[str, str], ...] = ()
    confidence: float | None = None  # that the answer is right: every verdict on the way, and the ends
    rounds: int = 0  # rounds of probes after the ends (each: one probe per host, side by side)
    hosts: tuple[str, ...] = ()
    why: str | None = None  # set when first_bad is None: why there is no single answer
    advice: str | None = None  # and what to do about it
    git_first_bad: str | None = None  # what `git bisect` concluded from the same verdicts

    @property
    def found(self) -> bool:
        return self.first_bad is not None

    @property
    def first_bad_subject(self) -> str | None:
        return dict(self.subjects).get(self.first_bad) if self.first_bad else None

    @property
    def probe_count(self) -> int:
        """Commits probed between the ends (the two reference measurements not counted)."""
        return sum(1 for p in self.probes if p.role == "probe")

    @property
    def skipped(self) -> tuple[Probe, ...]:
        """Commits between the ends that could not be measured (the ends are never skipped)."""
        return tuple(p for p in self.probes if p.verdict == "skip" and p.role in ("probe", "recheck"))

    @property
    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([p.row() for p in self.probes], columns=FRAME_COLUMNS)

    def summary(self) -> str:
        references = {p.role: p for p in self.probes if p.role != "probe"}
        good, bad = references.get("good_ref"), references.get("bad_ref")
        ends = (
            f"{self.metric} {good.median:.4g} at good {self.good[:8]}, {bad.median:.4g} at bad {self.bad[:8]}"
            if good is not None and bad is not None else self.metric
        )
        skips = f", {len(self.skipped)} skipped" if self.skipped else ""
        hosts = f" in {self.rounds} rounds on {len(self.hosts)} hosts" if len(self.hosts) > 1 else ""
        probes = f"{self.probe_count} probes{skips}{hosts} in {self.wall_s:.0f} s"
        sure = f"confidence {self.confidence:.4f}; " if self.confidence is not None else ""
        if self.first_bad:
            head = f"first bad commit: {self.first_bad[:12]} {self.first_bad_subject or ''}".rstrip()
        elif self.candidates:
            head = f"no single first bad commit: it is one of {', '.join(c[:12] for c in self.candidates[:8])}"
        else:
            head = "no first bad commit"
        text = f"{head} ({sure}{ends}; threshold {self.threshold:.4g} ± {self.margin:.2g}; {probes})"
        if self.first_bad is None:
            text += f"\nwhy: {self.why or 'see the probes'}\nwhat to do: {self.advice or 'read the probes below'}"
        return text

    def __str__(self) -> str:
        columns = ["probe", "round", "host", "order", "commit", "subject", "median", "verdict", "confidence", "reason"]
        table = self.frame[columns].assign(commit=lambda f: f["commit"].str[:10],
                                           subject=lambda f: f["subject"].str[:48])
        return "\n".join([self.summary(), *self.notes, table.to_string(index=False)])

    def _repr_html_(self) -> str:
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        table = self.frame.drop(columns=["samples"]).to_html(index=False, float_format=lambda x: f"{x:.4g}")
        summary = html.escape(self.summary()).replace("\n", "<br>")
        return f"<p><b>{summary}</b></p>{notes}{table}"
