"""The post-mortem's diagnoses: each ``tk.diagnose`` step's ranked reasons, evidence, and what followed.

A later step whose hypothesis says ``follows diagnosis step N, reason K`` is quoted with its verdict,
so a proposal reads as confirmed or refuted.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.moves.diagnose.result import diagnosis_folders, follows, load_diagnosis
from toolkit.report.document import Block, Bullets, Heading, Paragraph, Table, figure
from toolkit.views import plots

if TYPE_CHECKING:
    import pandas as pd

    from toolkit.journal import Journal

__all__ = ["diagnosis_section"]


def _follow_ups(steps: pd.DataFrame, step_id: int) -> list[str]:
    out = []
    for row in steps.itertuples():
        link = follows(row.hypothesis if isinstance(row.hypothesis, str) else None)
        if link is not None and link[0] == step_id:
            verdict = row.verdict if isinstance(row.verdict, str) else "not judged yet"
            note = f": {row.verdict_note}" if isinstance(row.verdict_note, str) and row.verdict_note else ""
            out.append(f"reason {link[1]} tested in step #{row.seq} {row.title}, verdict: {verdict}{note}")
    return out


def diagnosis_section(journal: Journal, steps: pd.DataFrame, dpi: int) -> list[Block]:
    """Blocks for every diagnosis step of the journal (none when there is none)."""
    blocks: list[Block] = []
    for row in steps.itertuples():
        for folder in diagnosis_folders(row.notes if isinstance(row.notes, str) else None):
            if not blocks:
                blocks.append(Heading("Diagnoses: why the slow side is slow"))
            path = Path(folder) if Path(folder).is_absolute() else journal.path.parent / folder
            blocks.append(Heading(f"#{row.seq} {row.title}", 3))
            try:
                record = load_diagnosis(path)
            except ValueError as exc:
                blocks.append(Paragraph(str(exc), True))
                continue
            blocks.append(Paragraph(str(record["summary"])))
            if not record["gap"]["beyond_noise"]:
                continue
            proposals = {p["rank"]: p for p in record["proposals"]}
            shares = ["0 (ruled out)" if r["ruled_out"] else "not measured" if r["share"] is None
                      else f"{100 * r['share']:.0f}%" for r in record["reasons"]]
            rows = tuple((str(r["rank"]), r["title"], share, r["confidence"], ", ".join(r["kinds"]) or "-",
                          proposals[r["rank"]]["text"] if r["rank"] in proposals else "")
                         for r, share in zip(record["reasons"], shares, strict=True))
            leading = [r for r in record["reasons"] if not r["ruled_out"]][:3]
            columns = ("rank", "reason", "share of the gap", "confidence", "evidence", "next experiment")
            blocks += [Table(columns, rows),
                       Bullets(tuple(f"{r['rank']}. {r['title']} (evidence) " + "; ".join(r["evidence"][:4])
                                     for r in leading)),
                       figure(plots.diagnosis(record), f"diagnosis_{row.step_id}",
                              f"diagnosis of step {row.seq}: reasons ranked", dpi)]
            followed = _follow_ups(steps, int(row.step_id))
            blocks.append(Bullets(tuple(followed)) if followed else
                          Paragraph("No step has tested its proposals yet (a step tests one when its hypothesis is "
                                    "diagnosis.hypothesis(K)).", True))
    return blocks
