"""Pure helpers of :class:`~toolkit.server.spec.ServerSpec`: flag values, flag names, where an engine's tools live.

A value with a character no shell word may carry is refused here, before anything runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Final

from toolkit.errors import InvalidFlag
from toolkit.host.shell import check_word
from toolkit.server.naming import FlagValue

__all__ = ["MISSING", "PARALLEL_SIZES", "render_value", "check_flag_name", "tool", "interpreter", "keyword_flags"]


#: Flags whose value counts GPUs or processes, as the releases' own parsers list them (captured in
#: toolkit/engines/flags/: sglang-0.5.23.txt:72,74,77,290 --tp-size --pp-size --dp-size --ep-size, with their
#: long spellings; vllm-0.20.0.txt:120,147,150 --data-parallel-size --pipeline-parallel-size
#: --tensor-parallel-size). ``tp=0`` was accepted and failed minutes later inside the engine (issue 25).
PARALLEL_SIZES = frozenset({"--tp-size", "--dp-size", "--pp-size", "--ep-size", "--tensor-parallel-size",
                            "--pipeline-parallel-size", "--data-parallel-size", "--expert-parallel-size"})


class _Missing:
    """The value of a flag a spec does not have (distinct from None, which is a switch)."""

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()


def render_value(name: str, value: object) -> FlagValue | _Missing:
    """A Python value as a flag value: True/None switch, False drops the flag, dict -> JSON."""
    if name in PARALLEL_SIZES and not isinstance(value, bool) and value is not None and not (
            str(value).isdigit() and int(str(value)) >= 1):  # a switch is flag_check's "needs a value"
        raise InvalidFlag(f"{name} {value!r}: a parallel size is a whole number of 1 or more (tp=1: one GPU)")
    if value is None or value is True:
        return None
    if value is False:
        return MISSING
    if isinstance(value, str):
        return check_word(value, what=f"the value of {name}")
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, os.PathLike):
        return check_word(os.fspath(value), what=f"the value of {name}")
    if isinstance(value, bytes | bytearray):
        raise InvalidFlag(f"{name}: pass text, not bytes", evidence=[repr(value)], hint="decode it first")
    if isinstance(value, Mapping):
        return check_word(json.dumps(value, separators=(",", ":")), what=f"the value of {name}")
    if isinstance(value, Sequence):
        words = tuple(render_value(name, item) for item in value)
        if not all(isinstance(w, str) for w in words):
            raise InvalidFlag(f"{name}: every item of a list value must be a string or a number",
                              evidence=[repr(value)])
        return words  # type: ignore[return-value]
    raise InvalidFlag(
        f"{name}: a flag value must be str, int, float, bool, dict (JSON) or a list, not {type(value).__name__}",
        evidence=[repr(value)],
        hint="True makes a switch, False removes the flag, a dict becomes compact JSON",
    )


def check_flag_name(name: str) -> str:
    if not isinstance(name, str) or not name.startswith("-") or name.strip("-") == "" or " " in name:
        raise InvalidFlag(f"{name!r} is not a flag name", hint="spell flags as on the command line, e.g. "
                          "'--speculative-num-steps' (or a keyword: speculative_num_steps=2)")
    return name


def tool(tool: str, python: str | None) -> str:
    """Where an engine's console script lives: next to ``python``, or in a venv directory."""
    if python is None:
        return tool
    base = python.rstrip("/")
    if os.path.basename(base).startswith("python"):
        directory = os.path.dirname(base)
        return f"{directory}/{tool}" if directory else tool
    return f"{base}/bin/{tool}"


def interpreter(python: str | None) -> str:
    """The interpreter to run: ``python`` itself, the ``bin/python`` of a venv directory, or ``python`` on PATH."""
    if python is None:
        return "python"
    base = python.rstrip("/")
    return base if os.path.basename(base).startswith("python") else f"{base}/bin/python"


def keyword_flags(flags: Mapping[str, object]) -> dict[str, object]:
    return {("--" + k.replace("_", "-") if not k.startswith("-") else k): v for k, v in flags.items()}


