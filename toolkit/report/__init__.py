"""Journal -> post-mortem: `document` (a tiny block model rendered to Markdown and HTML) and
`postmortem` (what the post-mortem says).

>>> import toolkit as tk
>>> tk.report.write  # doctest: +ELLIPSIS
<function write at ...>
"""

from __future__ import annotations

from toolkit.report.postmortem import build, main, write

__all__ = ["write", "build", "main"]
