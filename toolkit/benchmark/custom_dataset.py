"""The custom dataset files of vLLM and SGLang (``--dataset-name custom --dataset-path FILE.jsonl``), pure.

Both clients reading one file is how the toolkit sends exactly the prompts ``vllm bench serve`` sends
(issue 23). vLLM 0.25.0 (vllm/benchmarks/datasets/datasets.py:2482-2610, ``CustomDataset``): one JSON
object per line with a ``"prompt"`` and, unless ``--custom-output-len``, an integer ``"output_tokens"``;
lines shuffled unless ``--disable-shuffle`` (:2529-2530), chat template applied unless
``--skip-chat-template`` (:2587-2592). The toolkit sends the lines in order, as they are: pass both
flags (:func:`vllm_dataset_args`) for the same requests.

SGLang 0.5.17 reads another shape under the same name (python/sglang/benchmark/datasets/custom.py:60-143):
a ``"conversations"`` (or ``"conversation"``) list whose first turn's ``"content"`` (or ``"value"``) is
the prompt and whose second sizes the output unless ``--sharegpt-output-len`` (other lines skipped
silently, the chat template only with ``--apply-chat-template``). It always shuffles
(python/sglang/benchmark/serving.py:1959): with as many lines as ``--num-prompts`` both clients send the
same prompts in another order. :func:`parse_custom_jsonl` reads both shapes.

>>> text = write_custom_jsonl(["hello there", "a b c"], [4, 8])
>>> parse_custom_jsonl(text)
[('hello there', 4), ('a b c', 8)]
"""

from __future__ import annotations

import json
from collections.abc import Sequence

__all__ = ["parse_custom_jsonl", "write_custom_jsonl", "vllm_dataset_args", "write_sglang_custom_jsonl",
           "sglang_dataset_args"]


def parse_custom_jsonl(text: str, *, source: str = "the custom dataset") -> list[tuple[str, int | None]]:
    """``(prompt, output_tokens or None)`` per non-blank line (``None``: SGLang's shape, the caller's
    ``output_len`` sizes it); a bad line raises ``ValueError`` naming it."""
    rows: list[tuple[str, int | None]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{source} line {number} is not JSON ({exc.msg}): vLLM's custom format is one "
                             '{"prompt": ..., "output_tokens": N} object per line') from None
        if (sglang_prompt := _sglang_prompt(item)) is not None:
            rows.append((sglang_prompt, None))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
            raise ValueError(f'{source} line {number} has no "prompt" string (vLLM) and no "conversations" list of '
                             "two turns (SGLang): each line needs one")
        tokens = item.get("output_tokens")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
            raise ValueError(f'{source} line {number}: "output_tokens" must be a positive integer, got {tokens!r}')
        rows.append((item["prompt"], tokens))
    if not rows:
        raise ValueError(f"{source} holds no prompts (one JSON object per line)")
    return rows


def write_custom_jsonl(prompts: Sequence[str], output_tokens: Sequence[int]) -> str:
    """The file's text: one ``{"prompt": ..., "output_tokens": N}`` per line, in order."""
    if len(prompts) != len(output_tokens):
        raise ValueError(f"{len(prompts)} prompts but {len(output_tokens)} output lengths")
    return "".join(json.dumps({"prompt": p, "output_tokens": int(n)}, ensure_ascii=False) + "\n"
                   for p, n in zip(prompts, output_tokens, strict=True))


def vllm_dataset_args(path: str, output_len: int | None) -> list[str]:
    """``vllm bench serve`` arguments that send the file's prompts as :func:`parse_custom_jsonl` reads them."""
    args = ["--dataset-name", "custom", "--dataset-path", path, "--disable-shuffle", "--skip-chat-template"]
    return args + (["--custom-output-len", str(int(output_len))] if output_len is not None else [])


def _sglang_prompt(item: object) -> str | None:
    """The first turn's text of an SGLang custom line (custom.py:84-90), or None when the line is not one."""
    if not isinstance(item, dict):
        return None
    turns = item.get("conversations", item.get("conversation"))
    if not isinstance(turns, list) or len(turns) < 2 or not isinstance(turns[0], dict):
        return None
    text = turns[0].get("content", turns[0].get("value"))
    return text if isinstance(text, str) else None


def write_sglang_custom_jsonl(prompts: Sequence[str]) -> str:
    """SGLang's custom file: a two-turn ``"conversations"`` line per prompt (a placeholder answer)."""
    return "".join(json.dumps({"conversations": [{"role": "user", "content": p},
                                                 {"role": "assistant", "content": "ok"}]}, ensure_ascii=False) + "\n"
                   for p in prompts)


def sglang_dataset_args(path: str, output_len: int) -> list[str]:
    """``sglang.bench_serving`` arguments that read the file's prompts with a fixed output length and no chat
    template (``--apply-chat-template`` is off by default, serving.py:2453); the order is SGLang's shuffle."""
    return ["--dataset-name", "custom", "--dataset-path", path, "--sharegpt-output-len", str(int(output_len))]
