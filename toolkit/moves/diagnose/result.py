"""A diagnosis: the measured gap, the ranked reasons with their evidence, the proposals; its record.

The record (``<journal>.diagnoses/step-<id>/diagnosis.json``) is plain JSON, so a post-mortem needs
neither the servers nor this process.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.moves.diagnose.difference import Difference
from toolkit.moves.diagnose.profile_gap import ProfileDigest
from toolkit.moves.diagnose.proposal import Proposal
from toolkit.moves.diagnose.ranking import Gap, Reason

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Diagnosis", "DIAGNOSIS_FILE", "follows", "load_diagnosis", "diagnosis_folders"]

DIAGNOSIS_FILE = "diagnosis.json"
_FOLLOWS = re.compile(r"follows diagnosis step (\d+), reason (\d+)")
_NOTE = re.compile(r"^diagnosis: (\S+)", re.MULTILINE)


def follows(hypothesis: str | None) -> tuple[int, int] | None:
    """``(diagnosis step, reason rank)`` that a step's hypothesis says it follows, or None."""
    found = _FOLLOWS.search(hypothesis or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def diagnosis_folders(notes: str | None) -> list[str]:
    """The folders a step's notes name as ``diagnosis: <folder>``."""
    return _NOTE.findall(notes or "")


@dataclass(frozen=True, eq=False)
class Diagnosis:
    """Why ``label_slow`` is slower than ``label_fast``: ``reasons`` ranked, ``proposals`` for the top ones."""

    label_fast: str
    label_slow: str
    gap: Gap
    reasons: tuple[Reason, ...]
    proposals: tuple[Proposal, ...]
    release: str | None
    step_id: int | None = None
    profiles: Mapping[str, ProfileDigest] = field(default_factory=dict)
    costs_s: Mapping[str, float] = field(default_factory=dict)  # measure, gather, profile, rank, record

    @property
    def beyond_noise(self) -> bool:
        return self.gap.beyond_noise

    @property
    def top(self) -> Reason | None:
        return self.reasons[0] if self.beyond_noise and self.reasons else None

    @property
    def differences(self) -> tuple[Difference, ...]:
        return tuple(d for r in self.reasons for d in r.differences)

    def proposal(self, rank: int) -> Proposal | None:
        return next((p for p in self.proposals if p.rank == rank), None)

    def hypothesis(self, rank: int = 1, text: str | None = None) -> str:
        """The hypothesis for a step that tests reason ``rank`` (in your words, ``text``): links it back here.

        >>> tk.compare_flag(host, eagle, "--speculative-attention-mode", "prefill", "decode",
        ...                 hypothesis=diagnosis.hypothesis(1, "decode mode fixes it"))  # doctest: +SKIP
        """
        reason = next((r for r in self.reasons if r.rank == rank), None)
        if reason is None:
            raise ValueError(f"this diagnosis has reasons 1 to {len(self.reasons)}, not {rank}")
        step = self.step_id if self.step_id is not None else 0
        return f"{text or reason.title} (follows diagnosis step {step}, reason {rank})"

    @property
    def summary_text(self) -> str:
        if not self.beyond_noise:
            return f"no difference beyond noise between {self.label_fast} and {self.label_slow}: {self.gap.text}"
        top = self.reasons[0] if self.reasons else None
        lead = f"; top reason: {top.title}, {top.verdict} ({top.confidence} confidence)" if top else ""
        proposal = self.proposal(1)
        return f"{self.label_slow} is slower than {self.label_fast}: {self.gap.text}{lead}" + (
            f"; next: {proposal.text}" if proposal else "")

    def table(self) -> pd.DataFrame:
        """One row per ranked reason: share of the gap, confidence, evidence kinds, the first evidence, proposal."""
        import pandas as pd

        rows = [(r.rank, r.title, r.verdict, None if r.share is None else round(100 * r.share, 1),
                 None if r.explains_ms is None else round(r.explains_ms, 3), r.confidence,
                 ", ".join(r.kinds) or "-", " | ".join(r.evidence[:3]),
                 p.text if (p := self.proposal(r.rank)) else "") for r in self.reasons]
        return pd.DataFrame(rows, columns=["rank", "reason", "verdict", "share_pct", "explains_ms_per_token",
                                           "confidence", "evidence_kinds", "evidence", "proposal"])

    def text(self) -> str:
        """The diagnosis as plain text: the gap, each reason with its evidence, the proposals."""
        lines = [self.summary_text]
        if not self.beyond_noise:
            return "\n".join(lines)
        for r in self.reasons:
            lines.append(f"{r.rank}. {r.title}: {r.verdict} [{r.confidence} confidence; "
                         f"evidence: {', '.join(r.kinds) or 'checked, alike'}]")
            lines += [f"     - {d.text}" for d in r.differences[:6]]
            lines += [f"       {line}" for line in r.evidence[:4]]
            if (proposal := self.proposal(r.rank)) is not None:
                lines.append(f"   next: {proposal.text}" + (f"\n     {proposal.call}" if proposal.call else ""))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Diagnosis: {self.text()}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON record (see the module docstring)."""
        return {
            "label_fast": self.label_fast, "label_slow": self.label_slow, "release": self.release,
            "step_id": self.step_id, "summary": self.summary_text,
            "gap": {"metric": self.gap.metric, "fast": self.gap.fast, "slow": self.gap.slow, "ci": list(self.gap.ci),
                    "beyond_noise": self.gap.beyond_noise, "per_token_ms": self.gap.per_token_ms},
            "reasons": [{"rank": r.rank, "topic": r.topic, "title": r.title, "verdict": r.verdict, "share": r.share,
                         "explains_ms": r.explains_ms, "confidence": r.confidence, "kinds": list(r.kinds),
                         "ruled_out": r.ruled_out, "evidence": list(r.evidence),
                         "differences": [{"kind": d.kind, "name": d.name, "fast": d.fast, "slow": d.slow,
                                          "same": d.same, "explains_ms": d.explains_ms} for d in r.differences]}
                        for r in self.reasons],
            "proposals": [{"rank": p.rank, "text": p.text, "call": p.call, "flag": p.flag} for p in self.proposals],
            "profiles": {side: {"output_tokens": d.output_tokens,
                                "groups": {g: {"busy_ms": t.busy_ms, "eager_ms": t.eager_ms, "idle_ms": t.idle_ms,
                                               "calls": t.calls, "phases": list(t.phases)}
                                           for g, t in d.groups.items()}}
                         for side, d in self.profiles.items()},
            "costs_s": dict(self.costs_s),
        }

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / DIAGNOSIS_FILE
        path.write_text(json.dumps(self.to_dict(), indent=1, default=str), encoding="utf-8")
        return path


def load_diagnosis(folder: str | Path) -> dict[str, Any]:
    """The JSON record of a diagnosis folder (what :meth:`Diagnosis.to_dict` wrote)."""
    path = Path(folder) / DIAGNOSIS_FILE
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"the diagnosis record {path} cannot be read ({exc}); it is written by tk.diagnose "
                         "beside the journal: was the folder moved without the journal?") from exc
    return data
