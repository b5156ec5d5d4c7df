"""Plain-text representations, so an executed notebook or a report reads well without a browser.

ipywidgets' own `text/plain` is the widget's trait dump cut at 110 characters
(`VBox(children=(HTML(value='<style>...`), which is all a headless run (papermill, nbclient,
a terminal IPython) records. Our widgets say what they show instead: the state line, the
counts, the last lines.
"""

from __future__ import annotations

import uuid
from typing import Any

from IPython.display import display, update_display

__all__ = ["TextRepr"]


class TextRepr:
    """Mixin: `summary()` becomes `repr()`, IPython's pretty text and the bundle's `text/plain`.

    The `text/plain` entry is a snapshot taken when the cell displays the widget. The widget
    is displayed under a display id of its own, so `refresh_display()` (which the widgets call
    when their server ends) replaces that snapshot in place: an executed notebook records
    "stopped · clean exit", not the "starting" it showed when the cell began.
    """

    _display_id: str | None = None

    def _ipython_display_(self) -> None:
        if self._display_id is None:
            self._display_id = uuid.uuid4().hex
        display(self._repr_mimebundle_(), raw=True, display_id=self._display_id)

    def refresh_display(self) -> None:
        """Replace what the notebook shows for this widget (its text snapshot) with its state now."""
        if self._display_id is None:
            return
        update_display(self._repr_mimebundle_(), raw=True, display_id=self._display_id)

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
