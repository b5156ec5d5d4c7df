"""``tk.measure``: :func:`toolkit.moves.measure.measure` with the server shown live while it runs.

The move decides and records; this only adds the view: once the server is launched, a
:class:`ServerPanel` and a :class:`LogView` are displayed under the running cell, and both
draw their end (stopped, or failed with its evidence) before the call returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from IPython.display import display

from toolkit.benchmark import BenchResult
from toolkit.host.place import Target
from toolkit.journal import Journal
from toolkit.moves.equivalence import GreedyOutputs
from toolkit.moves.measure import Measurement
from toolkit.moves.measure import measure as measure_move
from toolkit.server.server import MultiNodeServer, Server
from toolkit.server.spec import ServerSpec
from toolkit.views.widgets._log_view import LogView
from toolkit.views.widgets._server_panel import ServerPanel

__all__ = ["show_live", "measure"]


def show_live(server: Server | MultiNodeServer) -> tuple[ServerPanel, LogView]:
    """Display ``server``'s status panel and live log under the running cell; returns both widgets."""
    panel, view = ServerPanel(server), LogView(server)
    display(panel, view)
    return panel, view


def measure(
    host: Target,
    spec: ServerSpec,
    *,
    journal: Journal | None = None,
    bench: Mapping[str, Any] | Callable[[Server], BenchResult] | None = None,
    title: str | None = None,
    kind: str = "measure",
    hypothesis: str | None = None,
    repeats: int = 1,
    timeout_s: float = 900.0,
    log_dir: str | None = None,
    check: bool = True,
    progress: bool = True,
    greedy_tokens: int = 0,
    reference: GreedyOutputs | None = None,
) -> Measurement:
    """Measure ``spec`` on ``host`` as one journal step, showing the server live (see
    :func:`toolkit.moves.measure.measure` for every argument).

    >>> baseline = tk.measure(host, base, journal=journal, bench=BENCH, title="baseline",
    ...                       greedy_tokens=24)                                            # doctest: +SKIP
    >>> eagle = tk.measure(host, spec, journal=journal, bench=BENCH, reference=baseline.outputs)  # doctest: +SKIP
    >>> eagle.equivalence.holds                                                            # doctest: +SKIP
    >>> oom = tk.measure(host, too_big, journal=journal, bench=BENCH, check=False)          # doctest: +SKIP
    >>> oom.error.evidence                                                                 # doctest: +SKIP
    """
    return measure_move(host, spec, journal=journal, bench=bench, title=title, kind=kind, hypothesis=hypothesis,
                        repeats=repeats, timeout_s=timeout_s, log_dir=log_dir, check=check, progress=progress,
                        watch=show_live, greedy_tokens=greedy_tokens, reference=reference)
