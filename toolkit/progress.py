"""Progress bars as plain text, so that a notebook reads right live, after reopening, and in the executed file.

tqdm's notebook bar is an ipywidget whose state is not saved: a reopened notebook showed "Error
displaying widget: model not found", and the executed file kept each bar's first text (issue 28).
A text bar's ``\\r`` redraws on stderr leave the last one as plain text.

>>> bar = progress_bar(total=3, desc="bench", unit="req", disable=True)
>>> bar.close()
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["DESC_LIMIT", "progress_bar", "short_desc"]

#: Characters of description a bar keeps: "localhost: B: 1ecaec28 [Feature] Report avg_spec_accept_leng" crushed
#: its bar to a quarter of the line.
DESC_LIMIT = 40


def short_desc(text: str, limit: int = DESC_LIMIT) -> str:
    """``text`` on one line, cut at a word boundary with "…" when longer than ``limit``."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    return line[: limit - 1].rsplit(" ", 1)[0].rstrip(" :,·") + "…"


def progress_bar(*, total: int, desc: str, unit: str, disable: bool, leave: bool = True,
                 position: int | None = None) -> tqdm:
    """A text tqdm bar on stderr, 100 columns wide, its description shortened (:func:`short_desc`)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=short_desc(desc), unit=unit, disable=disable, leave=leave, position=position,
                file=sys.stderr, ncols=100)
