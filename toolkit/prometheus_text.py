"""Prometheus text pages -> samples. Pure: the stdlib alone.

Both engines' ``/metrics`` and a DCGM exporter speak the text format 0.0.4; the sensors (``observe/``) and
the benchmark's spec-decode counters (``benchmark/server_view``) both parse pages here.

>>> samples = parse_prometheus('vllm:num_requests_running{engine="0",model_name="m"} 3.0 1712345678000')
>>> samples[0].name, samples[0].labels["engine"], samples[0].value
('vllm:num_requests_running', '0', 3.0)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["PromSample", "parse_prometheus"]

_LINE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?[ \t]+(?P<value>\S+)(?:[ \t]+\S+)?[ \t]*$",
    re.DOTALL,
)
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*,?', re.DOTALL)
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass(frozen=True)
class PromSample:
    """One line of a Prometheus page: series name, labels, value (NaN and ±Inf kept as floats)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    value: float = math.nan


def _labels(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    return {match.group(1): re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], match.group(2))
            for match in _LABEL.finditer(text)}


def parse_prometheus(text: str) -> list[PromSample]:
    """Every sample line of a text page; comments, blank and malformed lines are skipped."""
    out = []
    for raw in text.split("\n"):  # the format separates lines by \n alone: a label may hold \f or \x1c
        line = raw.rstrip("\r").strip(" \t")
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            continue
        try:
            value = float(match.group("value"))  # accepts NaN, +Inf, -Inf as the format writes them
        except ValueError:
            continue
        out.append(PromSample(match.group("name"), _labels(match.group("labels")), value))
    return out
