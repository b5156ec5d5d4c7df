"""Plain-text representations: ipywidgets' own `text/plain`, all a headless run records, is a trait dump."""

from __future__ import annotations

import uuid
from typing import Any

from IPython.display import display, update_display

__all__ = ["TextRepr"]


class TextRepr:
    """Mixin: `summary()` becomes `repr()`, IPython's pretty text and the bundle's `text/plain`.

    Shown under its own display id, so `refresh_display()` replaces the snapshot: a notebook records the end.
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
        bundle = super()._repr_mimebundle_(**kwargs) or {}  # type: ignore[misc]  # the widget-view entry
        bundle["text/plain"] = self.summary()
        return bundle
