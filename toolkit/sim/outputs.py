"""Greedy outputs of the simulated server: the same prompt gives the same tokens under any speed flag.

A greedy request's texts are seeded by the prompt and ``--sim-seed``, never by the flags;
``--sim-fault greedy-divergence`` breaks that for about half the prompts, as a bad speed-up would.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Mapping

from toolkit.sim.protocol import WordSource, message_contents

__all__ = ["GreedyWords", "greedy_words", "add_logprobs", "DIVERGENCE_FAULT"]

DIVERGENCE_FAULT = "greedy-divergence"


def _prompt_text(body: Mapping[str, object], chat: bool) -> str:
    if chat:
        return "\n".join(c if isinstance(c, str) else repr(c) for c in message_contents(body))
    return repr(body.get("prompt", body.get("text")))


class GreedyWords(WordSource):
    """Token texts fixed by the prompt; with ``diverge_at`` set, different ones from that token on."""

    def __init__(self, seed: int, diverge_at: int | None) -> None:
        super().__init__(seed)
        self._other = WordSource(seed ^ 0x5EED)
        self._diverge_at = math.inf if diverge_at is None else diverge_at
        self._taken = 0

    def take(self, n: int) -> list[str]:
        words = [self._other.take(1)[0] if self._taken + k >= self._diverge_at else word
                 for k, word in enumerate(super().take(n))]
        self._taken += n
        return words


def greedy_words(body: object, chat: bool, temperature: float, seed: int, fault: str) -> GreedyWords | None:
    """The words for a greedy request (None for a sampled one: the engine's seeded source then)."""
    if temperature != 0.0 or not isinstance(body, Mapping):
        return None
    digest = hashlib.sha256(f"{seed}\0{_prompt_text(body, chat)}".encode()).digest()
    diverges = fault == DIVERGENCE_FAULT and digest[8] % 2 == 0
    return GreedyWords(int.from_bytes(digest[:8], "big"), 3 + digest[9] % 8 if diverges else None)


def add_logprobs(response: dict[str, object], body: object, chat: bool, texts: list[str]) -> None:
    """Put per-token texts into a non-streamed response that asked for ``logprobs`` (all log-probs 0.0)."""
    if not isinstance(body, Mapping) or not body.get("logprobs"):
        return
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return
    if chat:
        choices[0]["logprobs"] = {"content": [{"token": t, "logprob": 0.0, "bytes": list(t.encode()),
                                               "top_logprobs": []} for t in texts]}
        return
    offsets = list(itertools.accumulate(map(len, texts), initial=0))[:-1]
    choices[0]["logprobs"] = {"tokens": list(texts), "token_logprobs": [0.0] * len(texts), "top_logprobs": None,
                              "text_offset": offsets}
