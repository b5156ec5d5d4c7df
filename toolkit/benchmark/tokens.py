"""Count prompt tokens as the server does, and fit random prompts to a token length.

``vllm bench serve`` counts ``--random-input-len`` in tokens; our 1,024 words were 1,100-1,500 tokens,
so TTFT did not compare. The counter asks the server (``POST /tokenize``: vLLM, and SGLang 0.5.x's
``http_server.py``) or reads a named ``tokenizer.json``; without either the prompts stay in words, and
the workload says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from toolkit.benchmark.side_reads import TOKENIZE_MAX_BYTES, read_json_capped
from toolkit.benchmark.workload import Workload, refine_prompt, with_token_prompts
from toolkit.errors import MalformedResponse, ToolkitError

__all__ = ["TokenCounter", "checked_count", "fit_prompts"]


@dataclass(frozen=True)
class TokenCounter:
    """Counts a text's tokens (``count``); ``unit`` says whose tokens, for the result."""

    unit: str
    count: Callable[[str], Awaitable[int]] | None  # None: no tokenizer reachable, lengths stay in words

    @classmethod
    async def open(cls, tokenizer: str, session: aiohttp.ClientSession, url: str, model: str,
                   headers: Mapping[str, str], timeout_s: float = 30.0) -> TokenCounter:
        """``tokenizer="server"``: the server's ``/tokenize`` if it answers (each within ``timeout_s`` and
        ``TOKENIZE_MAX_BYTES``); else a tokenizer file."""
        if tokenizer != "server":
            return cls._from_file(tokenizer)

        async def server_count(text: str) -> int:
            async with session.post(f"{url}/tokenize", json={"model": model, "prompt": text}, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
                if response.status != 200:
                    raise _NoTokenizer(f"POST /tokenize answered HTTP {response.status}")
                if response.content_type == "text/html":
                    raise _NoTokenizer("POST /tokenize answered HTML (a proxy or a login page?), not JSON")
                try:
                    body = await read_json_capped(response, TOKENIZE_MAX_BYTES, "POST /tokenize")
                except ValueError as exc:
                    raise _NoTokenizer(f"POST /tokenize answered something that is not JSON ({exc})") from None
            return checked_count(body, text)

        try:
            await server_count("hello")
        except (_NoTokenizer, aiohttp.ClientError, TimeoutError) as exc:
            return cls(f"words (the server has no usable /tokenize: {exc})", None)
        return cls("tokens (the server's /tokenize)", server_count)

    @classmethod
    def _from_file(cls, path: str) -> TokenCounter:
        file = Path(path)
        if file.is_dir():
            file = file / "tokenizer.json"
        if not file.is_file():
            raise ToolkitError(f"no tokenizer file at {file}", hint="pass tokenizer='server', None, or the path of a "
                               "tokenizer.json (a Hugging Face model folder has one)")
        from tokenizers import Tokenizer  # the optional third-party reader, loaded only when a file is named

        try:  # the reader raises a bare Exception for a file that is not a tokenizer (issue 25: a binary file)
            reader = Tokenizer.from_file(str(file))
        except Exception as exc:  # noqa: BLE001 - tokenizers' only error type
            raise ToolkitError(f"{file} is not a tokenizer.json the tokenizers library can read ({exc})",
                               hint="pass the tokenizer.json of a Hugging Face model folder, tokenizer='server' "
                                    "or None (--tokenizer words)") from None

        async def local_count(text: str) -> int:
            return len(reader.encode(text, add_special_tokens=False).ids)

        return cls(f"tokens ({file.name} in {file.parent.name or '.'})", local_count)


class _NoTokenizer(Exception):
    pass


#: The fewest tokens a believable count gives: one per this many words (SuperBPE reaches about two).
_WORDS_PER_TOKEN_MAX = 8
_SPECIAL_TOKENS_MAX = 16


def checked_count(body: Any, text: str) -> int:
    """The token count in a ``/tokenize`` answer, checked against the text it counts.

    Issue 25: ``{"count": 1}`` for a 1,000-word prompt made the fitting ask for a billion words (8 GiB),
    and a batch-shaped ``{"tokens": [[...]]}`` counted as 1.

    >>> checked_count({"count": 2, "tokens": [9, 8]}, "hi there")
    2
    """
    count = body.get("count") if isinstance(body, dict) else None
    if count is None or isinstance(count, bool) or not isinstance(count, int):
        tokens = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(tokens, list):
            raise _NoTokenizer("POST /tokenize answered without a token count")
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise MalformedResponse("POST /tokenize answered tokens that are not a flat list of integer ids "
                                    f"(starting {str(tokens)[:80]!r}), so they cannot be counted",
                                    hint="pass tokenizer=<a tokenizer.json path> (--tokenizer PATH) or None")
        count = len(tokens)
    words, most = len(text.split()), len(text.encode()) + _SPECIAL_TOKENS_MAX
    if not words / _WORDS_PER_TOKEN_MAX <= count <= most:
        raise MalformedResponse(
            f"POST /tokenize counted {count:,} tokens in a text of {words:,} words and {len(text.encode()):,} bytes: "
            f"a count outside [{words / _WORDS_PER_TOKEN_MAX:,.0f}, {most:,}] cannot be true, so the prompts were "
            "not fitted to it",
            hint="pass tokenizer=<a tokenizer.json path> (--tokenizer PATH) or None (--tokenizer words)")
    return count


async def fit_prompts(workload: Workload, counter: TokenCounter, seed: int) -> Workload:
    """Each random prompt refitted to exactly its target length in the counter's tokens."""
    if counter.count is None:
        return with_token_prompts(workload, tuple((r.prompt, r.prompt_len) for r in workload.requests),
                                  counter.unit)
    rng = np.random.default_rng([seed, 7])
    fitted: dict[tuple[str, int], tuple[str, int]] = {}
    out = []
    for request in workload.requests:
        key = (request.prompt, request.prompt_len)
        if key not in fitted:
            words = request.prompt.split()
            try:
                tokens = await counter.count(" ".join(words))
                step = 0
                while (nxt := refine_prompt(words, tokens, request.prompt_len, step, rng)) is not None:
                    words, step = nxt, step + 1
                    tokens = await counter.count(" ".join(words))
            except _NoTokenizer as exc:  # it answered the probe, then stopped answering counts
                raise MalformedResponse(f"{exc} while the prompts were fitted to token lengths",
                                        hint="pass tokenizer=<a tokenizer.json path> or None") from None
            fitted[key] = (" ".join(words), tokens)
        out.append(fitted[key])
    return with_token_prompts(workload, tuple(out), counter.unit)
