"""An engine's flag table, read from the ``--help`` text it prints: pure.

:func:`parse_help` understands three dialects, each from real captures in ``tests/data/help``:
argparse (SGLang, vLLM ``--help=all``, the simulator), click (``transformers serve --help``)
and typer's rich boxes (``│ --port   <int>   Server listen port.  │``). Checking flags against
the table is :mod:`toolkit.server.flag_check`; running ``--help`` is :mod:`toolkit.server.preflight`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import pandas as pd

__all__ = ["FlagSpec", "FlagTable", "FlagProblem", "parse_help"]

HelpStyle = Literal["argparse", "click", "rich"]
ProblemKind = Literal["unknown", "ambiguous", "abbreviation", "invalid_choice", "missing_value",
                      "unexpected_value"]

_WARNING_KINDS: frozenset[str] = frozenset({"abbreviation"})  # the engine accepts the flag, but it is fragile

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NAME = r"-{1,2}[A-Za-z0-9?][A-Za-z0-9_-]*"
_ALTERNATIVE = re.compile(rf"^(?P<name>{_NAME})(?:[ =](?P<meta>.+))?$")
# One metavar token: NAME (VAR,VAR and HOST:PORT too), {a,b}, [X ...], <int>, <on|off>, or the "..." of nargs.
_META_TOKEN = re.compile(
    r"^(?:[A-Za-z_][\w,.:-]*|\{[^{}]*\}|\[[^\[\]]*(?:\[[^\[\]]*\])?[^\[\]]*\]|<[^<>]+>|\.\.\.)$")
# vLLM: "--tool-call-parser {hermes,...} or name registered in --tool-parser-plugin"
_OPEN_CHOICES = re.compile(r"^\{(?P<choices>[^{}]*)\}\s+or\s+.+$")
# vLLM, for `str | Literal[...]` fields: "--config-format ['auto', 'hf', 'mistral']" (any string goes)
_LIST_METAVAR = re.compile(r"^\[(?P<choices>'[^']*'(?:, '[^']*')*)\]$")
_CLICK_SWITCH_SEP = " / "
_RICH_TITLE = re.compile(r"^╭─+\s*(?P<title>.*?)\s*─+╮$")
_VLLM_SUMMARY = re.compile(r"--help=all")  # vLLM >= 0.11 prints config groups, not flags, unless asked for it


@dataclass(frozen=True)
class FlagSpec:
    """One flag as the engine's help describes it; ``suggested_choices``: an open list (vLLM's tool parsers
    also accept plugin names), ``choices`` only when enforced."""

    name: str
    takes_value: bool
    choices: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()
    value_optional: bool = False
    multiple: bool = False
    metavar: str | None = None
    group: str | None = None
    invocation: str = ""
    suggested_choices: tuple[str, ...] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class FlagTable:
    """Every flag an engine accepts, parsed from its ``--help``.

    >>> table = parse_help("options:\\n  --tp-size TP_SIZE  Tensor parallelism.\\n", engine="sglang")
    >>> table.lookup("--tp-size").takes_value
    True
    """

    engine: str
    flags: tuple[FlagSpec, ...]
    style: HelpStyle = "argparse"
    version: str | None = None
    source: str | None = None
    allow_abbrev: bool = True
    underscores_as_dashes: bool = False
    dotted_keys: bool = False
    _index: dict[str, FlagSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, FlagSpec] = {}
        for spec in self.flags:
            index.update({spelling: spec for spelling in spec.names if spelling not in index})
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.flags)

    def __iter__(self) -> Iterator[FlagSpec]:
        return iter(self.flags)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.lookup(name) is not None

    @property
    def names(self) -> tuple[str, ...]:
        """Every accepted spelling, canonical names and aliases."""
        return tuple(self._index)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}" if self.version else self.engine

    def lookup(self, name: str) -> FlagSpec | None:
        """The flag ``name`` reaches, honouring the engine's spelling rules (no prefixes)."""
        if name in self._index:
            return self._index[name]
        if self.underscores_as_dashes and name.startswith("--"):
            # vLLM's FlexibleArgumentParser rewrites '_' to '-' up to the first '.'.
            head, dot, tail = name.partition(".")
            name = head.replace("_", "-") + dot + tail
            if name in self._index:
                return self._index[name]
        if self.dotted_keys and "." in name:
            # vLLM JSON flags take nested keys: --compilation-config.mode 3
            base = self._index.get(name.split(".", 1)[0])
            if base is not None and base.takes_value:
                return base
        return None

    def to_frame(self) -> pd.DataFrame:
        """One row per flag, for a notebook: flag, takes_value, choices, aliases, group."""
        rows = [{"flag": spec.name, "takes_value": spec.takes_value,
                 "choices": ", ".join(spec.choices) if spec.choices else None,
                 "aliases": ", ".join(spec.aliases) if spec.aliases else None, "group": spec.group}
                for spec in self.flags]
        return pd.DataFrame(rows, columns=["flag", "takes_value", "choices", "aliases", "group"])


@dataclass(frozen=True)
class FlagProblem:
    """One thing the engine would reject (or accept only by accident), in a sentence."""

    flag: str
    kind: ProblemKind
    message: str
    value: str | None = None
    suggestion: str | None = None

    @property
    def is_error(self) -> bool:
        return self.kind not in _WARNING_KINDS


def parse_help(text: str, *, engine: str, version: str | None = None, source: str | None = None) -> FlagTable:
    """Parse an engine's ``--help`` output (printed by ``source``) into a :class:`FlagTable`; ``ValueError``
    when it holds no flags or is vLLM's short help (config groups, not flags)."""
    lines = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    style: HelpStyle = "rich" if any(line.startswith("╭") for line in lines) else "argparse"
    if style == "argparse" and any((_CLICK_SWITCH_SEP in line and line.lstrip().startswith("--"))
                                   or line.startswith(("Usage:", "Options:")) for line in lines):
        style = "click"
    specs: dict[str, FlagSpec] = {}
    group: str | None = None
    in_usage = False
    for raw in lines:
        line = raw.rstrip()
        if style == "rich":
            title = _RICH_TITLE.match(line.strip())
            if title:
                group = title.group("title") or None
                continue
            if not line.startswith("│"):
                continue
            line = line[1:].removesuffix("│").rstrip()
        if not line.strip():
            in_usage = False
            continue
        if line.lower().startswith("usage:"):
            in_usage = True
            continue
        if not line[0].isspace():
            in_usage = False
            if line.endswith(":"):
                group = line[:-1].strip()
            continue
        if in_usage:
            continue
        spec = _parse_option_line(line, style, group)
        if spec is not None and spec.name not in specs:
            specs[spec.name] = spec
    if engine == "vllm" and len(specs) < 20 and _VLLM_SUMMARY.search(text):
        raise ValueError("this is vLLM's short help: it lists config groups, not flags; "
                         "capture `vllm serve --help=all` instead")
    if not specs:
        raise ValueError(f"no flags found in the {engine} help text; pass the output of the engine's --help")
    is_vllm = engine == "vllm"
    # click matches no prefixes; argparse (SGLang, vLLM, the simulator) does by default.
    return FlagTable(engine=engine, flags=tuple(specs.values()), style=style, version=version, source=source,
                     allow_abbrev=style == "argparse", underscores_as_dashes=is_vllm, dotted_keys=is_vllm)


def _parse_option_line(line: str, style: HelpStyle, group: str | None) -> FlagSpec | None:
    stripped = line.lstrip()
    indent = len(line) - len(stripped)
    # Option lines sit at the left margin (2 for argparse and click, 1 in a rich box);
    # help text that wraps onto a line starting with "-" sits at the help column (>= 20).
    if indent > 8:
        return None
    if style == "rich" and stripped.startswith("*"):
        stripped = stripped[1:].lstrip()  # typer's "required" marker
    if not stripped.startswith("-"):
        return None
    if style == "rich":
        return _parse_rich_cells(re.split(r"\s{2,}", stripped), group)
    invocation = re.split(r"\s{2,}", stripped, maxsplit=1)[0]
    return _parse_invocation(invocation, group)


def _parse_invocation(invocation: str, group: str | None) -> FlagSpec | None:
    """``--a A, -b A`` (argparse), ``--x / --no-x`` (click), ``--x [a|b]`` (click choice)."""
    switch_pair = _CLICK_SWITCH_SEP in invocation
    parts = invocation.split(_CLICK_SWITCH_SEP) if switch_pair else re.split(r", (?=-)", invocation)
    names: list[str] = []
    metas: list[str] = []
    for part in parts:
        match = _ALTERNATIVE.match(part.strip())
        if match is None:
            return None
        meta = match.group("meta")
        if meta is not None and not _is_metavar(meta):
            return None
        names.append(match.group("name"))
        if meta:
            metas.append(meta)
    return _make_spec(names, metas[0] if metas else None, group, invocation)


def _parse_rich_cells(cells: list[str], group: str | None) -> FlagSpec | None:
    """typer rich rows: option names, negations, then one metavar cell, then help."""
    names: list[str] = []
    meta: str | None = None
    for cell in cells:
        if re.fullmatch(_NAME, cell):
            names.append(cell)
            continue
        # typer shows <int> / <on|off> (0.29) or INTEGER / [on|off] (older); a one-word help is neither
        bracketed = cell[:1] in "<[" and cell[-1:] in ">]"
        if meta is None and (bracketed or cell.isupper()) and _is_metavar(cell):
            meta = cell
        break
    if not names:
        return None
    if meta in ("<bool>", "BOOLEAN") and (len(names) > 1 or names[0] == "--help"):
        meta = None  # a --x/--no-x pair (or --help) shows <bool> but takes no value
    return _make_spec(names, meta, group, "  ".join([*names, *([meta] if meta else [])]))


def _is_metavar(meta: str) -> bool:
    if _OPEN_CHOICES.match(meta) or _LIST_METAVAR.match(meta):
        return True
    return all(_META_TOKEN.match(token) for token in _metavar_tokens(meta))


def _metavar_tokens(meta: str) -> list[str]:
    """Split on spaces outside brackets: ``X [X ...]`` -> ``["X", "[X ...]"]``."""
    tokens: list[str] = []
    depth = 0
    current = ""
    for char in meta:
        if char in "[{<":
            depth += 1
        elif char in "]}>":
            depth -= 1
        if char == " " and depth == 0:
            if current:
                tokens.append(current)
            current = ""
        else:
            current += char
    if current:
        tokens.append(current)
    return tokens


def _make_spec(names: list[str], meta: str | None, group: str | None, invocation: str) -> FlagSpec:
    longs = [name for name in names if name.startswith("--")]
    canonical = longs[0] if longs else names[0]
    aliases = tuple(name for name in dict.fromkeys(names) if name != canonical)
    choices: tuple[str, ...] | None = None
    suggested: tuple[str, ...] | None = None
    value_optional = False
    multiple = False
    if meta is not None:
        open_choices = _OPEN_CHOICES.match(meta)
        listed = _LIST_METAVAR.match(meta)
        first = _metavar_tokens(meta)[0]
        if open_choices:
            suggested = _split_choices(open_choices.group("choices"), ",")
        elif listed:
            suggested = tuple(choice.strip("'") for choice in listed.group("choices").split(", "))
        elif first.startswith("{") and first.endswith("}"):
            choices = _split_choices(first[1:-1], ",")
        elif first[0] in "[<" and "|" in first:
            choices = _split_choices(first[1:-1], "|")  # click [a|b], typer <a|b>
        elif first.startswith("["):
            value_optional = True  # argparse nargs='?' or '*'
        multiple = "..." in meta
    return FlagSpec(name=canonical, takes_value=meta is not None, choices=choices, aliases=aliases,
                    value_optional=value_optional, multiple=multiple, metavar=meta, group=group,
                    invocation=invocation, suggested_choices=suggested)


def _split_choices(text: str, sep: str) -> tuple[str, ...]:
    return tuple(choice.strip() for choice in text.split(sep) if choice.strip())
