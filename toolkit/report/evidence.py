"""The decisive log lines of each step: the lines that decided it, never the noise around them.

Benign lines are counted by rule, not quoted (every rank prints SGLang 0.5.x's ``Ignore import error
when loading sglang.srt.models.glmasr``; the seed's wait loop died on TP5's copy), and the access lines
of the toolkit's own probes are facts about the toolkit, not the engine. Pure: it reads the verdicts
and ``caused`` marks the journal stored and classifies nothing again (docs/postmortem.md).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolkit.logs.caused import REQUEST
from toolkit.logs.rules import Verdict

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["readiness_lines", "benign_sentence", "recorded_lines", "metric_differences", "MetricDifference"]

_CONTEXT_LINES = 8
# Metric-line fields a reader compares between configurations, in the words SGLang prints them.
_COMPARED = (("cuda_graph", "cuda graph"), ("accept_len", "accept len"), ("gen_throughput", "gen throughput (token/s)"))
_NOT_LOG_KINDS = frozenset({"gpu", "prometheus", "cache", "equivalence"})  # recorded beside runs, not log lines


def readiness_lines(readiness: Mapping[str, Any] | None) -> list[str]:
    """The start-up's decisive lines: the engine's ready line, or the first fatal line after its context."""
    if not readiness:
        return []
    failure = readiness.get("failure")
    if isinstance(failure, Mapping):
        decisive = failure.get("decisive")
        context = [str(line) for line in failure.get("context") or [] if str(line).strip()]
        last = str(decisive.get("raw") or decisive.get("text") or "") if isinstance(decisive, Mapping) else ""
        lines = context[-_CONTEXT_LINES:] + ([last] if last and last not in context else [])
        return lines or [str(failure.get("message") or "")]
    ready_line = readiness.get("ready_line")
    if not readiness.get("ready") or not isinstance(ready_line, Mapping) or not ready_line.get("raw"):
        return []
    return [str(ready_line["raw"]).rstrip("\n")]


def _lines(count: int, what: str) -> str:
    return f"{count} {what}" + ("" if count == 1 else "s")


def _stored(lines: pd.DataFrame) -> list[tuple[str | None, str, str | None, str | None, str | None]]:
    """(verdict, text, rule, rank, caused) of each recorded line, as the journal stored them."""
    def text_or_none(value: object) -> str | None:
        return value if isinstance(value, str) and value else None

    return [(text_or_none(row.verdict), str(row.text), text_or_none(row.rule), text_or_none(row.rank),
             text_or_none(row.caused)) for row in lines.itertuples()]


def benign_sentence(lines: pd.DataFrame) -> str | None:
    """``16 error-looking lines on 8 ranks (TP0 to TP7) were judged benign (rule x16) and are not quoted.``"""
    stored = _stored(lines)
    probes = sum(1 for *_, caused in stored if caused == REQUEST)
    benign = [(rule or "?", rank) for verdict, _, rule, rank, caused in stored
              if verdict == Verdict.BENIGN.value and caused != REQUEST]
    ours = f" {_lines(probes, 'access line')} of the toolkit's own probes are left out too." if probes else ""
    if not benign:
        return ours.strip() or None
    counts = Counter(rule for rule, _ in benign)
    rules = ", ".join(f"{rule} x{count}" for rule, count in counts.items())
    ranks = sorted({rank for _, rank in benign if rank}, key=lambda r: (len(r), r))
    where = f" on {len(ranks)} ranks ({ranks[0]} to {ranks[-1]})" if len(ranks) > 1 else ""
    verb = "was" if len(benign) == 1 else "were"
    return f"{_lines(len(benign), 'error-looking line')}{where} {verb} judged benign ({rules}) and not quoted.{ours}"


def recorded_lines(lines: pd.DataFrame) -> list[str]:
    """The step's recorded lines worth quoting: from the first fatal line on (a traceback's frames), and any
    line a person recorded by hand; never a benign or shutdown line, nor a line the toolkit caused."""
    kept = [text for verdict, text, _, _, caused in _stored(lines)
            if verdict not in (Verdict.BENIGN.value, Verdict.SHUTDOWN.value) and caused is None and text.strip()]
    return kept[:_CONTEXT_LINES * 2]


@dataclass(frozen=True)
class MetricDifference:
    """What the server's own metric lines said per configuration, for the fields that differ between them.

    ``fields``: (column, the engine's name for it); ``rows``: (configuration, lines, column -> shown value).
    """

    kind: str
    fields: tuple[tuple[str, str], ...]
    rows: tuple[tuple[str, int, dict[str, str]], ...]

    def sentences(self) -> list[str]:
        """One sentence per configuration, quoting the fields as the engine prints them."""
        return [f"{label}: " + ", ".join(f"`{name}: {values[c]}`" for c, name in self.fields if values.get(c))
                + f" ({_lines(count, self.kind + ' line')})" for label, count, values in self.rows]


def _shown(values: pd.Series, column: str) -> str:
    kept = values.dropna()
    if kept.empty:
        return ""
    if column == "cuda_graph":
        return " and ".join(str(bool(v)) for v in sorted({bool(v) for v in kept}))
    number = float(kept.astype("float64").median())
    return "" if math.isnan(number) else f"{number:.2f}" if column == "accept_len" else f"{number:.1f}"


def metric_differences(metrics: pd.DataFrame, labels: Sequence[str]) -> list[MetricDifference]:
    """Per kind of metric line, the fields that differ between ``labels`` (numbers: medians 5 % apart)."""
    if metrics.empty or "kind" not in metrics.columns or len(labels) < 2:
        return []
    out = []
    for kind, lines in metrics[~metrics["kind"].isin(_NOT_LOG_KINDS)].groupby("kind", sort=True):
        per_label = {label: rows for label in labels if len(rows := lines[lines["label"] == label])}
        if len(per_label) < 2:
            continue
        fields = []
        for column, name in _COMPARED:
            if column not in lines.columns:
                continue
            shown = {label: _shown(rows[column], column) for label, rows in per_label.items()}
            differs = len({v for v in shown.values() if v}) > 1 and (column == "cuda_graph" or _spread(shown) > 0.05)
            # The accept length decides whether speculation can pay: shown wherever a configuration has one.
            if differs or (column == "accept_len" and any(shown.values())):
                fields.append((column, name))
        if fields:
            rows = [(label, len(r), {c: _shown(r[c], c) for c, _ in _COMPARED if c in r.columns})
                    for label, r in per_label.items()]
            out.append(MetricDifference(str(kind), tuple(fields), tuple(rows)))
    return out


def _spread(shown: Mapping[str, str]) -> float:
    numbers = [float(v) for v in shown.values() if v]
    return (max(numbers) - min(numbers)) / max(abs(max(numbers)), 1e-9) if numbers else 0.0
