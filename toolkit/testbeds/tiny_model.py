"""The tiny model's builder: a byte-level BPE tokenizer trained here and a random Llama, saved to a folder.

Runs in ``.venv-cpu`` (torch + transformers), where the toolkit is installed without its dependencies:
so it imports nothing else of the toolkit. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from toolkit.errors import InvalidFlag

__all__ = ["TinyModelConfig", "STAMP_NAME", "build_tiny_model", "training_corpus", "is_cached", "read_stamp",
           "config_args"]

STAMP_NAME = "toolkit-tiny-model.json"
"""Written last by the builder: its presence with the same config is what makes a directory cached."""

BUILDER_VERSION = 1
"""Bump when the builder's output changes, so that cached models are rebuilt."""

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>")

# ChatML, so that /v1/chat/completions has a template to apply. The server collapses an LLM's
# content parts into one string before templating, so `content` is always a string here.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@dataclass(frozen=True)
class TinyModelConfig:
    """What decides the built model; equal configs give byte-identical weights (seeded)."""

    vocab_size: int = 1024
    hidden_size: int = 64
    layers: int = 2
    heads: int = 4
    seed: int = 0
    max_position_embeddings: int = 2048
    dtype: str = "float32"  # what the weights are saved in; the GPU run uses bfloat16

    def __post_init__(self) -> None:
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise InvalidFlag(f"dtype={self.dtype!r} is not float32, bfloat16 or float16.",
                              hint="pass dtype='bfloat16' for a GPU-sized model, else keep float32.")
        if self.hidden_size % self.heads:
            raise InvalidFlag(f"hidden_size={self.hidden_size} is not divisible by heads={self.heads}.",
                              hint="pick heads that divide hidden_size (e.g. hidden_size=64, heads=4).")
        if self.vocab_size < 300:
            raise InvalidFlag(f"vocab_size={self.vocab_size} is too small: a byte-level tokenizer needs the "
                              "ASCII alphabet and the special tokens before any merge.",
                              hint="use vocab_size >= 300.")


def read_stamp(model_dir: Path) -> dict[str, object] | None:
    try:
        return dict(json.loads((model_dir / STAMP_NAME).read_text()))
    except (OSError, ValueError):
        return None


def _wanted_stamp(config: TinyModelConfig) -> dict[str, object]:
    return {"builder_version": BUILDER_VERSION, "config": asdict(config)}


def is_cached(model_dir: Path, config: TinyModelConfig) -> bool:
    stamp = read_stamp(model_dir) or {}
    return all(stamp.get(key) == value for key, value in _wanted_stamp(config).items())


def config_args(config: TinyModelConfig) -> list[str]:
    return [part for key, value in asdict(config).items()
            for part in (f"--{key.replace('_', '-')}", str(value))]


_SUBJECTS = ("the server", "a scheduler", "the tokenizer", "each request", "the GPU", "our cache", "a worker")
_VERBS = ("streams", "batches", "evicts", "prefills", "decodes", "retries", "schedules", "measures")
_OBJECTS = ("tokens", "blocks", "prompts", "the queue", "long contexts", "every chunk", "the KV cache")
_TAILS = ("quickly", "at noon", "under load", "twice", "in order", "without loss", "on CPU")


def training_corpus(seed: int, *, sentences: int = 4000) -> Iterator[str]:
    """Sentences for the tokenizer: a fixed grammar plus invented words, so merges never run out.

    A few dozen words exhaust their merges long before 1024 tokens: the vocabulary would come out smaller.
    """
    rng = random.Random(seed)
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    for _ in range(sentences):
        invented = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        number = rng.randint(0, 99999)
        yield (f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
               f"{rng.choice(_TAILS)}, said {invented} at step {number}.")


def build_tiny_model(out_dir: str | os.PathLike[str], config: TinyModelConfig, *,
                     device: str = "cpu") -> Path:
    """Train a byte-level BPE tokenizer and save a random `LlamaForCausalLM` next to it (needs torch).

    An ASCII alphabet makes each streamed chunk one token (lone high bytes would be held back as incomplete
    UTF-8). No EOS, as `transformers serve` has no `ignore_eos`: every request generates `max_tokens`.
    ``device="cuda"`` initialises a 1B model in seconds (seeded per device: CPU and GPU builds differ).
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    target = Path(out_dir)
    staging = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    ascii_alphabet = sorted({byte_level.pre_tokenize_str(chr(b))[0][0] for b in range(32, 127)} | {"Ċ", "ĉ"})
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = byte_level
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=config.vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=ascii_alphabet, limit_alphabet=len(ascii_alphabet),
                                  show_progress=False)
    tokenizer.train_from_iterator(training_corpus(config.seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|endoftext|>",
                                   eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token="<unk>",
                                   chat_template=CHAT_TEMPLATE)
    fast.save_pretrained(staging)

    torch.manual_seed(config.seed)
    llama_config = LlamaConfig(vocab_size=len(fast), hidden_size=config.hidden_size,
                               intermediate_size=4 * config.hidden_size, num_hidden_layers=config.layers,
                               num_attention_heads=config.heads, num_key_value_heads=config.heads,
                               max_position_embeddings=config.max_position_embeddings,
                               bos_token_id=fast.bos_token_id, eos_token_id=None,
                               pad_token_id=fast.pad_token_id, tie_word_embeddings=False)
    with torch.device(device):
        model = LlamaForCausalLM(llama_config).eval()
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    model = model.to(dtype=dtypes[config.dtype])
    model.generation_config = GenerationConfig(do_sample=False, bos_token_id=fast.bos_token_id,
                                               pad_token_id=fast.pad_token_id, eos_token_id=None)
    model.save_pretrained(staging)
    stamp = {**_wanted_stamp(config), "vocab_actual": len(fast), "parameters": model.num_parameters()}
    (staging / STAMP_NAME).write_text(json.dumps(stamp, indent=2) + "\n")

    shutil.rmtree(target, ignore_errors=True)
    try:
        staging.rename(target)
    except OSError:  # a concurrent build of the same config won the race: keep its copy
        shutil.rmtree(staging, ignore_errors=True)
        if not is_cached(target, config):
            raise
    return target


def main(argv: list[str] | None = None) -> int:
    """`python -m toolkit.testbeds.tiny_model build DIR [--vocab-size N ...]`: build the tiny model."""
    parser = argparse.ArgumentParser(prog="python -m toolkit.testbeds.tiny_model", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="train the tokenizer and save a random tiny Llama into DIR")
    build.add_argument("out_dir")
    defaults = TinyModelConfig()
    for key, value in asdict(defaults).items():
        build.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=value)
    build.add_argument("--device", default="cpu", help="where the weights are initialised (cuda: fast for 1B)")
    args = parser.parse_args(argv)
    config = TinyModelConfig(**{key: vars(args)[key] for key in asdict(defaults)})
    path = build_tiny_model(args.out_dir, config, device=args.device)
    stamp = read_stamp(path) or {}
    print(f"built {path}: vocab {stamp.get('vocab_actual')}, {stamp.get('parameters')} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
