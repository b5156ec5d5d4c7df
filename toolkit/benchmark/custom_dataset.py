"""vLLM's custom dataset file (``--dataset-name custom --dataset-path FILE.jsonl``), read and written, pure.

Both clients reading one file is how the toolkit sends exactly the prompts ``vllm bench serve``
sends (issue 23). The format, as vLLM 0.25.0 reads it (vllm/benchmarks/datasets/datasets.py:2482-2610,
``CustomDataset``): one JSON object per line with a ``"prompt"`` and, unless ``--custom-output-len``
is given, an integer ``"output_tokens"``. vLLM then shuffles the lines with ``random.seed(seed)``
unless ``--disable-shuffle`` (:2529-2530), applies the model's chat template to each prompt unless
``--skip-chat-template`` (:2587-2592), and takes the first ``--num-prompts``. The toolkit reads the
lines in file order and sends each prompt as it is: pass ``--disable-shuffle --skip-chat-template``
to ``vllm bench serve`` (:func:`vllm_dataset_args`) for the same requests.

>>> text = write_custom_jsonl(["hello there", "a b c"], [4, 8])
>>> parse_custom_jsonl(text)
[('hello there', 4), ('a b c', 8)]
"""

from __future__ import annotations

import json
from collections.abc import Sequence

__all__ = ["parse_custom_jsonl", "write_custom_jsonl", "vllm_dataset_args"]


def parse_custom_jsonl(text: str, *, source: str = "the custom dataset") -> list[tuple[str, int | None]]:
    """``(prompt, output_tokens or None)`` per non-blank line; a bad line raises ``ValueError`` naming it."""
    rows: list[tuple[str, int | None]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{source} line {number} is not JSON ({exc.msg}): vLLM's custom format is one "
                             '{"prompt": ..., "output_tokens": N} object per line') from None
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
            raise ValueError(f'{source} line {number} has no "prompt" string: each line needs one')
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
