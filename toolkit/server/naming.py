"""How a spec is named and compared: a short label, its parameters as text, the changes between two.

Pure; sweeps, the journal's columns and the post-mortem's "what changed" all go through these functions.

>>> flags = (("--tp", "8"), ("--speculative-algorithm", "EAGLE3"), ("--speculative-attention-mode", "decode"))
>>> describe(flags, (), None)
'EAGLE3 attn=decode'
>>> [change.text() for change in diff(parameters(flags[:2], (), None), parameters(flags, (), None))]
['add --speculative-attention-mode=decode']
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from toolkit.redaction import REDACTED, is_secret_name

__all__ = ["FlagValue", "SWITCH", "apart", "describe", "parameters", "secret_values", "SpecChange", "diff"]
_T = TypeVar("_T")

FlagValue = str | tuple[str, ...] | None  # None: a switch; a tuple: an nargs flag (--cuda-graph-bs 1 2 4)
#: the text of a flag given without a value (``--enable-torch-compile``)
SWITCH = "on"
ENV_PREFIX = "env:"

# Flags a preset sets; describe() leaves them out because every launch has them.
_PRESET_FLAGS = frozenset({"--model-path", "--model", "--tp", "--tp-size", "--port", "--host",
                           "--tensor-parallel-size", "--engine", "--sim-engine-version", "--nnodes",
                           "--node-rank", "--dist-init-addr"})
# How describe() abbreviates common flags ("" = show the value alone).
_SHORT = {
    "--speculative-algorithm": "", "--speculative-num-steps": "steps", "--speculative-eagle-topk": "topk",
    "--speculative-num-draft-tokens": "draft-tokens", "--speculative-attention-mode": "attn",
    "--speculative-draft-model-path": "draft", "--attention-backend": "attn-backend",
    "--cuda-graph-max-bs": "cg-max-bs", "--mem-fraction-static": "mem",
    "--cuda-graph-max-bs-decode": "cg-max-bs",  # SGLang 0.5.14+; the only spelling from 0.5.20
}


def describe(flags: tuple[tuple[str, FlagValue], ...], env: tuple[tuple[str, str], ...], commit: str | None, *,
             simulated: bool = False) -> str:
    """What differs from a plain launch, briefly: ``EAGLE3 steps=2 attn=decode @1a2b3c4d``."""
    parts = [_describe_flag(n, REDACTED if is_secret_name(n) and v is not None else v)
             for n, v in flags if n not in _PRESET_FLAGS]
    parts += [f"{k}={REDACTED if is_secret_name(k) else _clip(v)}" for k, v in env]
    if commit:
        parts.append(f"@{commit[:8]}")
    text = " ".join(p for p in parts if p) or "baseline"
    return f"sim {text}" if simulated else text


def apart(mine: tuple[_T, ...], theirs: tuple[_T, ...]) -> tuple[_T, ...]:
    """The items of ``mine`` that ``theirs`` lacks, in ``mine``'s order (a flag or variable with its value)."""
    held = set(theirs)
    return tuple(item for item in mine if item not in held)


def parameters(flags: tuple[tuple[str, FlagValue], ...], env: tuple[tuple[str, str], ...],
               commit: str | None) -> dict[str, str]:
    """``{"--flag": value or "on", "env:NAME": value, "commit": sha}``, in the spec's order."""
    out = {name: SWITCH if value is None else " ".join(value) if isinstance(value, tuple) else value
           for name, value in flags}
    out.update({ENV_PREFIX + name: value for name, value in env})
    if commit:
        out["commit"] = commit
    return out


def secret_values(flags: tuple[tuple[str, FlagValue], ...], env: tuple[tuple[str, str], ...]) -> frozenset[str]:
    """The values of flags and variables named like secrets (``--api-key``, ``HF_TOKEN``)."""
    values = {v for n, v in flags if is_secret_name(n) and isinstance(v, str)}
    values |= {w for n, v in flags if is_secret_name(n) and isinstance(v, tuple) for w in v}  # vLLM's --api-key list
    values |= {v for n, v in env if is_secret_name(n)}
    return frozenset(v for v in values if len(v) >= 4)  # "1" or "on" would redact half of every line


@dataclass(frozen=True)
class SpecChange:
    """One parameter that differs: ``before``/``after`` None when absent on that side."""

    name: str
    before: str | None
    after: str | None

    def text(self) -> str:
        """``add --x=v``, ``drop env:X``, ``--x: a → b``, ``commit: 1a2b3c4d → 5e6f7a8b``."""
        before, after = self.before, self.after
        if self.name == "commit":
            before, after = (v[:10] if v else v for v in (before, after))
        if before is None:
            return f"add {self.name}" if after == SWITCH else f"add {self.name}={after}"
        if after is None:
            return f"drop {self.name}"
        return f"{self.name}: {before} → {after}"


def diff(before: Mapping[str, str], after: Mapping[str, str]) -> tuple[SpecChange, ...]:
    """The parameters whose values differ, flags first, then variables, then the commit."""
    names = list(dict.fromkeys([*before, *after]))
    names.sort(key=lambda n: (n.startswith(ENV_PREFIX), n == "commit"))
    return tuple(SpecChange(n, before.get(n), after.get(n)) for n in names if before.get(n) != after.get(n))


def _clip(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe_flag(name: str, value: FlagValue) -> str:
    short = _SHORT.get(name, name.lstrip("-").removeprefix("speculative-"))
    if value is None:
        return short
    if isinstance(value, tuple):
        return f"{short}={','.join(value)}"
    if value.startswith("{"):
        try:
            config = json.loads(value)
        except ValueError:
            config = None
        if isinstance(config, dict):
            if "method" in config:  # vLLM --speculative-config
                k = config.get("num_speculative_tokens")
                return f"{config['method']}" + (f" k={k}" if k is not None else "")
            return " ".join(f"{k}={_clip(str(v), 12)}" for k, v in config.items())
    shown = os.path.basename(value.rstrip("/")) if "/" in value else value
    return _clip(shown) if short == "" else f"{short}={_clip(shown)}"
