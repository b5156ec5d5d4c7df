"""How much of a long investigation a post-mortem shows: the first and last steps, and a count of the rest.

A post-mortem that lists every step of an overnight sweep is unreadable and slow (issue 20: 9.7k
steps, 152 s, 2.6 GB).

>>> import pandas as pd
>>> shown, left = cap(pd.DataFrame({"seq": range(1, 11)}), limit=4)
>>> shown["seq"].tolist(), left
([1, 2, 9, 10], 6)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit.report.document import Paragraph

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MAX_STEPS", "cap", "left_out"]

#: steps (or runs) a per-step section shows at most
MAX_STEPS = 200


def cap(frame: pd.DataFrame, limit: int = MAX_STEPS) -> tuple[pd.DataFrame, int]:
    """The first and last ``limit // 2`` rows of ``frame``, and how many rows fell between them."""
    if len(frame) <= limit:
        return frame, 0
    half = max(limit // 2, 1)
    return frame.iloc[list(range(half)) + list(range(len(frame) - half, len(frame)))], len(frame) - 2 * half


def left_out(count: int, what: str, where: str) -> list[Paragraph]:
    """``[Paragraph("... 9,800 more steps ...")]`` when rows were left out, else []."""
    if count <= 0:
        return []
    return [Paragraph(f"... {count:,} more {what} between the first and the last shown are left out here; "
                      f"{where} lists them all.", True)]
