"""Check a spec's flags against the engine's flag table (pure), and keep one table per build.

:func:`check_flags` names every problem at once: an invalid choice lists the valid ones, a
misspelling suggests the flag meant.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping

from toolkit.errors import InvalidFlag
from toolkit.server.help_table import FlagProblem, FlagSpec, FlagTable, parse_help

__all__ = ["HelpValue", "validate", "check_flags", "FlagTableCache"]

HelpValue = str | int | float | bool | None
Flags = Mapping[str, HelpValue] | Iterable[tuple[str, HelpValue]]


def validate(flags: Flags, table: FlagTable) -> list[FlagProblem]:
    """Every problem the engine would have with ``flags`` (None/True: a switch, False: not passed), in order.

    >>> table = parse_help("options:\\n  --mode {prefill,decode}\\n", engine="sglang")
    >>> [p.message for p in validate({"--mode": "decoder"}, table)]
    ["--mode must be one of prefill, decode; got 'decoder'"]
    """
    problems: list[FlagProblem] = []
    pairs = flags.items() if isinstance(flags, Mapping) else flags
    for raw_name, raw_value in pairs:
        if raw_value is False:
            continue
        name, value = raw_name, None if raw_value is None or raw_value is True else str(raw_value)
        if "=" in name and value is None:
            name, value = name.split("=", 1)
        spec = table.lookup(name)
        if spec is None:
            problem, spec = _resolve_unknown(name, table)
            problems.append(problem)
            if spec is None:
                continue
        problems.extend(_check_value(name, value, spec))
    return problems


def check_flags(flags: Flags, table: FlagTable) -> tuple[FlagProblem, ...]:
    """Raise :class:`InvalidFlag` listing every error; return the warnings, if any.

    >>> table = parse_help("options:\\n  --tp-size TP_SIZE\\n", engine="sglang")
    >>> check_flags({"--tp-size": 8}, table)
    ()
    """
    problems = validate(flags, table)
    errors = [problem for problem in problems if problem.is_error]
    if errors:
        if len(errors) == 1:
            first = errors[0]
            spec = table.lookup((first.suggestion if first.kind == "unknown" else first.flag) or "")
            message, evidence = first.message, [spec.invocation] if spec is not None else []
        else:
            message = f"{len(errors)} flags would be rejected by {table.label}"
            evidence = [problem.message for problem in errors]
        where = f"`{table.source}`" if table.source else f"the {table.engine} --help output"
        raise InvalidFlag(message, evidence=evidence, hint=f"fix them to match {where} and launch again")
    return tuple(problem for problem in problems if not problem.is_error)


def _resolve_unknown(name: str, table: FlagTable) -> tuple[FlagProblem, FlagSpec | None]:
    """A name the table does not know: an argparse abbreviation, or a typo."""
    if table.allow_abbrev and name.startswith("--") and len(name) > 2:
        matches = sorted({spec.name for spec in table.flags
                          for alias in spec.names if alias.startswith(name)})
        if len(matches) == 1:
            spec = table.lookup(matches[0])
            message = (f"{name} is an abbreviation of {matches[0]}; {table.engine} accepts it through "
                       "argparse prefix matching, but a future flag can make it ambiguous: spell it out")
            return FlagProblem(name, "abbreviation", message, suggestion=matches[0]), spec
        if len(matches) > 1:
            shown = ", ".join(matches[:5]) + (f" (and {len(matches) - 5} more)" if len(matches) > 5 else "")
            message = f"ambiguous flag {name} for {table.engine}: it could be {shown}"
            return FlagProblem(name, "ambiguous", message), None
    close = difflib.get_close_matches(name, table.names, n=1, cutoff=0.75)
    if close:
        message = f"unknown flag {name} for {table.engine}; did you mean {close[0]}?"
        return FlagProblem(name, "unknown", message, suggestion=close[0]), None
    message = f"unknown flag {name} for {table.engine}; none of its {len(table)} flags is close"
    return FlagProblem(name, "unknown", message), None


def _check_value(name: str, value: str | None, spec: FlagSpec) -> list[FlagProblem]:
    if value is None:
        if spec.takes_value and not spec.value_optional:
            wanted = f"one of {', '.join(spec.choices)}" if spec.choices else spec.metavar
            message = f"{name} needs a value ({wanted}); it was given as a switch"
            return [FlagProblem(name, "missing_value", message)]
        return []
    if not spec.takes_value:
        message = f"{name} is a switch and takes no value; got {value!r}"
        return [FlagProblem(name, "unexpected_value", message, value=value)]
    if spec.choices is None:
        return []
    values = value.split() if spec.multiple else [value]
    for item in values:
        if item not in spec.choices:
            close = difflib.get_close_matches(item, spec.choices, n=1, cutoff=0.6)
            message = f"{name} must be one of {', '.join(spec.choices)}; got {item!r}"
            suggestion = close[0] if close else None
            return [FlagProblem(name, "invalid_choice", message, value=item, suggestion=suggestion)]
    return []


class FlagTableCache:
    """One parsed table per (host, engine, version); a ``None`` version is never cached (a bisection
    changes the checkout under the same host and engine: a stale table would accept flags the build lacks)."""

    def __init__(self) -> None:
        self._tables: dict[tuple[str, str, str], FlagTable] = {}

    def __len__(self) -> int:
        return len(self._tables)

    def get(self, host: str, engine: str, version: str | None) -> FlagTable | None:
        return None if version is None else self._tables.get((host, engine, version))

    def put(self, host: str, engine: str, version: str | None, table: FlagTable) -> None:
        if version is not None:
            self._tables[(host, engine, version)] = table

    def get_or_parse(self, host: str, engine: str, version: str | None, help_text: Callable[[], str], *,
                     source: str | None = None) -> FlagTable:
        """The cached table, or ``parse_help(help_text())`` (the driver's I/O, called only on a miss) kept."""
        table = self.get(host, engine, version)
        if table is None:
            table = parse_help(help_text(), engine=engine, version=version, source=source)
            self.put(host, engine, version, table)
        return table

    def clear(self) -> None:
        self._tables.clear()
