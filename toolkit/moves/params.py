"""Pure: sweep parameters (flags and ``env:`` variables), grids of combinations, and their names.

A parameter is a flag as on the command line or a variable as ``env:NCCL_ALGO``; None removes it, True
makes a flag a switch. A journal step reads ``--speculative-attention-mode=decode``, a plot axis ``decode``.

>>> base = ServerSpec.simulator(tp=8, port=30000, speculative_algorithm="EAGLE3")
>>> [v.title for v in expand(base, vary={"--speculative-attention-mode": ["prefill", "decode"]})]
['--speculative-attention-mode=prefill', '--speculative-attention-mode=decode']
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from toolkit.errors import InvalidFlag
from toolkit.server.spec import MISSING, ServerSpec

__all__ = ["Variant", "expand", "apply_param", "param_value", "spec_differences", "param_text", "value_text",
           "ABSENT", "ENV_PREFIX"]

ENV_PREFIX = "env:"
ABSENT = "(absent)"  # how a removed flag or variable shows in labels


def _check_param(name: object) -> str:
    if not isinstance(name, str) or not (name.startswith("-") or name.startswith(ENV_PREFIX)):
        raise InvalidFlag(f"{name!r} is neither a flag nor an environment variable",
                          hint="spell flags as on the command line ('--speculative-attention-mode') and "
                               "variables as 'env:NCCL_ALGO'")
    return name


def apply_param(spec: ServerSpec, name: str, value: object) -> ServerSpec:
    """``spec`` with one parameter set: a flag (``"--x"``) or a variable (``"env:NAME"``); None removes it."""
    if _check_param(name).startswith(ENV_PREFIX):
        return spec.with_env({name.removeprefix(ENV_PREFIX): None if value is False else value})
    if value is None or value is False:
        return spec.without_flags(name)
    return spec.with_flags({name: value})


def param_value(spec: ServerSpec, name: str) -> object:
    """The value of a parameter in ``spec``, in :func:`apply_param`'s terms (None: absent, True: switch)."""
    if _check_param(name).startswith(ENV_PREFIX):
        return dict(spec.env).get(name.removeprefix(ENV_PREFIX))
    value = spec.flag(name)
    return None if value is MISSING else True if value is None else value


def spec_differences(reference: ServerSpec, spec: ServerSpec) -> dict[str, object]:
    """The flags (``--x``), variables (``env:X``) and ``commit`` whose values differ, with ``spec``'s values."""
    names = [n for n, _ in reference.flags] + [n for n, _ in spec.flags if n not in dict(reference.flags)]
    variables = dict.fromkeys([k for k, _ in reference.env] + [k for k, _ in spec.env])
    names += [ENV_PREFIX + k for k in variables]
    diff = {n: param_value(spec, n) for n in names if param_value(spec, n) != param_value(reference, n)}
    if spec.commit != reference.commit:
        diff["commit"] = spec.commit
    return diff


def value_text(value: object) -> str:
    """A parameter value as a short label: ``decode``, ``on`` (switch), ``(absent)``, ``1,2,4``."""
    if value is None or value is False:
        return ABSENT
    if value is True:
        return "on"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def param_text(name: str, value: object) -> str:
    """A parameter as a title: ``--speculative-attention-mode=decode``, ``without NCCL_ALGO``, ``--x``."""
    shown = name.removeprefix(ENV_PREFIX)
    if value is None or value is False:
        return f"without {shown}"
    if value is True and not name.startswith(ENV_PREFIX):
        return shown
    return f"{shown}={value_text(value)}"


@dataclass(frozen=True)
class Variant:
    """One combination of a sweep: its varied values, the spec they make, and how to name it."""

    index: int
    params: Mapping[str, object]
    spec: ServerSpec
    label: str  # short, for tables and plot axes
    title: str  # what differs, for the journal step


def _titled(params: Mapping[str, object]) -> str:
    return ", ".join(param_text(n, v) for n, v in params.items())


def _params_label(params: Mapping[str, object]) -> str:
    if len(params) == 1:
        return value_text(next(iter(params.values())))
    return ", ".join(f"{n.lstrip('-').removeprefix(ENV_PREFIX)}={value_text(v)}" for n, v in params.items())


def expand(base: ServerSpec | None, *, vary: Mapping[str, Sequence[object]] | None = None,
           specs: Sequence[ServerSpec] | None = None) -> list[Variant]:
    """The combinations of a sweep, in order: the grid over ``vary``, or ``specs`` as given, or ``base`` alone."""
    if vary is not None and specs is not None:
        raise ValueError("pass vary= (a grid over one base spec) or specs= (explicit specs), not both")
    if specs is not None:
        return _explicit(base, list(specs))
    if base is None:
        raise ValueError("sweep needs a base spec, or specs=[...]")
    if not vary:
        return [Variant(0, {}, base, base.describe(), base.describe())]
    for name, values in vary.items():
        _check_param(name)
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"vary[{name!r}] must be a non-empty list of values, e.g. ['prefill', 'decode'], "
                             f"not {values!r}")
    variants = []
    for index, combo in enumerate(itertools.product(*vary.values())):
        params = dict(zip(vary, combo, strict=True))
        spec = base
        for name, value in params.items():
            spec = apply_param(spec, name, value)
        variants.append(Variant(index, params, spec, _params_label(params), _titled(params)))
    return variants


def _explicit(base: ServerSpec | None, specs: list[ServerSpec]) -> list[Variant]:
    if not specs:
        raise ValueError("specs= must hold at least one ServerSpec")
    reference = base if base is not None else specs[0]
    diffs = [spec_differences(reference, spec) for spec in specs]
    names = list(dict.fromkeys(name for diff in diffs for name in diff))
    labels = [spec.describe() for spec in specs]
    if len(set(labels)) < len(labels):  # describe() abbreviates: fall back to what differs
        labels = [spec.label or _params_label(diff) if diff else spec.describe() for spec, diff in zip(specs, diffs,
                                                                                                          strict=True)]
    variants = []
    for index, (spec, diff, label) in enumerate(zip(specs, diffs, labels, strict=True)):
        params = {n: spec.commit if n == "commit" else param_value(spec, n) for n in names}
        variants.append(Variant(index, params, spec, label, _titled(diff) or spec.describe()))
    return variants
