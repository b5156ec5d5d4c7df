"""The investigation journal: one SQLite file of steps, runs, verdicts and evidence, read as DataFrames."""

from __future__ import annotations

from toolkit.journal._journal import Journal
from toolkit.journal._recorder import STEP_KINDS, StepRecorder, StepStatus, StepVerdict
from toolkit.journal.adapters import SourceRepo
from toolkit.journal.adapters import spec_columns as flatten_spec
from toolkit.server.naming import SWITCH

__all__ = ["Journal", "StepRecorder", "StepVerdict", "StepStatus", "STEP_KINDS", "SourceRepo", "SWITCH",
           "flatten_spec"]
