"""A failure's hint, spelled with the flags of the release that failed: pure.

The rule packs' hints (``toolkit.logs.packs.Hints``) serve SGLang and vLLM at once; once the release
is known, its own text replaces them (``toolkit.engines.hint_text``).

>>> release_hint(Hints.CUDA_GRAPH, "sglang", "0.5.23").count("--cuda-graph-max-bs-decode")
1
>>> release_hint("read the log", "sglang", "0.5.23")
'read the log'
"""

from __future__ import annotations

from toolkit.engines import hint_text
from toolkit.logs.packs import Hints

__all__ = ["FAMILIES", "release_hint"]

#: Each pack hint and its family name (Hints.OOM: "OOM"; the key of toolkit.engines.hints.RELEASE_HINTS).
FAMILIES: dict[str, str] = {hint: name for name, hint in vars(Hints).items() if name.isupper()}


def release_hint(hint: str | None, engine: str | None, version: str | None) -> str | None:
    """``hint`` as ``engine`` ``version`` spells it (unchanged when it names no release-specific flag)."""
    if hint is None or engine is None:
        return hint
    family = FAMILIES.get(hint)
    specific = hint_text(engine, family, version) if family else None
    return specific or hint
