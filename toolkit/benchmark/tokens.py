"""Count prompt tokens as the server does, and fit random prompts to a token length.

``vllm bench serve`` counts ``--random-input-len`` in tokens of the model's tokenizer; counting
words instead made our 1,024-"token" prompts 1,100-1,500 tokens long, so TTFT did not compare.
The counter asks the server itself (``POST /tokenize``: vLLM serves it, SGLang 0.5.x serves it at
``/tokenize`` and ``/v1/tokenize``, see its ``http_server.py``), or reads a ``tokenizer.json``
that you name, locally. A server without ``/tokenize`` leaves the prompts in words, and the
workload says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import numpy as np

from toolkit.benchmark.workload import Workload, refine_prompt, with_token_prompts
from toolkit.errors import ToolkitError

__all__ = ["TokenCounter", "fit_prompts"]


@dataclass(frozen=True)
class TokenCounter:
    """Counts a text's tokens (``count``); ``unit`` says whose tokens, for the result."""

    unit: str
    count: Callable[[str], Awaitable[int]] | None  # None: no tokenizer reachable, lengths stay in words

    @classmethod
    async def open(cls, tokenizer: str, session: aiohttp.ClientSession, url: str, model: str,
                   headers: Mapping[str, str]) -> TokenCounter:
        """``tokenizer="server"``: the server's ``/tokenize`` if it answers; else a tokenizer file."""
        if tokenizer != "server":
            return cls._from_file(tokenizer)

        async def server_count(text: str) -> int:
            async with session.post(f"{url}/tokenize", json={"model": model, "prompt": text}, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=30)) as response:
                if response.status != 200:
                    raise _NoTokenizer(f"POST /tokenize answered HTTP {response.status}")
                if response.content_type == "text/html":
                    raise _NoTokenizer("POST /tokenize answered HTML (a proxy or a login page?), not JSON")
                try:
                    body = await response.json(content_type=None)
                except ValueError as exc:
                    raise _NoTokenizer(f"POST /tokenize answered something that is not JSON ({exc})") from None
            count = body.get("count") if isinstance(body, dict) else None
            if not isinstance(count, int):
                tokens = body.get("tokens") if isinstance(body, dict) else None
                if not isinstance(tokens, list):
                    raise _NoTokenizer("POST /tokenize answered without a token count")
                count = len(tokens)
            return count

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

        reader = Tokenizer.from_file(str(file))

        async def local_count(text: str) -> int:
            return len(reader.encode(text, add_special_tokens=False).ids)

        return cls(f"tokens ({file.name} in {file.parent.name or '.'})", local_count)


class _NoTokenizer(Exception):
    pass


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
            tokens = await counter.count(" ".join(words))
            step = 0
            while (nxt := refine_prompt(words, tokens, request.prompt_len, step, rng)) is not None:
                words, step = nxt, step + 1
                tokens = await counter.count(" ".join(words))
            fitted[key] = (" ".join(words), tokens)
        out.append(fitted[key])
    return with_token_prompts(workload, tuple(out), counter.unit)
