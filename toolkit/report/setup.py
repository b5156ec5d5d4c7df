"""The post-mortem's setup header: what ran, where, under which load, measured by which toolkit (pure).

A reader judges every number below it by these conditions (issue 28: the journal held all of them,
the post-mortem said none).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from toolkit.engines.release_profile import ENGINE_NAMES
from toolkit.report.workload import describe, differing

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["setup_lines"]

_TP_FLAGS = ("--tp-size", "--tp", "--tensor-parallel-size")


def _distinct(values: Iterable[Any]) -> list[str]:
    return list(dict.fromkeys(str(v) for v in values if v is not None and str(v) not in ("", "nan", "None")))


def _ascending(values: list[str]) -> list[str]:
    """Numbers in ascending order (concurrency 1, 8, 16), anything else as it came."""
    try:
        return sorted(values, key=float)
    except ValueError:
        return values


def _flag(spec: dict[str, Any], names: tuple[str, ...]) -> Any:
    return next((value for name, value in spec.get("flags") or [] if name in names), None)


def _engine(spec: dict[str, Any], versions: dict[str, Any]) -> tuple[str, str | None]:
    """(what ran, its release): ``("SGLang", "0.5.9")``, ``("the toolkit's simulator imitating SGLang", ...)``."""
    engine = str(spec.get("engine") or "")
    name = ENGINE_NAMES.get(engine, engine or "unknown engine")
    release = versions.get(engine)
    if spec.get("simulated"):
        return f"the toolkit's simulator (python -m toolkit.sim) imitating {name}", (
            _flag(spec, ("--sim-engine-version",)) or release)
    return name, release


def _engines(specs: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    """One entry per engine, its releases listed (a commit bisection runs several of one engine)."""
    releases: dict[str, dict[str, None]] = {}  # ordered sets
    for name, release in (_engine(spec, versions) for spec, versions in specs):
        releases.setdefault(name, {}).update({str(release): None} if release else {})
    return "; ".join(f"{name} {', '.join(found)}" if found else f"{name} (release not reported)"
                     for name, found in releases.items())


def setup_lines(steps: pd.DataFrame, results: pd.DataFrame) -> list[str]:
    """``Engine: SGLang 0.5.9``, ``Model: ...``, ... one line per fact; values joined when steps differ."""
    specs = [(spec, versions or {}) for spec, versions in zip(steps["spec"], steps["versions"], strict=True)
             if isinstance(spec, dict) and spec]
    lines = []
    if specs:
        lines.append("Engine: " + _engines(specs))
        lines.append("Model: " + ", ".join(_distinct(spec.get("model") for spec, _ in specs) or ["not recorded"]))
        lines.append("Tensor parallel: " + ", ".join(_distinct(_flag(spec, _TP_FLAGS) for spec, _ in specs) or ["1"]))
    hosts = _distinct(steps["hosts"]) if "hosts" in steps.columns else []
    lines.append("Hosts: " + (", ".join(hosts) if hosts else "not recorded"))
    rows = results.to_dict("records")
    varying = differing(rows)
    if rows and not varying:
        lines.append(f"Workload: {describe(rows[0])}")
    elif rows:
        common = _distinct(describe(row, varying) for row in rows)
        swept = "; ".join(f"{column.removeprefix('workload:').removeprefix('max_').replace('_', ' ')} "
                          + ", ".join(_ascending(_distinct(row.get(column) for row in rows))) for column in varying)
        lines.append(f"Workloads: {' or '.join(common)}; varied: {swept} (each result below names its own)")
    toolkit = _distinct((versions or {}).get("toolkit") for versions in steps["versions"])
    lines.append("Toolkit: " + (", ".join(toolkit) if toolkit else "version not recorded"))
    return lines
