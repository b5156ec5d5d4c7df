"""The investigation journal: one SQLite file of steps, runs, verdicts and evidence.

``Journal(path, investigation=...)`` writes (each write committed at once, secrets
redacted at the boundary) and reads back plain pandas DataFrames. It records the toolkit's
own types through one adapter each (``adapters.py``). See ``_journal.py``.
"""

from __future__ import annotations

from toolkit.journal._journal import Journal
from toolkit.journal._recorder import STEP_KINDS, StepRecorder, StepStatus, StepVerdict
from toolkit.journal.adapters import SourceRepo
from toolkit.journal.adapters import spec_columns as flatten_spec
from toolkit.server.naming import SWITCH

__all__ = [
    "Journal",
    "StepRecorder",
    "StepVerdict",
    "StepStatus",
    "STEP_KINDS",
    "SourceRepo",
    "SWITCH",
    "flatten_spec",
]
