"""The workload behind a result: how to say it, what differs between runs, and the bench command to redo it.

Pure. 345.9 tok/s at concurrency 32 and 77.9 at concurrency 1 are both right and their mean is neither
(issue 28: notebook 07's post-mortem pooled four concurrencies into one "8" row).

>>> describe({"workload:num_prompts": 3, "workload:input_len": 128, "workload:output_len": 96,
...           "workload:max_concurrency": 1, "workload:request_rate": "inf"})
'3 prompts, 128 in / 96 out tokens, concurrency 1'
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

__all__ = ["KEY_COLUMNS", "key", "describe", "differing", "varying_text", "bench_command", "CONCURRENCY"]

CONCURRENCY = "workload:max_concurrency"
#: What makes two runs' workloads the same (the server's URL is where, not what).
KEY_COLUMNS = ("workload:max_concurrency", "workload:request_rate", "workload:num_prompts", "workload:input_len",
               "workload:output_len", "workload:range_ratio", "workload:dataset", "workload:endpoint")
#: the order ``describe`` says a workload in ("lengths": input and output tokens together)
_SAID = ("workload:num_prompts", "lengths", "workload:range_ratio", "workload:max_concurrency",
         "workload:request_rate", "workload:dataset", "workload:endpoint")


def _value(values: Mapping[str, Any], column: str) -> Any:
    value = values.get(column)
    if value is None or (isinstance(value, float) and math.isnan(value)) or repr(value) in ("<NA>", "nan"):
        return None
    return value


def _rate(value: Any) -> float:
    return math.inf if value in (None, "inf") else float(value)


def key(values: Mapping[str, Any]) -> tuple[Any, ...]:
    """The workload as a hashable value; runs with equal keys ran the same load."""
    return tuple(str(_value(values, column)) for column in KEY_COLUMNS)


def _number(value: Any) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() else f"{number:g}"


def _part(values: Mapping[str, Any], column: str) -> str | None:
    """One dimension in words, None when not recorded (or at its default: chat vs completions aside)."""
    value = _value(values, column)
    if column == "workload:max_concurrency":
        return "unlimited concurrency" if value is None or value == 0 else f"concurrency {_number(value)}"
    if value is None:
        return None
    if column == "workload:request_rate":
        return None if math.isinf(_rate(value)) else f"{_number(value)} req/s"
    if column == "workload:num_prompts":
        return f"{_number(value)} prompts"
    if column == "workload:range_ratio":
        return f"lengths ±{float(value):.0%}" if float(value) else None
    if column == "workload:dataset":
        return f"prompts from {PurePath(str(value)).name}"
    if column == "workload:endpoint":
        return "chat endpoint" if value == "chat" else None
    return None


def _lengths(values: Mapping[str, Any]) -> str | None:
    ins, outs = _value(values, "workload:input_len"), _value(values, "workload:output_len")
    if ins is None and outs is None:
        return None
    return f"{'?' if ins is None else _number(ins)} in / {'?' if outs is None else _number(outs)} out tokens"


def describe(values: Mapping[str, Any], leave_out: Sequence[str] = ()) -> str:
    """``3 prompts, 128 in / 96 out tokens, concurrency 1`` (and the rate, range, dataset when set);
    without the dimensions in ``leave_out`` (what a sweep varied, said apart)."""
    if all(_value(values, column) is None for column in KEY_COLUMNS):
        return "workload not recorded"
    lengths = None if {"workload:input_len", "workload:output_len"} & set(leave_out) else _lengths(values)
    parts = [lengths if c == "lengths" else _part(values, c) for c in _SAID if c not in leave_out]
    return ", ".join(part for part in parts if part)


def differing(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The workload columns whose value is not the same in every row (what a sweep varied)."""
    return [column for column in KEY_COLUMNS if len({str(_value(row, column)) for row in rows}) > 1]


def varying_text(values: Mapping[str, Any], columns: Sequence[str]) -> str:
    """Only the dimensions that vary (``concurrency 32``): what tells two results apart in a label."""
    words = [_lengths(values) if column in ("workload:input_len", "workload:output_len")
             else _part(values, column) or f"{column.removeprefix('workload:')} {_value(values, column)}"
             for column in columns]
    return ", ".join(dict.fromkeys(w for w in words if w))


def bench_command(values: Mapping[str, Any]) -> str:
    """``python -m toolkit bench ...`` that sends the same load to a server at the recorded URL.

    >>> print(bench_command({"workload:url": "http://127.0.0.1:30000", "workload:num_prompts": 3,
    ...                      "workload:max_concurrency": 4, "workload:input_len": 128, "workload:output_len": 96}))
    python -m toolkit bench --url http://127.0.0.1:30000 --num-prompts 3 --max-concurrency 4 --input-len 128 --output-len 96
    """
    words = ["python", "-m", "toolkit", "bench", "--url", str(_value(values, "workload:url") or "http://HOST:PORT")]
    flags = (("--num-prompts", "workload:num_prompts"), ("--max-concurrency", "workload:max_concurrency"),
             ("--input-len", "workload:input_len"), ("--output-len", "workload:output_len"),
             ("--range-ratio", "workload:range_ratio"), ("--request-rate", "workload:request_rate"))
    for flag, column in flags:
        value = _value(values, column)
        if value is None or (column == "workload:range_ratio" and not float(value)) or (
                column == "workload:request_rate" and math.isinf(_rate(value))):
            continue
        words += [flag, _number(value)]
    if _value(values, "workload:max_concurrency") is None and _value(values, "workload:num_prompts") is not None:
        words += ["--max-concurrency", "0"]  # recorded as unlimited; the CLI's 0 means the same
    dataset = _value(values, "workload:dataset")
    if dataset is not None:
        words += ["--dataset", PurePath(str(dataset)).name]
    if _value(values, "workload:endpoint") == "chat":
        words += ["--endpoint", "chat"]
    return " ".join(shlex.quote(word) for word in words)
