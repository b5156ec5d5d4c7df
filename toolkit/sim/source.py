"""Reading a simulated source checkout: which commit's code the simulated engine runs, and how fast it is.

``sim_perf.json`` sits in the package, found as Python finds it: ``--source-dir DIR``, else the engine's
package on ``sys.path``, so ``PYTHONPATH=<repo>`` instead of ``<repo>/python`` runs "the installed release"
here as with real SGLang. The kernel minimum is read from the checkout's ``assert_pkg_version(
"sglang-kernel", MIN, ...)`` (sglang 0.5.23 python/sglang/srt/entrypoints/engine.py:1962-1966, "sgl-kernel"
up to 0.5.18; raised at python/sglang/srt/utils/common.py:2422-2436).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

from toolkit.engines import parse_version
from toolkit.sim.latency import PerfParams

__all__ = ["PERF_FILE", "SourcePerf", "find_source", "load_source_perf", "parse_source_perf", "package_dirs"]

PERF_FILE = "sim_perf.json"
# Where each layout keeps its package, relative to the checkout (make-repo --layout).
PACKAGE_DIRS = {"sglang": "python/sglang", "vllm": "vllm"}
_KERNEL_CHECK = re.compile(r'assert_pkg_version\(\s*"(?P<pkg>sgl-kernel|sglang-kernel)",\s*"(?P<min>[^"]+)"')


@dataclass(frozen=True)
class SourcePerf:
    """What one checked-out commit says about the build."""

    params: PerfParams
    version: str | None = None
    import_error: tuple[str, str] | None = None  # (module, name): this commit fails to import
    root: str = ""  # the checkout
    package_root: str = ""  # the folder on sys.path that holds the package (<root>/python for SGLang)
    kernel: tuple[str, str] | None = None  # (package, minimum version) the commit's launcher checks


def parse_source_perf(text: str) -> SourcePerf:
    """Parse the contents of sim_perf.json; raises ValueError naming the problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{PERF_FILE} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("perf", {}), dict):
        raise ValueError(f'{PERF_FILE} must be an object like {{"perf": {{"decode_step_ms": 12.1}}}}')
    broken = data.get("import_error")
    if broken is not None and (not isinstance(broken, dict) or not {"module", "name"} <= set(broken)):
        raise ValueError(f'{PERF_FILE}: import_error must be {{"module": ..., "name": ...}}')
    version = data.get("version")
    return SourcePerf(PerfParams.from_mapping(data.get("perf", {})), str(version) if version else None,
                      None if broken is None else (str(broken["module"]), str(broken["name"])))


def package_dirs(root: Path) -> list[tuple[Path, Path]]:
    """(package folder, folder on sys.path) candidates of a checkout, SGLang's layout first, then flat."""
    return [(root / rel, (root / rel).parent) for rel in PACKAGE_DIRS.values()] + [(root, root)]


def load_source_perf(source_dir: str | Path) -> SourcePerf:
    """Read a checkout's sim_perf.json (inside its package, or at its top); ValueError says how to make one."""
    root = Path(source_dir)
    for package, on_path in package_dirs(root):
        path = package / PERF_FILE
        if path.is_file():
            return _read(path, root, on_path)
    raise ValueError(f"--source-dir {source_dir} has no {PERF_FILE} (looked in python/sglang/, vllm/ and the top); "
                     "write a simulated source tree with `python -m toolkit.sim make-repo DIR` or point "
                     "--source-dir at one")


def _read(path: Path, root: Path, on_path: Path) -> SourcePerf:
    perf = parse_source_perf(path.read_text(encoding="utf-8"))
    engine_py = path.parent / "srt" / "entrypoints" / "engine.py"
    found = _KERNEL_CHECK.search(engine_py.read_text(encoding="utf-8")) if engine_py.is_file() else None
    return dataclasses.replace(perf, root=str(root), package_root=str(on_path),
                               kernel=(found["pkg"], found["min"]) if found else None)


def find_source(engine: str, source_dir: str | None) -> SourcePerf | None:
    """The simulated checkout this server runs: ``--source-dir``, else the engine's package on sys.path;
    None: the built-in build ("the installed release")."""
    if source_dir is not None:
        return load_source_perf(source_dir)
    spec = importlib.util.find_spec(engine) if engine in PACKAGE_DIRS else None
    for package in map(Path, (spec.submodule_search_locations or []) if spec is not None else []):
        if (package / PERF_FILE).is_file():
            root = package.parent.parent if engine == "sglang" else package.parent
            return _read(package / PERF_FILE, root, package.parent)
    return None


def kernel_too_old(required: str, installed: str) -> bool:
    """SGLang's own comparison: ``installed < required`` (packaging versions)."""
    return parse_version(installed) < parse_version(required)
