"""Rules and rule packs: the data that decides what a log line means.

In a :class:`RulePack` the first rule that matches a line decides it. Each rule carries a literal
prefilter: its regex only runs when a literal occurs in the line, which keeps long logs fast.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property

from toolkit.logs.digits import digit_blind, digit_mask, has_digit

__all__ = ["Verdict", "Phase", "Rule", "RulePack", "Match", "SEVERITY", "match_shape", "recheck_first"]


class Verdict(StrEnum):
    """What one line (or one grouped traceback) means for the server's health."""

    READY = "ready"  # the engine says it can serve (SGLang: fired up; vLLM: startup complete)
    FATAL = "fatal"  # the server is dead or will die
    BENIGN = "benign"  # looks like an error, is known to be harmless
    WARNING = "warning"  # worth a look, not a failure
    PROGRESS = "progress"  # start-up progress: phases, progress bars
    METRIC = "metric"  # server-side throughput line, parsed into a MetricRow
    INFO = "info"  # everything else
    SHUTDOWN = "shutdown"  # written after the toolkit asked the server to stop (toolkit.logs.caused.after_stop)


class Phase(StrEnum):
    """Start-up milestones, in the order engines usually reach them."""

    SERVER_ARGS = "server_args"
    WEIGHTS_LOADING = "weights_loading"
    WEIGHTS_LOADED = "weights_loaded"
    KV_CACHE_ALLOCATED = "kv_cache_allocated"
    CUDA_GRAPH_CAPTURE_BEGIN = "cuda_graph_capture_begin"
    CUDA_GRAPH_CAPTURED = "cuda_graph_captured"
    HTTP_UP = "http_up"
    WARMUP = "warmup"
    READY = "ready"


# Used to combine verdicts (a traceback's header and its final exception line).
SEVERITY: dict[Verdict, int] = {Verdict.INFO: 0, Verdict.METRIC: 0, Verdict.SHUTDOWN: 0, Verdict.PROGRESS: 1,
                                Verdict.READY: 1, Verdict.BENIGN: 2, Verdict.WARNING: 3, Verdict.FATAL: 4}

_META = frozenset(".^$*+?{}[]\\|()")


@dataclass(frozen=True)
class Rule:
    """One line pattern and what it means.

    ``literal``: a substring every matching line contains, tested before the regex. ``after_ready``: the
    verdict once the server has been ready (a request's 404 is not a server failure). A ``notice`` announces
    a death whose cause follows (``Received sigquit from a child process``): the next rank exception decides.

    >>> Rule("my_benign", r"harmless thing \\d+", Verdict.BENIGN, literal="harmless thing").matches("a harmless thing 42")
    True
    """

    name: str
    pattern: str
    verdict: Verdict
    phase: Phase | None = None
    literal: str | tuple[str, ...] | None = None
    ignore_case: bool = False
    after_ready: Verdict | None = None
    hint: str | None = None
    notice: bool = False
    header: bool = False
    _regex: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    _literals: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"a rule needs a name (a non-empty string), got {self.name!r}")
        try:
            verdict = Verdict(self.verdict)
        except ValueError:
            raise ValueError(
                f"rule {self.name!r}: verdict {self.verdict!r} is not one of {[v.value for v in Verdict]}"
            ) from None
        object.__setattr__(self, "verdict", verdict)
        plain = not any(c in _META for c in self.pattern)
        literals: tuple[str, ...]
        if self.literal is None:
            literals = (self.pattern,) if plain else ()
        elif isinstance(self.literal, str):
            literals = (self.literal,)
        else:
            literals = tuple(self.literal)
        if self.ignore_case:
            literals = tuple(lit.lower() for lit in literals)
        object.__setattr__(self, "_literals", literals)
        exact = len(literals) == 1 and not self.ignore_case and (literals[0] == self.pattern if plain else re.escape(literals[0]) == self.pattern)
        if not exact:
            try:
                regex = re.compile(self.pattern, re.IGNORECASE if self.ignore_case else 0)
            except re.error as exc:
                raise ValueError(f"rule {self.name!r}: pattern {self.pattern!r} is not a valid regex: {exc}") from None
            object.__setattr__(self, "_regex", regex)

    @classmethod
    def text(cls, name: str, text: str, verdict: Verdict, **options: object) -> Rule:
        """A rule that matches a fixed piece of text (no regex to escape).

        >>> Rule.text("paren", "server_args=ServerArgs(", Verdict.PROGRESS).matches("x server_args=ServerArgs(a=1)")
        True
        """
        return cls(name, re.escape(text), verdict, literal=text, **options)  # type: ignore[arg-type]

    def verdict_for(self, ready: bool) -> Verdict:
        """The verdict this rule gives, before or after the server was ready."""
        return self.after_ready if ready and self.after_ready is not None else self.verdict

    @cached_property
    def digit_blind(self) -> bool:
        """It matches two lines of one digit mask alike (:mod:`toolkit.logs.digits`): its literals name no
        digit and its pattern cannot tell one from another."""
        if any(has_digit(literal) for literal in self._literals):
            return False
        return self._regex is None or digit_blind(self._regex.pattern, self._regex.flags)

    @cached_property
    def reads_indent(self) -> bool:
        """Its pattern asks for indented text (``^\\s+...``, ``^[ \\t]+...``): a layout that its writer indents
        (``kubectl describe``'s fields), never a source line quoted from a traceback, which stays unread as fatal."""
        return self.pattern.startswith(("^\\s", "^[ \\t]"))

    def matches(self, text: str, lowered: str | None = None) -> bool:
        """True when this rule matches ``text`` (``lowered`` may pass ``text.lower()`` to save work)."""
        if self._literals:
            hay = (lowered if lowered is not None else text.lower()) if self.ignore_case else text
            if not any(lit in hay for lit in self._literals):
                return False
        return self._regex is None or self._regex.search(text) is not None


@dataclass(frozen=True)
class Match:
    """The rule that decided a piece of text, and the verdict it gave there."""

    rule: Rule
    verdict: Verdict


@dataclass(frozen=True)
class RulePack:
    """An ordered set of rules for one engine (first match wins). Immutable.

    >>> pack = RulePack("mine", ()).with_rules(Rule("x", "fired up", Verdict.READY))
    >>> [r.name for r in pack.rules]
    ['x']
    """

    name: str
    rules: tuple[Rule, ...]

    def __post_init__(self) -> None:
        dupes = sorted(name for name, count in Counter(r.name for r in self.rules).items() if count > 1)
        if dupes:
            raise ValueError(f"pack {self.name!r} has duplicate rule names {dupes}; rule names must be unique")

    def with_rules(self, *rules: Rule, first: bool = True) -> RulePack:
        """A new pack with ``rules`` added (first by default, so they win), replacing namesakes."""
        names = {r.name for r in rules}
        kept = tuple(r for r in self.rules if r.name not in names)
        return replace(self, rules=(tuple(rules) + kept) if first else (kept + tuple(rules)))

    def without(self, *names: str) -> RulePack:
        """A new pack without the named rules (an unknown name is an error, to catch typos)."""
        known = {r.name for r in self.rules}
        unknown = sorted(set(names) - known)
        if unknown:
            raise KeyError(f"pack {self.name!r} has no rule named {unknown}; it has {sorted(known)}")
        return replace(self, rules=tuple(r for r in self.rules if r.name not in names))

    @cached_property
    def compiled(self) -> CompiledRules:
        """The pack's rules as :func:`compile_rules` flattens them, built once per pack."""
        return compile_rules(self.rules)


# (rule, literals, ignore_case, regex, match before ready, match after ready): Match values are
# immutable, so each rule's two are built once here, not per matching line.
CompiledRules = tuple[tuple[Rule, tuple[str, ...], bool, "re.Pattern[str] | None", Match, Match], ...]


def compile_rules(rules: Iterable[Rule]) -> CompiledRules:
    """Flatten rules into the tuples :func:`match_compiled` walks (fewer attribute look-ups per line)."""
    return tuple((r, r._literals, r.ignore_case, r._regex, Match(r, r.verdict_for(False)), Match(r, r.verdict_for(True)))
                 for r in rules)


def match_compiled(compiled: CompiledRules, text: str, *, ready: bool = False) -> Match | None:
    """The first rule that matches ``text``, with the verdict it gives there (the hot path)."""
    lowered: str | None = None
    for _rule, lits, ignore_case, regex, before, after in compiled:
        if lits:
            if ignore_case:
                if lowered is None:
                    lowered = text.lower()
                hay = lowered
            else:
                hay = text
            for lit in lits:
                if lit in hay:
                    break
            else:
                continue
        if regex is not None and regex.search(text) is None:
            continue
        return after if ready else before
    return None


# A digit-reading rule to ask on each line of a shape: (the literals still to look for, none when one of them
# is in every line of the shape; ignore case; the pattern; the rule's compiled entry).
Recheck = tuple[tuple[str, ...], bool, "re.Pattern[str] | None", tuple[Rule, tuple[str, ...], bool, "re.Pattern[str] | None", Match, Match]]


def match_shape(compiled: CompiledRules, text: str, blind: tuple[bool, ...] | None = None) -> tuple[int, tuple[Recheck, ...]]:
    """What :func:`match_compiled` says of every text with ``text``'s digit mask, as far as digits do not decide:
    the index of the first digit-blind rule that matches (-1: none), and the digit-reading rules before it,
    to ask of each such text (the first that matches wins over the blind one).

    >>> rules = compile_rules([Rule("five", r'" 5\\d\\d', Verdict.WARNING, literal="HTTP"), Rule("any", "HTTP", Verdict.INFO)])
    >>> first, recheck = match_shape(rules, '"GET / HTTP/1.1" 200')
    >>> first, [entry[3][0].name for entry in recheck]
    (1, ['five'])
    """
    recheck: list[Recheck] = []
    lowered: str | None = None
    masked: bytes | None = None
    if blind is None:
        blind = tuple(entry[0].digit_blind for entry in compiled)
    for i, (entry, rule_blind) in enumerate(zip(compiled, blind, strict=True)):
        literals, ignore_case, regex = entry[1:4]
        if ignore_case and lowered is None:
            lowered = text.lower()  # Unicode lowering ("\u212a" is "k"), as match_compiled does
        if rule_blind:
            hay = lowered if lowered is not None and ignore_case else text
            if literals and not any(lit in hay for lit in literals):
                continue
            if regex is None or regex.search(text) is not None:
                return i, tuple(recheck)
            continue
        if literals:
            masked = masked if masked is not None else digit_mask(text)
            hay_mask = digit_mask(lowered) if lowered is not None and ignore_case else masked
            present = [not has_digit(lit) for lit in literals if digit_mask(lit) in hay_mask]
            if not present:
                continue  # a literal is in a text only if its mask is in the text's mask: none is, in this shape
            if any(present):
                literals = ()  # a digit-free one is in every text of the shape
        recheck.append((literals, ignore_case, regex, entry))
    return -1, tuple(recheck)


def recheck_first(recheck: tuple[Recheck, ...], text: str) -> int:
    """The index of the first of a shape's digit-reading rules (:func:`match_shape`) that matches ``text``, or -1."""
    for i, (literals, ignore_case, regex, _entry) in enumerate(recheck):
        if literals:
            hay = text.lower() if ignore_case else text
            if not any(lit in hay for lit in literals):
                continue
        if regex is None or regex.search(text) is not None:
            return i
    return -1
