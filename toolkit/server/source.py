"""Running an engine from one commit's code: the source layouts, how to build them, and whether they fit: pure.

SGLang keeps its package under ``python/sglang`` (``PYTHONPATH=<repo>`` runs the *installed* release);
its kernel wheel's version is checked before anything starts (sglang 0.5.23
python/sglang/srt/entrypoints/engine.py:1962-1966, ``assert_pkg_version(..., "0.4.9", ...)``). vLLM's
``vllm/_C.abi3.so`` must match its Python; a commit runs through ``VLLM_USE_PRECOMPILED=1 pip install
-e .`` in a per-commit venv. A mismatch is ``ExtensionMismatch`` (a bisection skips it), never benign.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from toolkit.engines import VersionError, parse_version
from toolkit.host.shell import join, quote, quote_path

__all__ = ["Install", "LAYOUT", "VENV", "SourceCheck", "pythonpath", "build_command", "check_command",
           "parse_check", "mismatch_in_log"]

Install = Literal["pythonpath", "editable"]
LAYOUT = {"sglang": "python", "vllm": "."}  # where the package sits in each engine's repository
VENV = ".venv-toolkit"  # the per-commit venv of an editable install, inside the checkout (untracked)
# What the engine itself prints when a kernel does not fit (sglang 0.5.23 python/sglang/srt/utils/common.py:2428-2436)
# or when vLLM's _C does not (ImportError text of the dynamic loader).
_LOG_MISMATCH = re.compile(
    r"(?:sgl-kernel|sglang-kernel) (?:is installed with version \S+, which is less than the minimum required version"
    r"|with minimum required version \S+ is not installed)")
# vLLM logs a missing or mismatched _C as a warning ("Failed to import from vllm._C with ..."), benign on a
# CPU client; when it runs a checkout it is the mismatch itself.
_VLLM_C_MISMATCH = re.compile(r"vllm/_C\S*\.so: undefined symbol|No module named 'vllm\._C'|Failed to import from vllm\._C")


def pythonpath(engine: str, repo_dir: str, existing: str | None = None) -> str:
    """``PYTHONPATH`` that makes Python import ``engine`` from ``repo_dir``, before ``existing`` entries.

    >>> pythonpath("sglang", "/src/sglang", "/opt/extra")
    '/src/sglang/python:/opt/extra'
    """
    root = repo_dir.rstrip("/")
    first = f"{root}/python" if LAYOUT.get(engine, ".") == "python" else root
    rest = [p for p in (existing or "").split(":") if p and p != first]
    return ":".join([first, *rest])


def build_command(engine: str, install: Install) -> str | None:
    """The build a checkout needs before it runs (a per-commit venv and ``pip install -e``), or None."""
    if engine != "vllm" and install != "editable":
        return None
    precompiled = "VLLM_USE_PRECOMPILED=1 " if engine == "vllm" else ""
    return (f"python -m venv --system-site-packages {VENV} && {precompiled}{VENV}/bin/python -m pip install "
            f"--no-deps --no-build-isolation -e {LAYOUT.get(engine, 'python')}")


_SGLANG_CHECK = r'''
import json, re, pathlib, importlib.metadata as m
out = {"package": None, "required": None, "pinned": None, "installed": None}
engine = pathlib.Path("python/sglang/srt/entrypoints/engine.py")
found = re.search(r'assert_pkg_version\(\s*"(sgl-kernel|sglang-kernel)",\s*"([^"]+)"',
                  engine.read_text() if engine.is_file() else "")
if found:
    out["package"], out["required"] = found.group(1), found.group(2)
    project = pathlib.Path("python/pyproject.toml")
    pin = re.search(r'"%s==([^"]+)"' % re.escape(found.group(1)), project.read_text() if project.is_file() else "")
    out["pinned"] = pin.group(1) if pin else None
    try:
        out["installed"] = m.version(found.group(1))
    except m.PackageNotFoundError:
        pass
print("TOOLKIT_SOURCE_CHECK " + json.dumps(out))
'''
_VLLM_CHECK = r'''
import json, glob
out = {"compiled": sorted(glob.glob("vllm/_C*.so")), "error": None}
try:
    import vllm._C  # noqa: F401
except Exception as exc:  # the loader's own words: undefined symbol, missing file
    out["error"] = f"{type(exc).__name__}: {exc}"
print("TOOLKIT_SOURCE_CHECK " + json.dumps(out))
'''


def check_command(engine: str, repo_dir: str, python: str, env: tuple[tuple[str, str], ...] = ()) -> str | None:
    """Bash that asks, in the checkout and the spec's environment, whether the commit's compiled parts fit."""
    script = {"sglang": _SGLANG_CHECK, "vllm": _VLLM_CHECK}.get(engine)
    if script is None:
        return None
    prefix = f"env {join(f'{k}={v}' for k, v in env)} " if env else ""
    return f"cd {quote_path(repo_dir)} && {prefix}{quote(python)} -c {quote(script)}"


@dataclass(frozen=True)
class SourceCheck:
    """Whether one checkout's compiled parts fit what is installed; ``problem`` says why not, in full."""

    fits: bool
    problem: str | None
    evidence: tuple[str, ...]


def parse_check(engine: str, output: str, where: str) -> SourceCheck:
    """Read :func:`check_command`'s answer; an answer that cannot be read does not fit (never assumed benign)."""
    line = next((x for x in reversed(output.splitlines()) if x.startswith("TOOLKIT_SOURCE_CHECK ")), None)
    if line is None:
        return SourceCheck(False, f"the source check of {where} printed no answer", tuple(output.splitlines()[-8:]))
    data = json.loads(line.split(" ", 1)[1])
    if engine == "vllm":
        if data.get("error") or not data.get("compiled"):
            why = data.get("error") or "no vllm/_C*.so in the checkout: it was not built"
            return SourceCheck(False, f"vLLM's compiled extension does not fit {where}: {why}",
                               (f"compiled: {data.get('compiled')}", f"import vllm._C: {data.get('error')}"))
        return SourceCheck(True, None, (f"compiled: {data['compiled']}",))
    package, required, pinned, installed = (data.get(k) for k in ("package", "required", "pinned", "installed"))
    if package is None:
        return SourceCheck(True, None, ("the checkout's launcher checks no kernel version",))
    shown = (f"{package} installed: {installed}", f"the commit's launcher requires >= {required}",
             f"the commit pins {package}=={pinned}" if pinned else "no pin in python/pyproject.toml")
    if installed is None:
        return SourceCheck(False, f"{where} needs {package} >= {required}, which is not installed", shown)
    try:
        too_old = parse_version(installed) < parse_version(required)
        unpinned = pinned is not None and parse_version(installed) != parse_version(pinned)
    except VersionError:
        return SourceCheck(False, f"the {package} versions of {where} cannot be compared", shown)
    if too_old:
        return SourceCheck(False, f"{where} needs {package} >= {required}; {installed} is installed "
                                  "(SGLang's launcher would refuse to start)", shown)
    if unpinned:
        return SourceCheck(False, f"{where} was built against {package}=={pinned}; {installed} is installed "
                                  "(the kernels may not match the commit's Python)", shown)
    return SourceCheck(True, None, shown)


def mismatch_in_log(lines: tuple[str, ...], from_source: bool = False) -> str | None:
    """The line in which the engine itself says its compiled parts do not fit, if any (vLLM's ``_C``
    warning counts only for a server that runs a checkout: elsewhere it is a CPU client's noise)."""
    for line in lines:
        if _LOG_MISMATCH.search(line) or (from_source and _VLLM_C_MISMATCH.search(line)):
            return line
    return None
