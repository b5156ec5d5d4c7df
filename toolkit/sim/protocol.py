"""OpenAI-compatible request parsing and response/SSE shapes, as SGLang and vLLM send them. Pure.

Token texts are short seeded words; `usage` counts the simulated tokens exactly.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["BadRequest", "Sampling", "WordSource", "chunk_event", "count_prompt_tokens", "error_body",
           "final_response", "message_contents", "parse_sampling", "sse", "usage", "usage_event"]

WORDS = ("the", "model", "token", "graph", "batch", "draft", "verify", "layer", "cache", "kernel", "stream",
         "rank", "step", "tensor", "value", "node", "server", "queue", "decode", "prefill", "speed", "time",
         "path", "log", "data", "result", "answer", "number", "state", "shape")
DEFAULT_COMPLETION_TOKENS = 16  # OpenAI's and SGLang's CompletionRequest default
DEFAULT_CHAT_TOKENS = 256  # the engines default to "until EOS or context"; the simulator has no EOS


class BadRequest(ValueError):
    """A request the engines would answer with HTTP 400 (or 404 for an unknown model)."""

    def __init__(self, message: str, status: int = 400, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass(frozen=True)
class Sampling:
    """What a request asks for, after validation."""

    model: str
    max_tokens: int
    stream: bool
    include_usage: bool
    prompt_tokens: int
    ignore_eos: bool
    temperature: float


class WordSource:
    """Seeded token texts: each token is one short word with a leading space."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def take(self, n: int) -> list[str]:
        return [" " + self._rng.choice(WORDS) for _ in range(n)]


def _words(text: object) -> int:
    """The simulator's tokenizer: one token per word, plus one per further 6 characters of a long word,
    so a client that counts words where it means tokens is caught (``morning`` is 2 tokens)."""
    if not isinstance(text, str):
        return 0
    return sum(1 + (len(word) - 1) // 6 for word in text.split())


def message_contents(body: Mapping[str, object]) -> list[object]:
    """The ``content`` of every chat message (None where a message is no object)."""
    messages = body.get("messages")
    return [m.get("content") if isinstance(m, Mapping) else None
            for m in (messages if isinstance(messages, list) else ())]


def count_prompt_tokens(body: Mapping[str, object], chat: bool) -> int:
    """Prompt length in simulated tokens: words of the prompt or of every message's text parts."""
    if chat:
        return sum(sum(_words(p.get("text")) for p in c if isinstance(p, Mapping)) if isinstance(c, list)
                   else _words(c) for c in message_contents(body))
    prompt = body.get("prompt", body.get("text"))
    if isinstance(prompt, list):
        if all(isinstance(x, int) for x in prompt):
            return len(prompt)
        return sum(len(x) if isinstance(x, list) else _words(x) for x in prompt)
    return _words(prompt)


def parse_sampling(body: object, chat: bool, served_model: str, strict_model: bool) -> Sampling:
    """Validate an OpenAI request body; `strict_model` makes an unknown model a 404, as vLLM does."""
    if not isinstance(body, Mapping):
        raise BadRequest("The request body must be a JSON object.")
    if chat and not isinstance(body.get("messages"), list):
        raise BadRequest("'messages' is a required property and must be a list.")
    model = body.get("model") or served_model
    if strict_model and model != served_model:
        raise BadRequest(f"The model `{model}` does not exist.", status=404, kind="NotFoundError")
    default = DEFAULT_CHAT_TOKENS if chat else DEFAULT_COMPLETION_TOKENS
    raw = body.get("max_completion_tokens", body.get("max_tokens"))
    max_tokens = default if raw is None else raw
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest(f"max_tokens must be a positive integer, got {raw!r}.")
    options = body.get("stream_options") or {}
    temperature = 1.0 if body.get("temperature") is None else body["temperature"]
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or temperature < 0:
        raise BadRequest(f"temperature must be a non-negative number, got {temperature!r}.")
    return Sampling(model=str(model), max_tokens=max_tokens, stream=bool(body.get("stream", False)),
                    include_usage=bool(isinstance(options, Mapping) and options.get("include_usage")),
                    prompt_tokens=count_prompt_tokens(body, chat), ignore_eos=bool(body.get("ignore_eos", False)),
                    temperature=float(temperature))


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def sse(payload: Mapping[str, object] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def chunk_event(base: Mapping[str, object], chat: bool, text: str, finish_reason: str | None,
                first: bool, usage_block: Mapping[str, int] | None) -> dict[str, object]:
    """One streamed chunk; chat deltas carry the role on the first chunk, as both engines send it."""
    if chat:
        delta: dict[str, object] = {"role": "assistant", "content": text} if first else {"content": text}
        choice: dict[str, object] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    event = {**base, "choices": [choice]}
    if usage_block is not None:
        event["usage"] = dict(usage_block)
    return event


def usage_event(base: Mapping[str, object], usage_block: Mapping[str, int]) -> dict[str, object]:
    """The final `stream_options.include_usage` chunk: no choices, only usage."""
    return {**base, "choices": [], "usage": dict(usage_block)}


def final_response(base: Mapping[str, object], chat: bool, text: str, finish_reason: str,
                   usage_block: Mapping[str, int]) -> dict[str, object]:
    """A non-streaming completion or chat completion."""
    message = {"role": "assistant", "content": text}
    content: dict[str, object] = {"message": message} if chat else {"text": text}
    return {**base, "object": "chat.completion" if chat else "text_completion",
            "choices": [{"index": 0, **content, "logprobs": None, "finish_reason": finish_reason}],
            "usage": dict(usage_block)}


def error_body(message: str, kind: str, status: int) -> dict[str, object]:
    """The engines' OpenAI error object."""
    return {"object": "error", "message": message, "type": kind, "param": None, "code": status}
