"""Compiled readers for the metric line shapes a busy server repeats.

SGLang prints ``Decode batch. #running-req: 12, #token: 5544, ...`` thousands of times with new numbers.
From the first line of a shape one regex is compiled (names literal, each value typed), so a later line costs
one ``fullmatch``; a value the type does not accept fails it and takes the general parser. A shape is only
kept when it reads its own line exactly as the general parser did.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from toolkit.logs.digits import digit_blind

__all__ = ["INT", "FLOAT", "BOOL", "Shape", "ShapeCache", "typed", "int_as_float", "floats"]

INT, FLOAT, BOOL = r"-?\d+", r"-?\d+\.\d+", r"True|False"
_MAX_SHAPES = 8  # per kind: a server prints one or two shapes of each
_BACKOFF = 64  # after a line whose shape cannot be compiled, this many lines of its kind go the general way

Values = dict[str, Any]


def int_as_float(token: str) -> float:
    """``float(int(token))``: ``"-0"`` gives 0.0 (as the general parser's ``float(_number(...))``), not -0.0."""
    return float(int(token))


def floats(listed: str) -> tuple[float, ...]:
    """``"0.756, 0.444"`` -> ``(0.756, 0.444)`` (vLLM's per-position acceptance rates)."""
    return tuple(map(float, listed.split(", ")))


def typed(token: str) -> tuple[str, Callable[[str], Any]] | None:
    """The value pattern and converter that read ``token`` as the general parser's ``_number`` does."""
    for pattern, convert in ((INT, int), (FLOAT, float), (BOOL, "True".__eq__)):
        if re.fullmatch(pattern, token, re.ASCII):
            return pattern, convert
    return None


class Shape:
    """A compiled reader: ``read(rest)`` gives the values of a line of this shape, else None.

    ``pieces`` are regex fragments, one per value, each with one capturing group; they are
    joined with ``", "`` and followed by ``tail``.

    >>> s = Shape([r"a: (-?\\d+)", r"b: (-?\\d+\\.\\d+)%"], ["a", "b_pct"], [int, float])
    >>> s.read("a: 1, b: 2.5%"), s.read("a: x, b: 2.5%")
    ({'a': 1, 'b_pct': 2.5}, None)
    """

    __slots__ = ("fullmatch", "convert", "keys", "converters", "digit_blind")

    def __init__(self, pieces: Sequence[str], keys: Sequence[str], converters: Sequence[Callable[[str], Any]],
                 tail: str = "") -> None:
        if not keys or len(keys) != len(converters):
            raise ValueError(f"a shape needs one key and one converter per value, got {len(keys)} and {len(converters)}")
        pattern = re.compile(", ".join(pieces) + tail, re.ASCII)
        self.fullmatch = pattern.fullmatch
        self.keys, self.converters = tuple(keys), tuple(converters)
        # two texts with one digit mask match it alike, at the same places (toolkit.logs.digits)
        self.digit_blind = digit_blind(pattern.pattern, pattern.flags)
        # `{K0: C0(a0), K1: C1(a1), ...}` as code: a dict display with one call per value takes a fifth
        # less time than dict(zip(keys, map(...))). Keys and converters are bound by name, never pasted in.
        names: dict[str, Any] = {f"K{i}": key for i, key in enumerate(keys)}
        names.update({f"C{i}": conv for i, conv in enumerate(converters)})
        groups = "".join(f"a{i}, " for i in range(len(keys)))
        items = ", ".join(f"K{i}: C{i}(a{i})" for i in range(len(keys)))
        exec(f"def convert(m):\n    {groups}= m.groups()\n    return {{{items}}}\n", names)  # noqa: S102
        self.convert: Callable[[re.Match[str]], Values] = names["convert"]

    def read(self, rest: str) -> Values | None:
        m = self.fullmatch(rest)
        return None if m is None else self.convert(m)

    def reader_at(self, spans: Sequence[tuple[int, int]]) -> Callable[[str], Values]:
        """``read``'s values for every text whose values stand at ``spans`` (a digit-blind shape's match of one
        line of a digit mask gives them for all), by slicing: no ``fullmatch``.

        >>> s = Shape([r"a: (-?\\d+)", r"b: (-?\\d+\\.\\d+)%"], ["a", "b_pct"], [int, float])
        >>> s.reader_at([(3, 4), (9, 12)])("a: 7, b: 3.5%")
        {'a': 7, 'b_pct': 3.5}
        """
        if len(spans) != len(self.keys):
            raise ValueError(f"one span per value: {len(self.keys)} values, {len(spans)} spans")
        names: dict[str, Any] = {f"K{i}": key for i, key in enumerate(self.keys)}
        names.update({f"C{i}": conv for i, conv in enumerate(self.converters)})
        items = ", ".join(f"K{i}: C{i}(t[{int(a)}:{int(b)}])" for i, (a, b) in enumerate(spans))  # ints only pasted
        exec(f"def at(t):\n    return {{{items}}}\n", names)  # noqa: S102
        at: Callable[[str], Values] = names["at"]
        return at


class ShapeCache:
    """Compiled shapes per metric kind, newest first (a memo: results equal the general parser's)."""

    def match(self, kind: str, rest: str) -> tuple[Shape, re.Match[str]] | None:
        """The shape :meth:`values` reads ``rest`` with, and its match; None when the general parser does."""
        for shape in self._shapes.get(kind, ()):
            m = shape.fullmatch(rest)
            if m is not None:
                return shape, m
        return None

    def __init__(self) -> None:
        self._shapes: dict[str, tuple[Shape, ...]] = {}
        self._backoff: dict[str, int] = {}

    def values(self, kind: str, rest: str, general: Callable[[str], Values],
               build: Callable[[str], Shape | None]) -> Values:
        """The values of ``rest`` (a metric line of ``kind`` after its prefix), as ``general(rest)`` gives them."""
        if (found := self.match(kind, rest)) is not None:
            return found[0].convert(found[1])
        values = general(rest)
        wait = self._backoff.get(kind, 0)
        if wait:
            self._backoff[kind] = wait - 1
            return values
        learnt = build(rest)
        if learnt is not None and repr(learnt.read(rest)) == repr(values):  # repr: 1, 1.0, True and -0.0 differ
            self._shapes[kind] = (learnt, *self._shapes.get(kind, ())[:_MAX_SHAPES - 1])  # one assignment: thread-safe
        else:
            self._backoff[kind] = _BACKOFF
        return values
