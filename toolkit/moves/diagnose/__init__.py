"""Diagnose: from "B is slower than A" to the ranked reasons why, with evidence (docs/diagnose.md).

Pure core: resolved, difference, series, profile_gap, environment, analyse, ranking, proposal, result.
Shell: gather (a plan's bench that watches), move (:func:`diagnose`), commits (:func:`diagnose_commits`).
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
