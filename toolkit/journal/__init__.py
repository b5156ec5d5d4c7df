"""The investigation journal: one SQLite file of steps, runs, verdicts and evidence.

``Journal(path, investigation=...)`` writes (each write committed at once, secrets
redacted at the boundary) and reads back plain pandas DataFrames. See ``_journal.py``.
"""

from __future__ import annotations

from toolkit.journal._coerce import BenchLike, LogEventLike, MetricRowLike, ReadinessLike, SpecLike
from toolkit.journal._frames import SWITCH, flatten_spec
from toolkit.journal._journal import Journal
from toolkit.journal._recorder import STEP_KINDS, StepRecorder, StepStatus, StepVerdict

__all__ = [
    "Journal",
    "StepRecorder",
    "StepVerdict",
    "StepStatus",
    "STEP_KINDS",
    "SWITCH",
    "flatten_spec",
    "SpecLike",
    "BenchLike",
    "ReadinessLike",
    "MetricRowLike",
    "LogEventLike",
]
