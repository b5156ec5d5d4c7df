"""``tk.measure``: :func:`toolkit.moves.measure.measure` with a :class:`ServerPanel` and a :class:`LogView`
shown under the running cell; both draw their end before the call returns."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec

from IPython.display import display

from toolkit.moves.measure import Measurement
from toolkit.moves.measure import measure as measure_move
from toolkit.server.server import MultiNodeServer, Server
from toolkit.views.widgets._log_view import LogView
from toolkit.views.widgets._server_panel import ServerPanel

__all__ = ["show_live", "measure"]

P = ParamSpec("P")


def show_live(server: Server | MultiNodeServer) -> tuple[ServerPanel, LogView]:
    """Display ``server``'s status panel and live log under the running cell; returns both widgets."""
    panel, view = ServerPanel(server), LogView(server)
    display(panel, view)
    return panel, view


def _shown_live(move: Callable[P, Measurement]) -> Callable[P, Measurement]:
    """``move`` with ``watch=show_live``: the same parameters, declared once, in the move."""

    @functools.wraps(move)
    def run(*args: P.args, **kwargs: P.kwargs) -> Measurement:
        kwargs.setdefault("watch", show_live)
        return move(*args, **kwargs)

    run.__doc__ = f"(tk.measure: the server's panel and live log are shown under the cell.) {move.__doc__ or ''}"
    return run


#: :func:`toolkit.moves.measure.measure`, showing the server live while it runs::
#:
#:     baseline = tk.measure(host, base, plan=tk.Plan(bench=BENCH, journal=journal), greedy_tokens=24)
measure = _shown_live(measure_move)
