"""Plain-text representations, so an executed notebook reads well without a browser.

ipywidgets' own `text/plain` is a trait dump (`VBox(children=(HTML(value='<style>...`), which is all a
headless run records; our widgets say what they show instead.
"""

from __future__ import annotations

import uuid
from typing import Any

from IPython.display import display, update_display

__all__ = ["TextRepr"]


class TextRepr:
    """Mixin: `summary()` becomes `repr()`, IPython's pretty text and the bundle's `text/plain`.

    The widget is displayed under its own display id, so `refresh_display()` replaces the text snapshot
    in place: an executed notebook records "stopped · clean exit", not the "starting" of the cell's start.
    """

    _display_id: str | None = None

    def _ipython_display_(self) -> None:
        if self._display_id is None:
            self._display_id = uuid.uuid4().hex
        display(self._repr_mimebundle_(), raw=True, display_id=self._display_id)

    def refresh_display(self) -> None:
        """Replace what the notebook shows for this widget (its text snapshot) with its state now."""
        if self._display_id is not None:
            update_display(self._repr_mimebundle_(), raw=True, display_id=self._display_id)

    def summary(self) -> str:  # pragma: no cover - every widget overrides it
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"{type(self).__name__}(...)" if cycle else self.summary())

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # the widget base class adds the widget-view entry while the widget is open
        bundle = super()._repr_mimebundle_(**kwargs) or {}  # type: ignore[misc]
        bundle["text/plain"] = self.summary()
        return bundle
