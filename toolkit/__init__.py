"""Debug LLM inference servers from a notebook: launch, watch, benchmark, journal.

>>> import toolkit as tk
>>> host = tk.Host.local()                                   # or tk.Host("gpu-a", user="root")
>>> spec = tk.ServerSpec.simulator(tp=8, port=30000)         # or tk.ServerSpec.sglang("model", tp=8)
>>> spec.with_flags({"--speculative-algorithm": "EAGLE3"}).describe()
'sim EAGLE3'

Names are imported on first use (PEP 562): every simulated TP rank and the CPU server's venv (no fabric)
import this package, and importing everything eagerly costs seconds. The loaders below are plain imports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = [
    "Host", "HostGroup", "SlurmTarget", "ContainerTarget", "ServerSpec", "Server", "launch",
    "launch_multinode", "leftovers", "Journal", "Load", "bench", "Plan", "sweep", "compare", "compare_flag",
    "perf_bisect", "compare_commits", "env_report", "profile", "observed", "agreement", "greedy_outputs",
    "compare_outputs", "compare_profiles", "diagnose", "diagnose_commits", "validate_spec", "LogView",
    "ServerPanel", "measure", "ToolkitError", "errors", "logs", "plots", "report",
]


def _hosts() -> dict[str, Any]:
    from toolkit.host.container import ContainerTarget
    from toolkit.host.group import HostGroup
    from toolkit.host.host import Host
    from toolkit.host.slurm import SlurmTarget

    return {"Host": Host, "HostGroup": HostGroup, "SlurmTarget": SlurmTarget, "ContainerTarget": ContainerTarget}


def _servers() -> dict[str, Any]:
    from toolkit.server.launch import launch, launch_multinode
    from toolkit.server.preflight import validate_spec
    from toolkit.server.registry import leftovers
    from toolkit.server.server import Server
    from toolkit.server.spec import ServerSpec

    return {"ServerSpec": ServerSpec, "Server": Server, "launch": launch, "launch_multinode": launch_multinode,
            "validate_spec": validate_spec, "leftovers": leftovers}


def _journal() -> dict[str, Any]:
    from toolkit.journal import Journal

    return {"Journal": Journal}


def _benchmark() -> dict[str, Any]:
    from toolkit.benchmark import Load, bench

    return {"bench": bench, "Load": Load}


def _moves() -> dict[str, Any]:
    from toolkit.moves import Plan, compare, compare_flag, sweep
    from toolkit.moves.bisect import compare_commits, perf_bisect
    from toolkit.moves.envcheck import env_report

    return {"Plan": Plan, "sweep": sweep, "compare": compare, "compare_flag": compare_flag, "perf_bisect": perf_bisect,
            "compare_commits": compare_commits, "env_report": env_report}


def _observing() -> dict[str, Any]:
    from toolkit.moves.agreement import agreement
    from toolkit.moves.observed import observed
    from toolkit.moves.profile import profile
    from toolkit.observe.equivalence import compare_outputs, greedy_outputs
    from toolkit.observe.torch_profile import compare_profiles

    return {"profile": profile, "observed": observed, "agreement": agreement, "greedy_outputs": greedy_outputs,
            "compare_outputs": compare_outputs, "compare_profiles": compare_profiles}


def _diagnosing() -> dict[str, Any]:
    from toolkit.moves.diagnose import diagnose, diagnose_commits

    return {"diagnose": diagnose, "diagnose_commits": diagnose_commits}


def _views() -> dict[str, Any]:
    from toolkit.views import plots
    from toolkit.views.widgets import LogView, ServerPanel, measure

    return {"LogView": LogView, "ServerPanel": ServerPanel, "plots": plots, "measure": measure}


def _modules() -> dict[str, Any]:
    # `import a.b as c`, not `from toolkit import b`: the latter would ask this module's __getattr__ again
    import toolkit.errors as errors
    import toolkit.logs as logs
    import toolkit.report as report

    return {"errors": errors, "logs": logs, "report": report, "ToolkitError": errors.ToolkitError}


def __getattr__(name: str) -> Any:
    loader = _LOADER_OF.get(name)
    if loader is None:
        raise AttributeError(f"module 'toolkit' has no attribute {name!r}")
    values = loader()
    globals().update(values)
    return values[name]


# public name -> the loader that imports it (kept beside __all__; tests/test_public_api.py pins both)
_LOADER_OF: dict[str, Callable[[], dict[str, Any]]] = {
    **dict.fromkeys(("Host", "HostGroup", "SlurmTarget", "ContainerTarget"), _hosts),
    **dict.fromkeys(("ServerSpec", "Server", "launch", "launch_multinode", "validate_spec", "leftovers"), _servers),
    "Journal": _journal,
    **dict.fromkeys(("bench", "Load"), _benchmark),
    **dict.fromkeys(("Plan", "sweep", "compare", "compare_flag", "perf_bisect", "compare_commits", "env_report"), _moves),
    **dict.fromkeys(("profile", "observed", "agreement", "greedy_outputs", "compare_outputs",
                       "compare_profiles"), _observing),
    **dict.fromkeys(("diagnose", "diagnose_commits"), _diagnosing),
    **dict.fromkeys(("LogView", "ServerPanel", "plots", "measure"), _views),
    **dict.fromkeys(("errors", "logs", "report", "ToolkitError"), _modules),
}


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from toolkit import errors, logs, report
    from toolkit.benchmark import Load, bench
    from toolkit.errors import ToolkitError
    from toolkit.host.container import ContainerTarget
    from toolkit.host.group import HostGroup
    from toolkit.host.host import Host
    from toolkit.host.slurm import SlurmTarget
    from toolkit.journal import Journal
    from toolkit.moves import Plan, compare, compare_flag, sweep
    from toolkit.moves.agreement import agreement
    from toolkit.moves.bisect import compare_commits, perf_bisect
    from toolkit.moves.diagnose import diagnose, diagnose_commits
    from toolkit.moves.envcheck import env_report
    from toolkit.moves.observed import observed
    from toolkit.moves.profile import profile
    from toolkit.observe.equivalence import compare_outputs, greedy_outputs
    from toolkit.observe.torch_profile import compare_profiles
    from toolkit.server.launch import launch, launch_multinode
    from toolkit.server.preflight import validate_spec
    from toolkit.server.registry import leftovers
    from toolkit.server.server import Server
    from toolkit.server.spec import ServerSpec
    from toolkit.views import plots
    from toolkit.views.widgets import LogView, ServerPanel, measure
