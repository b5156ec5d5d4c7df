"""Diagnose: from "B is slower than A" to the ranked reasons why, with evidence (docs/diagnose.md).

Pure core: :mod:`.resolved` (the engine's resolved configuration from its start-up lines),
:mod:`.difference` (one difference and its topic), :mod:`.series` (log metric lines, GPU
telemetry, ``/metrics``), :mod:`.profile_gap` (profiles per output token: inside or outside CUDA
graphs, idle gaps), :mod:`.environment` (environment per rank, code), :mod:`.analyse` (both
sides' evidence -> every difference), :mod:`.ranking` (share of the gap, confidence),
:mod:`.proposal` (the next experiment in the release's flags), :mod:`.result` (the
:class:`Diagnosis` and its record). Shell: :mod:`.gather` (a plan's bench that watches),
:mod:`.move` (:func:`diagnose`), :mod:`.commits` (:func:`diagnose_commits`).
"""

from __future__ import annotations

from toolkit.moves.diagnose.analyse import SideEvidence, gather_differences
from toolkit.moves.diagnose.commits import diagnose_commits
from toolkit.moves.diagnose.difference import Difference
from toolkit.moves.diagnose.move import diagnose
from toolkit.moves.diagnose.proposal import Proposal, propose
from toolkit.moves.diagnose.ranking import Gap, Reason, rank
from toolkit.moves.diagnose.result import Diagnosis, follows, load_diagnosis

__all__ = ["diagnose", "diagnose_commits", "Diagnosis", "Difference", "Reason", "Gap", "Proposal", "SideEvidence",
           "gather_differences", "rank", "propose", "follows", "load_diagnosis"]
