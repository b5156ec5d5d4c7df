"""The configuration an engine *resolved*, read from its own start-up lines. Pure.

The flags a user gives are not what runs; each engine prints what it decided once:

- SGLang: ``server_args=ServerArgs(model_path='...', ...)`` (a dataclass repr, up to 0.5.18:
  entrypoints/engine.py:253 in 0.5.18) or ``server_args={'model_path': ..., ...}`` (a dict,
  ``resolved_dict()``, from 0.5.19: engine.py:265; 0.5.23 :311);
- vLLM: ``non-default args: {...}`` (vllm 0.25-0.33 entrypoints/utils.py / api_utils.py:273) and
  ``Initializing a V1 LLM engine (v0.25.1) with config: model='...', ...`` (v1/engine/core.py:114).

Values are kept as printed, unquoted; nested values stay whole; a line cut short keeps its whole settings.

>>> config = parse_config_line("[2026-02-26 20:25:01] server_args=ServerArgs(model_path='kimi', tp_size=8, "
...                            "disable_cuda_graph=False, speculative_algorithm=None)")
>>> config.source, dict(config.values)
('sglang server_args', {'model_path': 'kimi', 'tp_size': '8', 'disable_cuda_graph': 'False', 'speculative_algorithm': 'None'})
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["ResolvedConfig", "ResolvedSetting", "parse_config_line", "resolved_settings", "split_top_level"]

# (marker, source name, how the settings are written: "call", "dict" or "pairs")
_MARKERS = (
    ("server_args=ServerArgs(", "sglang server_args", "pairs"),
    ("server_args={", "sglang server_args", "dict"),
    ("non-default args: {", "vllm non-default args", "dict"),
    (" with config: ", "vllm engine config", "pairs"),
)
_OPEN, _CLOSE = "([{", ")]}"


@dataclass(frozen=True)
class ResolvedConfig:
    """The settings one start-up line printed, by name, as text."""

    source: str
    values: Mapping[str, str]
    line: str


@dataclass(frozen=True)
class ResolvedSetting:
    """One resolved setting: its value and the line (and source) that said so."""

    name: str
    value: str
    source: str
    line: str


def split_top_level(text: str) -> tuple[list[str], bool]:
    """``a=1, b=(2, 3)), rest`` -> (['a=1', 'b=(2, 3)'], True): the items up to the bracket that closes the list.

    Commas inside brackets or quotes do not split; the flag says whether the closing bracket was seen.
    """
    items, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            if depth == 0:
                items.append(text[start:i])
                return [s.strip() for s in items if s.strip()], True
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
        i += 1
    items.append(text[start:])
    return [s.strip() for s in items if s.strip()], False


def _value_text(raw: str) -> str:
    """``'auto'`` -> ``auto``; ``8`` -> ``8``; anything not a plain literal stays as printed."""
    raw = raw.strip()
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return raw
    return value if isinstance(value, str) else str(value)


def _pair(item: str, separator: str) -> tuple[str, str] | None:
    name, sep, value = item.partition(separator)
    name = name.strip().strip("'\"")
    if not sep or not name.replace("_", "").replace(".", "").isalnum():
        return None
    return name, _value_text(value)


def parse_config_line(text: str) -> ResolvedConfig | None:
    """The settings of one SGLang ``server_args`` or vLLM ``non-default args``/engine config line; None otherwise."""
    for marker, source, form in _MARKERS:
        at = text.find(marker)
        if at < 0 or (form == "pairs" and source.startswith("vllm") and "LLM engine" not in text[:at]):
            continue
        body = text[at + len(marker):]
        if form == "pairs" and source.startswith("vllm"):
            body += ")"  # the engine config line is not bracketed: it runs to the end of the line
        items, closed = split_top_level(body)
        if not closed and items:
            items = items[:-1]  # cut short: the last item may be half a value
        separator = ": " if form == "dict" else "="
        pairs = [p for item in items if (p := _pair(item, separator)) is not None]
        if pairs:
            return ResolvedConfig(source, dict(pairs), text.strip())
    return None


def resolved_settings(lines: Iterable[str]) -> dict[str, ResolvedSetting]:
    """Every setting the start-up lines resolved, by name; a later line (the engine's own config) wins.

    vLLM's engine config names some settings differently (``max_seq_len``): both names are kept.
    """
    settings: dict[str, ResolvedSetting] = {}
    for line in lines:
        config = parse_config_line(line)
        if config is None:
            continue
        for name, value in config.values.items():
            settings[name] = ResolvedSetting(name, value, config.source, config.line)
    return settings
