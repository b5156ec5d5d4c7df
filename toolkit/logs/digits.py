"""Lines that differ only in their digits are decided alike: the proof, and the key.

A serving log repeats a few line shapes by the million, differing in numbers: :func:`digit_mask` maps every
ASCII digit to ``0`` (length kept), so such lines get one key. A pattern decides alike on them when it names
no digit and has no back-reference; :func:`digit_blind` proves it from ``re._parser``'s tree, and whatever it
cannot prove is checked on every line.

>>> digit_mask("[2026-02-26 20:26:06 TP5] Decode batch. #running-req: 12")
b'[0000-00-00 00:00:00 TP0] Decode batch. #running-req: 00'
>>> digit_blind(r"\\d{4}-\\d\\d [0-9;?]*\\w+"), digit_blind(r'HTTP/1.1" 5\\d\\d'), digit_blind(r"(a)\\1")
(True, False, False)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_sre: Any
_sre_parse: Any
try:  # the parser the `re` module compiles with (named sre_parse before Python 3.11); not in typeshed
    from re import _constants as _sre  # type: ignore[attr-defined,no-redef]
    from re import _parser as _sre_parse  # type: ignore[attr-defined,no-redef]
except ImportError:  # pragma: no cover - another Python: nothing is proven blind, nothing is memoised
    _sre = _sre_parse = None

__all__ = ["digit_mask", "digit_blind", "has_digit", "DIGIT_MASK"]

#: the table of :func:`digit_mask` (hot loops inline ``line.encode("utf-8", "surrogatepass").translate(DIGIT_MASK)``)
DIGIT_MASK = bytes.maketrans(b"123456789", b"000000000")
_DIGITS = range(ord("0"), ord("9") + 1)


def digit_mask(line: str) -> bytes:
    """``line`` with each ASCII digit as ``0``, as UTF-8 bytes (a lone surrogate kept: two lines, two keys)."""
    return line.encode("utf-8", "surrogatepass").translate(DIGIT_MASK)


def has_digit(text: str) -> bool:
    """``text`` holds an ASCII digit."""
    return any(c in "0123456789" for c in text)


def digit_blind(pattern: str, flags: int = 0) -> bool:
    """True when ``pattern`` provably matches two lines with one :func:`digit_mask` the same way."""
    if _sre_parse is None:
        return False
    try:
        tree = _sre_parse.parse(pattern, flags)
    except (re.error, TypeError, ValueError):
        return False
    return _blind(tree)


def _blind(items: Iterable[tuple[Any, Any]]) -> bool:
    assert _sre is not None
    for op, av in items:
        if op is _sre.LITERAL or op is _sre.NOT_LITERAL:
            blind = av not in _DIGITS
        elif op is _sre.IN:
            blind = _set_blind(av)
        elif op in (_sre.ANY, _sre.AT, _sre.CATEGORY):
            blind = True
        elif op is _sre.SUBPATTERN:
            blind = _blind(av[3])
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT):
            blind = _blind(av[2])
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            blind = _blind(av[1])
        elif op is _sre.ATOMIC_GROUP:
            blind = _blind(av)
        elif op is _sre.BRANCH:
            blind = all(_blind(branch) for branch in av[1])
        elif op is _sre.GROUPREF_EXISTS:  # (?(g)yes|no): whether g took part, itself decided by blind parts
            blind = _blind(av[1]) and (av[2] is None or _blind(av[2]))
        else:  # a back-reference compares digits; anything unknown is not proven
            blind = False
        if not blind:
            return False
    return True


def _set_blind(items: list[tuple[Any, Any]]) -> bool:
    """A character set holds all ten ASCII digits or none (categories such as ``\\d``/``\\w`` do)."""
    assert _sre is not None
    held = set()
    for op, av in items:
        if op is _sre.LITERAL and av in _DIGITS:
            held.add(av)
        elif op is _sre.RANGE:
            low, high = av  # a RANGE's value is (low, high)
            held.update(d for d in _DIGITS if low <= d <= high)
        elif op not in (_sre.LITERAL, _sre.CATEGORY, _sre.NEGATE):
            return False
    return not held or len(held) == len(_DIGITS)
