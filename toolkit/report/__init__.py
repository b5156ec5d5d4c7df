"""Journal -> post-mortem (docs/postmortem.md says what it holds and why).

>>> import toolkit as tk
>>> tk.report.write  # doctest: +ELLIPSIS
<function write at ...>
"""

from __future__ import annotations

from toolkit.report.postmortem import build, main, write

__all__ = ["write", "build", "main"]
