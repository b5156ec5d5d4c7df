"""Plain-text representations, so an executed notebook or a report reads well without a browser.

ipywidgets' own `text/plain` is the widget's trait dump cut at 110 characters
(`VBox(children=(HTML(value='<style>...`), which is all a headless run (papermill, nbclient,
a terminal IPython) records. Our widgets say what they show instead: the state line, the
counts, the last lines.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TextRepr"]


class TextRepr:
    """Mixin: `summary()` becomes `repr()`, IPython's pretty text and the bundle's `text/plain`.

    The `text/plain` entry is a snapshot taken when the cell displays the widget; evaluate
    the widget again (or `print(view)`) at the end of a cell to record the final state.
    """

    def summary(self) -> str:  # pragma: no cover - every widget overrides it
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"{type(self).__name__}(...)" if cycle else self.summary())

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # The widget base class adds the widget-view entry (while the widget is open); a closed
        # widget is just its text.
        bundle = super()._repr_mimebundle_(**kwargs) or {}  # type: ignore[misc]
        bundle["text/plain"] = self.summary()
        return bundle
