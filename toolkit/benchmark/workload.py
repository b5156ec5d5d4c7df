"""What a benchmark sends and when, as pure functions of a seed: prompts, lengths, arrivals.

``input_len`` is in **tokens**, as ``vllm bench serve`` counts it: random words are fitted a few at a
time (:func:`refine_prompt`) until the runner's tokenizer agrees; without one the prompt keeps
``input_len`` **words** and ``input_len_unit`` says so. ``output_len`` is exact (``max_tokens``).

**range_ratio follows vLLM, not SGLang.** Ours: lengths uniform over ``[floor(N*(1-r)), ceil(N*(1+r))]``,
so ``0`` is fixed. SGLang's draws from ``[max(int(N*r), 1), N]`` and defaults to ``0``: uniform in
``[1, N]`` (mean about N/2); its ``1.0`` is fixed.

Arrivals follow vLLM's ``get_request``: gamma gaps (``shape=burstiness``, ``scale=1/(rate*burstiness)``;
1 is Poisson), summed, rescaled so the last request goes at exactly ``num_prompts / request_rate`` s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from toolkit.benchmark.custom_dataset import parse_custom_jsonl

__all__ = ["RequestSpec", "Workload", "make_workload", "sample_lengths", "arrival_offsets", "warmup_requests",
           "parse_prompt_lines", "parse_sharegpt", "refine_prompt", "with_token_prompts"]

# A fixed, boring vocabulary: common words that tokenize to one token in most vocabularies.
_WORDS_TEXT = """the of and to in is was that for on with as by at from his her they this which
    be or an had not are but were their have one all there been has when who will more
    no if out so said what up its about into than them can only other new some could time
    these two may then do first any my now such like our over man me even most made after
    also did many before must through back years where much your way well down should
    because each just those people how too little state good very make world still own see
    men work long get here between both life being under never day same another know while
    last might us great old year off come since against go came right used take three
    house water light small large river city music story garden table window paper market
    green blue red yellow north south east west morning evening winter summer road bridge
    """
_WORDS = tuple(_WORDS_TEXT.split())


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request: the prompt text, its length (in the workload's ``input_len_unit``), and ``max_tokens``."""

    prompt: str
    prompt_len: int
    output_len: int


@dataclass(frozen=True)
class Workload:
    """The exact requests of a run, reproducible from its fields and seed."""

    kind: Literal["random", "lines", "sharegpt", "custom"]
    num_prompts: int
    input_len: int | None
    output_len: int | None
    range_ratio: float
    seed: int
    dataset: str | None
    requests: tuple[RequestSpec, ...] = field(repr=False)
    notes: tuple[str, ...] = ()
    #: how prompt lengths were counted: "tokens (server /tokenize)", "tokens (TOKENIZER FILE)" or "words"
    input_len_unit: str = "words"

    @property
    def prompts_sha256(self) -> str:
        return hashlib.sha256(b"".join(r.prompt.encode() + b"\0" for r in self.requests)).hexdigest()

    def to_dict(self, *, prompts: bool = False) -> dict[str, Any]:
        """JSON-safe; prompt texts only when asked (a ShareGPT run can hold megabytes)."""
        out: dict[str, Any] = {k: v for k, v in vars(self).items() if k not in ("requests", "notes")}
        out.update(notes=list(self.notes), prompt_lens=[r.prompt_len for r in self.requests],
                   output_lens=[r.output_len for r in self.requests], prompts_sha256=self.prompts_sha256)
        if prompts:
            out["prompts"] = [r.prompt for r in self.requests]
        return out


def _rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([seed, stream])


def sample_lengths(n: int, length: int, range_ratio: float, rng: np.random.Generator) -> list[int]:
    """vLLM's ``get_sampling_params``: uniform integers in [floor(L(1-r)), ceil(L(1+r))], >= 1."""
    if not 0.0 <= range_ratio < 1.0:
        raise ValueError(f"range_ratio must be in [0, 1) (vLLM's convention), got {range_ratio}")
    if length < 1:
        raise ValueError(f"a length must be at least 1, got {length}")
    low = max(math.floor(length * (1 - range_ratio)), 1)
    high = max(math.ceil(length * (1 + range_ratio)), 1)
    return [int(x) for x in rng.integers(low, high + 1, size=n)]


def _random_prompt(words: int, rng: np.random.Generator) -> str:
    idx = rng.integers(0, len(_WORDS), size=words)
    return " ".join(_WORDS[i] for i in idx)


def parse_prompt_lines(text: str) -> list[str]:
    """A prompt file: one prompt per non-blank line."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def parse_sharegpt(data: Any) -> list[tuple[str, str]]:
    """(prompt, reference completion) from ShareGPT JSON: the first two turns of each item.

    Accepts ``conversations: [{from, value}]`` (ShareGPT) and ``messages: [{role, content}]``.
    """
    if not isinstance(data, list):
        raise ValueError("a ShareGPT dataset is a JSON list of {'conversations': [...]} items")
    pairs: list[tuple[str, str]] = []
    for item in data:
        turns = (item.get("conversations") or item.get("messages")) if isinstance(item, dict) else None
        if not isinstance(turns, list) or len(turns) < 2:
            continue
        first, second = [t.get("value", t.get("content")) if isinstance(t, dict) else None for t in turns[:2]]
        if isinstance(first, str) and isinstance(second, str) and first.strip() and second.strip():
            pairs.append((first, second))
    return pairs


def _pick(n: int, available: int, rng: np.random.Generator) -> tuple[list[int], bool]:
    """n indices without replacement when possible, else every item then repeats."""
    if n <= available:
        return [int(i) for i in rng.permutation(available)[:n]], False
    reps = -(-n // available)
    order = np.concatenate([rng.permutation(available) for _ in range(reps)])
    return [int(i) for i in order[:n]], True


def make_workload(*, num_prompts: int, input_len: int | None = 1024, output_len: int | None = 128,
                  range_ratio: float = 0.0, dataset: str | None = None, dataset_text: str | None = None,
                  seed: int = 0) -> Workload:
    """Build the requests: random words, or a prompt file / ShareGPT JSON / vLLM custom ``.jsonl`` at ``dataset``.

    ``dataset_text``: the file's content, already in memory. With ShareGPT and ``output_len=None`` each
    request asks for as many tokens as its reference answer has words.
    """
    if num_prompts < 1:
        raise ValueError(f"num_prompts must be at least 1, got {num_prompts}")
    if dataset is None and dataset_text is None:
        if input_len is None or output_len is None:
            raise ValueError("random prompts need both input_len and output_len")
        ins = sample_lengths(num_prompts, input_len, range_ratio, _rng(seed, 1))
        outs = sample_lengths(num_prompts, output_len, range_ratio, _rng(seed, 2))
        prng = _rng(seed, 3)
        reqs = tuple(RequestSpec(_random_prompt(i, prng), i, o) for i, o in zip(ins, outs, strict=True))
        return Workload("random", num_prompts, input_len, output_len, range_ratio, seed, None, reqs,
                        ("input_len counted in words (no tokenizer)",))
    if dataset_text is None:
        assert dataset is not None
        with open(dataset, encoding="utf-8") as f:
            dataset_text = f.read()
    is_json = (dataset or "").endswith(".json") or dataset_text.lstrip().startswith("[")
    prng = _rng(seed, 4)
    if (dataset or "").endswith(".jsonl"):  # vLLM's custom dataset: the lines in order (benchmark/custom_dataset.py)
        rows = parse_custom_jsonl(dataset_text, source=dataset or "the custom dataset")
        if len(rows) < num_prompts:
            raise ValueError(f"{dataset} holds {len(rows)} prompts, fewer than num_prompts={num_prompts}: "
                             "write more lines or ask for fewer prompts")
        if output_len is None and any(n is None for _, n in rows[:num_prompts]):
            raise ValueError(f'{dataset}: a line without "output_tokens" needs output_len (vLLM: --custom-output-len)')
        reqs = tuple(RequestSpec(p, len(p.split()), int(output_len or n or 1)) for p, n in rows[:num_prompts])
        return Workload("custom", num_prompts, None, output_len, 0.0, seed, dataset, reqs,
                        ("vLLM custom dataset, lines in file order; prompt_len counted in words (no tokenizer)",))
    if is_json:
        pairs = parse_sharegpt(json.loads(dataset_text))
        if not pairs:
            raise ValueError(f"no usable conversations in {dataset or 'the ShareGPT data'} "
                             "(each item needs two non-empty turns)")
        prompts = [prompt for prompt, _ in pairs]
        picks, repeated = _pick(num_prompts, len(pairs), prng)
        output_lens = [max(len(pairs[i][1].split()), 1) for i in picks]  # the answers' words
        kind: Literal["lines", "sharegpt"] = "sharegpt"
    else:
        prompts = parse_prompt_lines(dataset_text)
        if not prompts:
            raise ValueError(f"no prompts in {dataset or 'the prompt text'} (one prompt per line)")
        if output_len is None:
            raise ValueError("a prompt file has no answers to size outputs from: pass output_len")
        picks, repeated = _pick(num_prompts, len(prompts), prng)
        output_lens = []
        kind = "lines"
    if output_len is not None:
        output_lens = sample_lengths(num_prompts, output_len, range_ratio, _rng(seed, 2))
    reqs = tuple(RequestSpec(prompts[i], len(prompts[i].split()), n)
                 for i, n in zip(picks, output_lens, strict=True))
    notes = [f"dataset has fewer prompts than num_prompts={num_prompts}: prompts repeat"] if repeated else []
    return Workload(kind, num_prompts, None, output_len, range_ratio, seed, dataset, reqs,
                    (*notes, "prompt_len counted in words (no tokenizer)"))


_MAX_REFINE_STEPS = 12


def refine_prompt(words: list[str], tokens: int, target: int, step: int, rng: np.random.Generator) -> list[str] | None:
    """One step towards a prompt of ``target`` tokens, or None when ``words`` is close enough.

    The caller counts ``" ".join(words)`` and calls again; after ``_MAX_REFINE_STEPS`` steps a prompt
    within one token is accepted (a long word can make the exact count unreachable).
    """
    if tokens == target or (step >= _MAX_REFINE_STEPS and abs(tokens - target) <= 1) or step >= 2 * _MAX_REFINE_STEPS:
        return None
    per_word = tokens / max(len(words), 1) or 1.0
    # At most 8 words per missing token: a counter that says 1 for any text once asked for a billion.
    change = max(1, min(math.floor(abs(target - tokens) / per_word), 8 * abs(target - tokens)))
    if tokens > target:
        return words[: max(1, len(words) - change)]
    idx = rng.integers(0, len(_WORDS), size=change)
    return words + [_WORDS[i] for i in idx]


def with_token_prompts(workload: Workload, prompts: tuple[tuple[str, int], ...], unit: str) -> Workload:
    """The same workload with each prompt replaced by ``(text, tokens)`` fitted to the token target."""
    if len(prompts) != len(workload.requests):
        raise ValueError(f"{len(prompts)} fitted prompts for {len(workload.requests)} requests")
    requests = tuple(RequestSpec(text, tokens, r.output_len) for (text, tokens), r in zip(prompts, workload.requests,
                                                                                            strict=True))
    notes = tuple(n for n in workload.notes if "counted in words" not in n) + (f"input_len counted in {unit}",)
    return dataclasses.replace(workload, requests=requests, notes=notes, input_len_unit=unit)


def warmup_requests(workload: Workload, n: int, *, output_len_cap: int = 32) -> tuple[RequestSpec, ...]:
    """``n`` warm-up requests with fresh random prompts (they prime no prefix cache the measured ones
    would hit); outputs capped at ``output_len_cap`` tokens."""
    if n <= 0 or not workload.requests:
        return ()
    rng = _rng(workload.seed, 5)
    base = [workload.requests[i % len(workload.requests)] for i in range(n)]
    return tuple(RequestSpec(_random_prompt(max(r.prompt_len, 1), rng), r.prompt_len,
                             max(1, min(r.output_len, output_len_cap))) for r in base)


def arrival_offsets(n: int, request_rate: float, burstiness: float = 1.0, seed: int = 0) -> tuple[float, ...]:
    """Send time of each request in seconds from the start (vLLM's schedule, seeded)."""
    if not burstiness > 0:
        raise ValueError(f"burstiness must be positive (vLLM's gamma shape), got {burstiness}")
    if not request_rate > 0:
        raise ValueError(f"request_rate must be positive requests/s (inf = all at once), got {request_rate}")
    if math.isinf(request_rate):
        return (0.0,) * n
    if math.isinf(burstiness):
        gaps = np.full(n, 1.0 / request_rate)
    else:
        gaps = _rng(seed, 6).gamma(shape=burstiness, scale=1.0 / (request_rate * burstiness), size=n)
    t = np.cumsum(gaps)
    if n and t[-1] > 0:
        t = t * ((n / request_rate) / t[-1])
    return tuple(float(x) for x in t)
