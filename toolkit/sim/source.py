"""Reading a simulated source checkout: `sim_perf.json` decides how fast the simulated build runs.

`python -m toolkit.sim --source-dir DIR` reads DIR/sim_perf.json from whatever commit is checked
out there, so `git bisect` over a make-repo history changes the measured rate. Pure parsing plus
one file read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from toolkit.sim.latency import PerfParams

__all__ = ["PERF_FILE", "SourcePerf", "load_source_perf", "parse_source_perf"]

PERF_FILE = "sim_perf.json"


@dataclass(frozen=True)
class SourcePerf:
    """What one checked-out commit says about the build."""

    params: PerfParams
    version: str | None = None
    import_error: tuple[str, str] | None = None  # (module, name): this commit fails to import


def parse_source_perf(text: str) -> SourcePerf:
    """Parse the contents of sim_perf.json; raises ValueError naming the problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{PERF_FILE} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("perf", {}), dict):
        raise ValueError(f'{PERF_FILE} must be an object like {{"perf": {{"decode_step_ms": 12.1}}}}')
    broken = data.get("import_error")
    import_error = None
    if broken is not None:
        if not isinstance(broken, dict) or not {"module", "name"} <= set(broken):
            raise ValueError(f'{PERF_FILE}: import_error must be {{"module": ..., "name": ...}}')
        import_error = (str(broken["module"]), str(broken["name"]))
    version = data.get("version")
    return SourcePerf(PerfParams.from_mapping(data.get("perf", {})), str(version) if version else None,
                      import_error)


def load_source_perf(source_dir: str | Path) -> SourcePerf:
    """Read DIR/sim_perf.json; a missing file is a ValueError that says how to create one."""
    path = Path(source_dir) / PERF_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"--source-dir {source_dir} has no {PERF_FILE}; write a simulated source tree with "
                         f"`python -m toolkit.sim make-repo DIR` or point --source-dir at one") from None
    return parse_source_perf(text)
