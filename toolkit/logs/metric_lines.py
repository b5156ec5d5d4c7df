"""Server-side metric lines -> :class:`MetricRow`.

Keys are the printed names normalised (``#new-token`` -> ``new_token``; a ``%`` value gets ``_pct``,
``N reqs`` ``_reqs``, ``N tokens`` ``_tokens``). Always present: ``sglang_decode`` running_req, queue_req,
gen_throughput (accept_len with speculative decoding); ``sglang_prefill`` running_req, queue_req, new_token;
``vllm_throughput`` prompt_throughput, gen_throughput, running_reqs; ``vllm_specdecode``
mean_acceptance_length, accepted_tokens, drafted_tokens. Throughputs are the engine's own figures, not ours.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from types import MappingProxyType

from toolkit.logs._construct import fast_constructor
from toolkit.logs._metric_shapes import BOOL, FLOAT, INT, Shape, ShapeCache, floats, int_as_float, typed

__all__ = ["MetricRow", "MetricValue", "parse_metric", "METRIC_KINDS", "MetricReader", "metric_reader", "metric_at"]

MetricValue = float | int | bool | tuple[float, ...]
METRIC_KINDS = ("sglang_decode", "sglang_prefill", "vllm_throughput", "vllm_specdecode")


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One parsed metric line: its kind, values, time, rank and 1-based line number."""

    kind: str
    values: Mapping[str, MetricValue]
    timestamp: datetime | None
    rank: str | None
    line_no: int

    def to_dict(self) -> dict[str, object]:
        """JSON-safe form: ``{"line": n, "kind": ..., "values": {...}}`` (tuples become lists)."""
        values = {k: list(v) if isinstance(v, tuple) else v for k, v in self.values.items()}
        return {"line": self.line_no, "kind": self.kind, "values": values}


_SGLANG = re.compile(r"\b(Decode|Prefill) batch(?: ?\[[^\]]*\])?[.,:]? +")
_UNIT = re.compile(r" \([^)]*\)")
_SEPARATORS = re.compile(r"[\s\-/]+")
_V0_SPEC_KEYS = {"number_of_accepted_tokens": "accepted_tokens", "number_of_draft_tokens": "drafted_tokens"}
_SUFFIX = {"%": "_pct", " reqs": "_reqs", " tokens": "_tokens", " tokens/s": "", None: ""}


@lru_cache(maxsize=1024)
def _key(raw: str, unit: str | None = None) -> str:
    """``gen throughput (token/s)`` and vLLM's ``Avg generation throughput`` -> ``gen_throughput``."""
    key = _SEPARATORS.sub("_", _UNIT.sub("", raw).strip().lstrip("#").strip().lower())
    if key.startswith("avg_") and key.endswith("throughput"):
        key = key[4:]
    key = key.replace("generation_", "gen_") + _SUFFIX.get(unit, "")
    return _V0_SPEC_KEYS.get(key, key)


def _number(token: str) -> float | int | bool | None:
    """A printed scalar: ``12`` -> 12, ``0.39`` -> 0.39, ``True`` -> True; anything else -> None."""
    try:
        return float(token) if ("." in token or "e" in token or "E" in token) else int(token)
    except ValueError:
        if token == "True" or token == "False":
            return token == "True"
        return None


def _sglang(rest: str) -> dict[str, MetricValue]:
    values: dict[str, MetricValue] = {}
    for part in rest.rstrip(", ").split(", "):  # 0.5.x decode lines end "#queue-req: 0, " (or ",": a paste)
        name, sep, value = part.partition(": ")
        if not sep:
            continue
        pct = value.strip().endswith("%")
        number = _number(value.strip().removesuffix("%"))
        if number is not None:
            values[_key(name, "%" if pct else None)] = float(number) if pct else number
    return values


def _vllm(rest: str) -> dict[str, MetricValue]:
    values: dict[str, MetricValue] = {}
    listed: list[float] | None = None
    listed_key = ""
    for part in rest.rstrip(". ").split(", "):
        name, sep, value = part.partition(": ")
        if not sep:  # a further element of "Per-position acceptance rate: 0.756, 0.444, ..."
            number = _number(part) if listed is not None else None
            if listed is not None and isinstance(number, int | float) and not isinstance(number, bool):
                listed.append(float(number))
            continue
        if listed is not None:
            values[listed_key] = tuple(listed)
            listed = None
        token, _, unit = value.partition(" ")
        suffix = "%" if token.endswith("%") else (" " + unit if unit else None)
        number = _number(token.rstrip("%"))
        if number is None:
            continue
        key = _key(name, suffix)
        if key.startswith("per_position"):
            listed, listed_key = [float(number)], key
        else:
            values[key] = number
    if listed is not None:
        values[listed_key] = tuple(listed)
    return values


# -- shapes: compiled readers for repeated lines (see _metric_shapes); each builder below reads
# a line as the general parser above does, field by field, or gives up (None) on anything else.
_NAME = re.compile(r"[ #]*[A-Za-z]")  # a field name never reads as a number (nor as a list element)


def _sglang_shape(rest: str) -> Shape | None:
    pieces, keys, converters = [], [], []
    for part in rest.rstrip(", ").split(", "):
        name, sep, value = part.partition(": ")
        pct = value.endswith("%")
        value_type = typed(value[:-1] if pct else value)
        if not sep or not _NAME.match(name) or value_type is None or (pct and value_type[0] == BOOL):
            return None
        pattern, convert = value_type
        pieces.append(f"{re.escape(name)}: ({pattern}){'%' if pct else ''}")
        keys.append(_key(name, "%") if pct else _key(name))
        converters.append((int_as_float if pattern == INT else float) if pct else convert)
    return Shape(pieces, keys, converters, tail=r"[, ]*")  # the general parser strips a trailing ", "


def _vllm_shape(rest: str) -> Shape | None:
    pieces, keys, converters = [], [], []
    parts = rest.rstrip(". ").split(", ")
    i = 0
    while i < len(parts):
        name, sep, value = parts[i].partition(": ")
        token, _, unit = value.partition(" ")
        pct = token.endswith("%")
        value_type = typed(token[:-1] if pct else token)
        if not sep or not _NAME.match(name) or value_type is None:
            return None
        pattern, convert = value_type
        key = _key(name, "%" if pct else (" " + unit if unit else None))
        i += 1
        if key.startswith("per_position"):  # "Per-position acceptance rate: 0.756, 0.444, ...": floats only
            if pattern != FLOAT or pct or unit:
                return None
            while i < len(parts) and not parts[i].partition(": ")[1]:
                if (typed(parts[i]) or ("",))[0] != FLOAT:
                    return None
                i += 1
            pieces.append(f"{re.escape(name)}: ({FLOAT}(?:, {FLOAT})*)")
            convert = floats
        else:
            pieces.append(f"{re.escape(name)}: ({pattern}){'%' if pct else ''}{' ' + re.escape(unit) if unit else ''}")
        keys.append(key)
        converters.append(convert)
    return Shape(pieces, keys, converters, tail=r"[. ]*")  # the general parser strips trailing ". "


_SHAPES = ShapeCache()
_make_row = fast_constructor(MetricRow)


def _locate(text: str) -> tuple[str, int] | None:
    """The kind of metric line ``text`` is, and where its values begin; None when it is none."""
    if "batch" in text and (m := _SGLANG.search(text)) is not None:
        return ("sglang_decode" if m.group(1) == "Decode" else "sglang_prefill"), m.end()
    for marker, kind, skip in _VLLM_MARKERS:
        at = text.find(marker)
        if at >= 0:
            return kind, at + skip
    return None


# vLLM's throughput line keeps its marker in what is parsed ("Avg prompt throughput: 1.0 tokens/s, ...")
_VLLM_MARKERS = (("Avg prompt throughput:", "vllm_throughput", 0),
                 ("SpecDecoding metrics:", "vllm_specdecode", len("SpecDecoding metrics:")),
                 ("Speculative metrics:", "vllm_specdecode", len("Speculative metrics:")))  # vLLM v0


def parse_metric(text: str, *, line_no: int = 0, timestamp: datetime | None = None, rank: str | None = None) -> MetricRow | None:
    """Parse a metric line's text (header already removed); None when it is not one.

    >>> parse_metric("Decode batch. #running-req: 1, gen throughput (token/s): 39.53, #queue-req: 0").values["gen_throughput"]
    39.53
    """
    located = _locate(text)
    if located is None:
        return None
    kind, start = located
    general, build = (_sglang, _sglang_shape) if kind.startswith("sglang") else (_vllm, _vllm_shape)
    values = _SHAPES.values(kind, text[start:], general, build)
    if not values or (kind == "vllm_throughput" and "running_reqs" not in values):
        return None  # a line cut short (a terminal wrapped `Running: 32 r` / `eqs, ...`): not a whole row
    return _make_row(kind, MappingProxyType(values), timestamp, rank, line_no)


# A metric line read by position: its kind and the function that gives its values from its text.
MetricReader = tuple[str, Callable[[str], dict[str, MetricValue]]]


def metric_reader(text: str) -> MetricReader | None:
    """How to read every metric line with ``text``'s digit mask by slicing; None: through parse_metric.

    >>> kind, read = metric_reader("Decode batch. #running-req: 1, #queue-req: 0")
    >>> kind, read("Decode batch. #running-req: 7, #queue-req: 3")
    ('sglang_decode', {'running_req': 7, 'queue_req': 3})
    """
    located = _locate(text)
    if located is None or parse_metric(text) is None:  # (parse_metric learns the line's shape when it can)
        return None
    kind, start = located
    found = _SHAPES.match(kind, text[start:])
    if found is None or not found[0].digit_blind:
        return None
    shape, m = found
    spans = [(start + m.start(i), start + m.end(i)) for i in range(1, len(shape.keys) + 1)]
    return kind, shape.reader_at(spans)


def metric_at(text: str, reader: MetricReader, *, line_no: int = 0, timestamp: datetime | None = None,
              rank: str | None = None) -> MetricRow:
    """``parse_metric(text, ...)`` for a text of the digit mask ``reader`` was made for."""
    return _make_row(reader[0], MappingProxyType(reader[1](text)), timestamp, rank, line_no)
