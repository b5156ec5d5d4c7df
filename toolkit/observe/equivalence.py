"""Output equivalence: does a change that should only be faster leave greedy outputs unchanged?

Speculative decoding, another attention backend, a commit that claims only speed: with greedy sampling
(``temperature: 0``) each must produce the same tokens for the same prompts (compared per token through
``logprobs`` where the server gives them, else per character).

>>> a = GreedyOutputs("base", ("p",), ((" a", " b", " c"),), "token", 3)
>>> b = GreedyOutputs("eagle", ("p",), ((" a", " x", " c"),), "token", 3)
>>> compare_outputs(a, b).summary()
'eagle vs base: 0/1 prompts identical; first divergence at token 1 (prompt 0)'
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from toolkit.logs import MetricRow
from toolkit.server.http import HttpAnswer, request, served_model

if TYPE_CHECKING:
    import pandas as pd

    from toolkit.server.server import Server

__all__ = ["DEFAULT_PROMPTS", "GreedyOutputs", "PromptComparison", "EquivalenceResult", "greedy_outputs",
           "compare_outputs", "complete_greedy"]

Unit = Literal["token", "character"]

DEFAULT_PROMPTS = (
    "Explain in one paragraph why a KV cache speeds up autoregressive decoding.",
    "List three causes of a slow all-reduce between eight GPUs.",
    "Write a haiku about speculative decoding.",
    "What does a CUDA graph save compared with launching kernels one by one?",
    "Translate to French: the server is ready when the first token comes back.",
    "def fibonacci(n):",
)


@dataclass(frozen=True)
class GreedyOutputs:
    """Greedy outputs of one configuration: per prompt, the tokens (or characters) it produced."""

    label: str
    prompts: tuple[str, ...]
    outputs: tuple[tuple[str, ...], ...]
    unit: Unit
    max_tokens: int
    errors: tuple[str, ...] = ()


def complete_greedy(url: str, prompt: str, *, model: str | None, max_tokens: int, chat: bool = False,
                    logprobs: bool = True, timeout_s: float = 120.0, api_key: str | None = None) -> HttpAnswer:
    """One non-streamed greedy completion, with per-token texts when ``logprobs``.

    A server that rejects the field (``transformers serve`` answers 422 to unknown fields) is asked again by
    the caller without it.
    """
    body: dict[str, object] = {"max_tokens": max_tokens, "temperature": 0, "stream": False}
    if model is not None:
        body["model"] = model
    body.update({"messages": [{"role": "user", "content": prompt}]} if chat else {"prompt": prompt})
    if logprobs:
        body["logprobs"] = True if chat else 1
    path = "/v1/chat/completions" if chat else "/v1/completions"
    return request(url.rstrip("/") + path, body=body, timeout_s=timeout_s, api_key=api_key)


def _pieces(answer: HttpAnswer, chat: bool) -> tuple[tuple[str, ...], Unit]:
    data = answer.json()
    choice = data["choices"][0] if isinstance(data, dict) and data.get("choices") else {}
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    if isinstance(logprobs, dict):
        if isinstance(logprobs.get("tokens"), list):
            return tuple(str(t) for t in logprobs["tokens"]), "token"
        if isinstance(logprobs.get("content"), list):
            return tuple(str(t.get("token", "")) for t in logprobs["content"] if isinstance(t, dict)), "token"
    text = (choice.get("message") or {}).get("content") if chat else choice.get("text")
    return tuple(str(text or "")), "character"


def _one(url: str, prompt: str, model: str | None, max_tokens: int, api_key: str | None
         ) -> tuple[tuple[str, ...], Unit, str]:
    answer = complete_greedy(url, prompt, model=model, max_tokens=max_tokens, api_key=api_key)
    chat = answer.status in (404, 405)  # a chat-only server (transformers serve)
    if chat:
        answer = complete_greedy(url, prompt, model=model, max_tokens=max_tokens, chat=True, api_key=api_key)
    if answer.status in (400, 422):  # a server that rejects the logprobs field
        answer = complete_greedy(url, prompt, model=model, max_tokens=max_tokens, chat=chat, logprobs=False,
                                 api_key=api_key)
    if answer.status != 200:
        return (), "character", f"HTTP {answer.status or answer.error}: {answer.body[:200].decode('utf-8', 'replace')}"
    try:
        pieces, unit = _pieces(answer, chat)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        return (), "character", f"unreadable answer ({exc})"
    return pieces, unit, ""


def greedy_outputs(server: Server | str, prompts: Sequence[str] = DEFAULT_PROMPTS, *, max_tokens: int = 32,
                   label: str | None = None, model: str | None = None, api_key: str | None = None,
                   workers: int = 4) -> GreedyOutputs:
    """Ask ``server`` (a Server or a URL) for the greedy completion of each prompt, ``workers`` at a time."""
    url = server if isinstance(server, str) else server.url
    name = label or (url if isinstance(server, str) else server.spec.describe())
    model = model or served_model(url, api_key=api_key)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        done = list(pool.map(lambda p: _one(url, p, model, max_tokens, api_key), prompts))
    units = {unit for pieces, unit, error in done if not error}
    unit: Unit = "token" if units == {"token"} else "character"
    outputs = tuple(pieces if unit == "token" else tuple("".join(pieces)) for pieces, _, _ in done)
    return GreedyOutputs(name, tuple(prompts), outputs, unit, max_tokens, tuple(error for _, _, error in done))


@dataclass(frozen=True)
class PromptComparison:
    index: int
    prompt: str
    identical: bool
    first_divergence: int | None  # position in `unit`s; None when identical or when one side failed
    reference_len: int
    candidate_len: int
    reference_next: str  # what each side produced at the divergence (a few units)
    candidate_next: str
    error: str = ""


@dataclass(frozen=True)
class EquivalenceResult:
    """How ``candidate``'s greedy outputs compare to ``reference``'s, prompt by prompt."""

    reference: str
    candidate: str
    unit: Unit
    comparisons: tuple[PromptComparison, ...]

    @property
    def total(self) -> int:
        return len(self.comparisons)

    @property
    def identical(self) -> int:
        return sum(c.identical for c in self.comparisons)

    @property
    def holds(self) -> bool:
        return self.total > 0 and self.identical == self.total

    @property
    def first_divergence(self) -> PromptComparison | None:
        diverged = [c for c in self.comparisons if c.first_divergence is not None]
        return min(diverged, key=lambda c: (c.first_divergence, c.index)) if diverged else None

    def summary(self) -> str:
        text = f"{self.candidate} vs {self.reference}: {self.identical}/{self.total} prompts identical"
        first = self.first_divergence
        if first is not None:
            text += f"; first divergence at {self.unit} {first.first_divergence} (prompt {first.index})"
        failed = [c for c in self.comparisons if c.error]
        if failed:
            text += f"; {len(failed)} prompt(s) failed: {failed[0].error}"
        return text

    def __repr__(self) -> str:
        return self.summary()

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([c.__dict__ for c in self.comparisons])

    def metric_row(self) -> MetricRow:
        """Kind ``equivalence`` in the journal: prompts, identical, and the earliest divergence if any."""
        values: dict[str, int | bool] = {"prompts": self.total, "identical": self.identical, "holds": self.holds,
                                         "unit_is_token": self.unit == "token"}
        first = self.first_divergence
        if first is not None and first.first_divergence is not None:
            values["first_divergence"] = first.first_divergence
            values["first_divergence_prompt"] = first.index
        return MetricRow("equivalence", values, datetime.now(), None, 0)


def _divergence(a: Sequence[str], b: Sequence[str]) -> int | None:
    differs = (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    return next(differs, None if len(a) == len(b) else min(len(a), len(b)))


def _as_unit(outputs: GreedyOutputs, unit: Unit) -> list[tuple[str, ...]]:
    return list(outputs.outputs) if outputs.unit == unit else [tuple("".join(o)) for o in outputs.outputs]


def compare_outputs(reference: GreedyOutputs, candidate: GreedyOutputs) -> EquivalenceResult:
    """Compare prompt by prompt, in tokens when both sides gave tokens, else in characters."""
    if reference.prompts != candidate.prompts:
        raise ValueError("the two output sets answer different prompts; ask both with the same prompts "
                         f"(reference has {len(reference.prompts)}, candidate {len(candidate.prompts)})")
    unit: Unit = "token" if reference.unit == candidate.unit == "token" else "character"
    ref, cand = _as_unit(reference, unit), _as_unit(candidate, unit)
    errors_a, errors_b = reference.errors or ("",) * len(ref), candidate.errors or ("",) * len(cand)
    rows = []
    for i, prompt in enumerate(reference.prompts):
        error = errors_a[i] or errors_b[i]
        at = None if error else _divergence(ref[i], cand[i])
        rows.append(PromptComparison(i, prompt, not error and at is None, at, len(ref[i]), len(cand[i]),
                                     "".join(ref[i][at:at + 4]) if at is not None else "",
                                     "".join(cand[i][at:at + 4]) if at is not None else "", error))
    return EquivalenceResult(reference.label, candidate.label, unit, tuple(rows))
