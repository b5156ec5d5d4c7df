"""Debug LLM inference servers from a notebook: launch, watch, benchmark, journal.

>>> import toolkit as tk
>>> host = tk.Host.local()                                   # or tk.Host("gpu-a", user="root")
>>> spec = tk.ServerSpec.simulator(tp=8, port=30000)         # or tk.ServerSpec.sglang("model", tp=8)
>>> spec.with_flags({"--speculative-algorithm": "EAGLE3"}).describe()
'sim EAGLE3'

Names are imported on first use (PEP 562), so `import toolkit` stays cheap: every
simulated TP rank imports this package, and a notebook pays only for what it touches.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "Host",
    "HostGroup",
    "ServerSpec",
    "Server",
    "launch",
    "launch_multinode",
    "Journal",
    "bench",
    "sweep",
    "compare",
    "compare_flag",
    "perf_bisect",
    "compare_commits",
    "validate_spec",
    "LogView",
    "ServerPanel",
    "ToolkitError",
    "errors",
    "logs",
    "plots",
    "report",
]

# public name -> (module, attribute or None for the module itself)
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "Host": ("toolkit.hosts", "Host"),
    "HostGroup": ("toolkit.hosts", "HostGroup"),
    "ServerSpec": ("toolkit.spec", "ServerSpec"),
    "Server": ("toolkit.launch", "Server"),
    "launch": ("toolkit.launch", "launch"),
    "launch_multinode": ("toolkit.launch", "launch_multinode"),
    "Journal": ("toolkit.journal", "Journal"),
    "bench": ("toolkit.bench", None),  # the package is callable: tk.bench(server, ...) (see its __init__)
    "sweep": ("toolkit.sweep", "sweep"),
    "compare": ("toolkit.sweep", "compare"),
    "compare_flag": ("toolkit.sweep", "compare_flag"),
    "perf_bisect": ("toolkit.bisection", "perf_bisect"),
    "compare_commits": ("toolkit.bisection", "compare_commits"),
    "validate_spec": ("toolkit.flagcheck", "validate_spec"),
    "LogView": ("toolkit.widgets", "LogView"),
    "ServerPanel": ("toolkit.widgets", "ServerPanel"),
    "ToolkitError": ("toolkit.errors", "ToolkitError"),
    "errors": ("toolkit.errors", None),
    "logs": ("toolkit.logs", None),
    "plots": ("toolkit.plots", None),
    "report": ("toolkit.report", None),
}


def __getattr__(name: str) -> Any:
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'toolkit' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from toolkit import bench, errors, logs, plots, report
    from toolkit.bisection import compare_commits, perf_bisect
    from toolkit.errors import ToolkitError
    from toolkit.flagcheck import validate_spec
    from toolkit.hosts import Host, HostGroup
    from toolkit.journal import Journal
    from toolkit.launch import Server, launch, launch_multinode
    from toolkit.spec import ServerSpec
    from toolkit.sweep import compare, compare_flag, sweep
    from toolkit.widgets import LogView, ServerPanel
