"""A real inference server on CPU: `transformers serve` with a tiny random Llama built here.

The simulator proves the toolkit's logic; this proves it against a real engine (uvicorn, a
real tokenizer, paged-attention continuous batching) on a machine with no GPU and no Hub
access. Nothing is downloaded: the tokenizer is trained here on generated sentences and
the weights are random, so output is gibberish by design and only its timing means anything.

Two halves, because they run in two virtual environments:

* the toolkit side (stdlib only, the main venv): :func:`ensure_tiny_model`,
  :func:`transformers_serve_argv`, :func:`serve_env` and :data:`SERVE_FLAGS`;
* the builder (torch + transformers, ``.venv-cpu``): :func:`build_tiny_model`, run as
  ``.venv-cpu/bin/python -m toolkit.testbeds.realserver build DIR`` (the Makefile installs the
  toolkit there without its dependencies).

Example::

    model_dir = ensure_tiny_model("out/tiny-llama")
    argv = transformers_serve_argv(model_dir, port=8011, launcher=(".venv-cpu/bin/transformers", "serve"))
    subprocess.Popen(argv, env=serve_env())
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from toolkit.errors import CommandFailed, CommandNotFound, InvalidFlag, ToolkitError
from toolkit.server.spec import ServerSpec

__all__ = [
    "CPU_VENV_PYTHON",
    "OTHER_SERVE_OPTIONS",
    "SERVE_FLAGS",
    "ServeFlag",
    "TinyModelConfig",
    "build_tiny_model",
    "ensure_tiny_model",
    "serve_env",
    "tiny_server_spec",
    "transformers_serve_argv",
]

CPU_VENV_PYTHON = ".venv-cpu/bin/python"
"""Where `make .venv-cpu/.installed` puts the interpreter that has torch and transformers."""

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

    def __post_init__(self) -> None:
        if self.hidden_size % self.heads:
            raise InvalidFlag(
                f"hidden_size={self.hidden_size} is not divisible by heads={self.heads}.",
                hint="pick heads that divide hidden_size (e.g. hidden_size=64, heads=4).",
            )
        if self.vocab_size < 300:
            raise InvalidFlag(
                f"vocab_size={self.vocab_size} is too small: a byte-level tokenizer needs the ASCII "
                "alphabet and the special tokens before any merge.",
                hint="use vocab_size >= 300.",
            )


# --------------------------------------------------------------------------- server flags (pure)


@dataclass(frozen=True)
class ServeFlag:
    """One `transformers serve` option worth sweeping, spelled as the engine spells it."""

    name: str
    kind: Literal["switch", "value"]  # switch: `--x` / `--no-x`; value: `--x VALUE`
    values: tuple[str, ...]  # values that make sense on a CPU; () for free-form
    why: str


SERVE_FLAGS: tuple[ServeFlag, ...] = (
    ServeFlag(
        "--continuous-batching", "switch", (), "paged-attention scheduler; off = one request at a time"
    ),
    ServeFlag("--attn-implementation", "value", ("sdpa", "eager"), "flash_attention_* need CUDA"),
    ServeFlag("--dtype", "value", ("auto", "float32", "bfloat16"), "auto = the checkpoint's (float32 here)"),
    ServeFlag("--device", "value", ("cpu", "auto"), "auto picks cpu on a machine without GPU"),
    ServeFlag("--compile", "switch", (), "torch.compile; long warm-up on CPU"),
    ServeFlag("--cb-num-blocks", "value", (), "caps the KV cache; uncapped, CB zero-fills 60% of host RAM"),
    ServeFlag("--cb-max-batch-tokens", "value", (), "tokens per scheduled step; default 8192"),
    ServeFlag("--cb-block-size", "value", (), "KV tokens per page (5.17 deprecated it for page_size)"),
    ServeFlag("--cb-max-memory-percent", "value", (), "fraction of free memory for the KV cache"),
    ServeFlag("--default-seed", "value", (), "torch seed at start-up"),
    ServeFlag(
        "--log-level", "value", ("warning", "info"), "info adds config dumps; uvicorn logs at info anyway"
    ),
)
"""The options of `transformers serve` (5.24) worth sweeping; a test checks each is in `--help`."""

OTHER_SERVE_OPTIONS = (
    "--enable-cors",
    "--model-timeout",
    "--quantization",
    "--reasoning",
    "--chat-template-kwargs",
    "--decision-config",
    "--trust-remote-code",
    "--cb-use-cuda-graph",
)
"""The rest of its options, accepted in `extra_flags` (`--host`/`--port` have their own arguments)."""

# Options that transformers_serve_argv renders from its own keyword arguments: passing them again
# in extra_flags would render them twice (typer keeps the last), or turn CB on without its caps.
_KEYWORD_OPTIONS = {
    "--host": "host",
    "--port": "port",
    "--device": "device",
    "--dtype": "dtype",
    "--attn-implementation": "attn_implementation",
    "--log-level": "log_level",
    "--continuous-batching": "continuous_batching",
    "--cb-num-blocks": "cb_num_blocks",
    "--cb-max-batch-tokens": "cb_max_batch_tokens",
}


def transformers_serve_argv(
    model_dir: str | os.PathLike[str],
    *,
    port: int,
    host: str = "127.0.0.1",
    continuous_batching: bool = False,
    cb_num_blocks: int | None = 64,
    cb_max_batch_tokens: int | None = 512,
    device: str = "cpu",
    dtype: str | None = None,
    attn_implementation: str | None = None,
    log_level: str = "warning",
    launcher: Sequence[str] = ("transformers", "serve"),
    extra_flags: Mapping[str, str | None] | None = None,
) -> list[str]:
    """The command line that serves `model_dir` and nothing else.

    The model is the positional FORCE_MODEL: it is loaded before uvicorn binds the port (so
    an open port means a loaded model), it is never unloaded on idle, and `/v1/models` lists
    it alone under exactly this string, which requests must send as `model` or leave out.
    Pass an absolute path: a missing one fails as "Repo id must be in the form ...".
    The `--cb-*` caps are rendered only with `continuous_batching=True`; their defaults keep
    the KV cache at 64 pages (16 MiB for the default tiny model), because uncapped CB on
    CPU zero-fills 60% of the host's RAM, whatever else is running there.

    >>> transformers_serve_argv("/m", port=8011)
    ['transformers', 'serve', '/m', '--host', '127.0.0.1', '--port', '8011', '--device', 'cpu', \
'--log-level', 'warning']
    """
    argv = [*launcher, os.fspath(model_dir), "--host", host, "--port", str(int(port)), "--device", device]
    if dtype is not None:
        argv += ["--dtype", dtype]
    if attn_implementation is not None:
        argv += ["--attn-implementation", attn_implementation]
    argv += ["--log-level", log_level]
    if continuous_batching:  # off is the engine's default: rendering nothing keeps `with_flags` composable
        argv.append("--continuous-batching")
        if cb_num_blocks is not None:
            argv += ["--cb-num-blocks", str(int(cb_num_blocks))]
        if cb_max_batch_tokens is not None:
            argv += ["--cb-max-batch-tokens", str(int(cb_max_batch_tokens))]
    known = {flag.name for flag in SERVE_FLAGS} | set(OTHER_SERVE_OPTIONS)
    for name, value in (extra_flags or {}).items():
        bare = "--" + name[len("--no-") :] if name.startswith("--no-") else name
        if bare in _KEYWORD_OPTIONS:
            raise InvalidFlag(
                f"{name!r} has its own argument in transformers_serve_argv.",
                hint=f"pass {_KEYWORD_OPTIONS[bare]}=... instead of extra_flags[{name!r}].",
            )
        if bare not in known:
            raise InvalidFlag(
                f"{name!r} is not a `transformers serve` option this toolkit knows.",
                hint="use one of: " + ", ".join(sorted(known - _KEYWORD_OPTIONS.keys())),
            )
        argv += [name] if value is None else [name, value]
    return argv


def serve_env(base: Mapping[str, str] | None = None, *, omp_num_threads: int | None = None) -> dict[str, str]:
    """The environment `transformers serve` needs here: offline, unbuffered, bounded threads.

    The Hub is unreachable, so both offline switches are set: a wrong model path then fails
    at once instead of after download retries. `omp_num_threads`
    matters on shared machines, where torch would otherwise spin one thread per core.
    """
    env = dict(os.environ if base is None else base)
    env.update(
        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false"
    )
    if omp_num_threads is not None:
        env["OMP_NUM_THREADS"] = str(int(omp_num_threads))
    return env


def tiny_server_spec(
    model_dir: str | os.PathLike[str],
    *,
    port: int,
    python: str = CPU_VENV_PYTHON,
    host: str = "127.0.0.1",
    continuous_batching: bool = False,
    cb_num_blocks: int = 64,
    cb_max_batch_tokens: int = 512,
    omp_num_threads: int = 1,
) -> ServerSpec:
    """A launchable :class:`ServerSpec` for `transformers serve` of the tiny model, offline.

    With ``continuous_batching`` the KV cache is capped (see :func:`transformers_serve_argv`),
    so the flag sweeps something real without zero-filling most of the host's memory.

    A relative ``python`` (the default, ``.venv-cpu/bin/python``) is made absolute here,
    because the server starts in the host's home directory, not in this one.

    >>> tiny_server_spec("/m", port=8011, python="/venv/bin/python").argv()[:4]
    ['/venv/bin/transformers', 'serve', '/m', '--port']
    """
    python = python if os.path.isabs(python) else os.path.abspath(python)
    spec = ServerSpec.transformers(model=os.path.abspath(os.fspath(model_dir)), port=port, host=host, python=python)
    spec = spec.with_flags({"--device": "cpu", "--log-level": "warning"})
    if continuous_batching:
        spec = spec.with_flags({"--continuous-batching": True, "--cb-num-blocks": cb_num_blocks,
                                "--cb-max-batch-tokens": cb_max_batch_tokens})
    env = {k: v for k, v in serve_env({}, omp_num_threads=omp_num_threads).items()}
    return spec.with_env(env)


# --------------------------------------------------------------------------- toolkit side (subprocess)


def _read_stamp(model_dir: Path) -> dict[str, object] | None:
    try:
        return dict(json.loads((model_dir / STAMP_NAME).read_text()))
    except (OSError, ValueError):
        return None


def _wanted_stamp(config: TinyModelConfig) -> dict[str, object]:
    return {"builder_version": BUILDER_VERSION, "config": asdict(config)}


def _is_cached(model_dir: Path, config: TinyModelConfig) -> bool:
    stamp = _read_stamp(model_dir)
    wanted = _wanted_stamp(config)
    return stamp is not None and all(stamp.get(key) == value for key, value in wanted.items())


def ensure_tiny_model(
    out_dir: str | os.PathLike[str],
    *,
    python: str | os.PathLike[str] = CPU_VENV_PYTHON,
    config: TinyModelConfig | None = None,
    timeout_s: float = 600.0,
) -> Path:
    """Build the tiny model into `out_dir` unless the same build is already there.

    Runs the builder in `python` (the interpreter with torch), since the main venv has none.
    The stamp file is written last, so a build that died half-way is rebuilt, never served.
    A directory that holds something else is left alone with an error.

    >>> ensure_tiny_model("out/tiny-llama")  # doctest: +SKIP
    PosixPath('out/tiny-llama')
    """
    config = config or TinyModelConfig()
    target = Path(out_dir)
    if _is_cached(target, config):
        return target
    if target.exists() and any(target.iterdir()) and _read_stamp(target) is None:
        raise ToolkitError(
            f"{target} exists and is not a tiny model built by the toolkit (no {STAMP_NAME}).",
            hint="pass an empty or new directory, or delete this one.",
        )
    interpreter = Path(python)
    if not interpreter.exists():
        raise CommandNotFound(
            f"{interpreter.absolute()} does not exist, so the tiny model cannot be built (it needs torch).",
            host="localhost",
            command=str(interpreter),
            exit_code=127,
            hint="run `make .venv-cpu/.installed`, or pass python= the interpreter that has transformers.",
        )
    command = [str(interpreter), "-m", "toolkit.testbeds.realserver", "build", str(target), *_config_args(config)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    if result.returncode != 0 or not _is_cached(target, config):
        raise CommandFailed(
            f"building the tiny model into {target} failed (exit {result.returncode}).",
            host="localhost",
            command=" ".join(command),
            exit_code=result.returncode,
            stderr=result.stderr,
            hint=(
                "read the evidence. \"No module named 'toolkit'\" means the venv predates the toolkit's "
                "install there: `rm .venv-cpu/.installed && make .venv-cpu/.installed`."
            ),
        )
    return target


def _config_args(config: TinyModelConfig) -> list[str]:
    return [
        part for key, value in asdict(config).items() for part in (f"--{key.replace('_', '-')}", str(value))
    ]


# --------------------------------------------------------------------------- builder (.venv-cpu)

_SUBJECTS = ("the server", "a scheduler", "the tokenizer", "each request", "the GPU", "our cache", "a worker")
_VERBS = ("streams", "batches", "evicts", "prefills", "decodes", "retries", "schedules", "measures")
_OBJECTS = ("tokens", "blocks", "prompts", "the queue", "long contexts", "every chunk", "the KV cache")
_TAILS = ("quickly", "at noon", "under load", "twice", "in order", "without loss", "on CPU")


def training_corpus(seed: int, *, sentences: int = 4000) -> Iterator[str]:
    """Sentences for the tokenizer: a fixed grammar plus invented words, so merges never run out.

    Invented words matter: a corpus of a few dozen words exhausts its merges long before a
    1024-token vocabulary, and the trained vocabulary would silently come out smaller.
    """
    rng = random.Random(seed)
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    for _ in range(sentences):
        invented = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        number = rng.randint(0, 99999)
        yield (
            f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
            f"{rng.choice(_TAILS)}, said {invented} at step {number}."
        )


def build_tiny_model(
    out_dir: str | os.PathLike[str],
    *,
    vocab_size: int = 1024,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    seed: int = 0,
    max_position_embeddings: int = 2048,
) -> Path:
    """Train a byte-level BPE tokenizer and save a random `LlamaForCausalLM` next to it.

    Needs torch and transformers, so it runs in `.venv-cpu`; from the main venv call
    :func:`ensure_tiny_model`. The alphabet is printable ASCII plus `<unk>`: every output
    token then decodes to text on its own, so each streamed chunk carries one token (with
    all 256 bytes, lone high bytes would be held back as incomplete UTF-8 and merge chunks).
    The generation config has no EOS, because `transformers serve` has no `ignore_eos`:
    every request then generates exactly `max_tokens`, which is what a benchmark wants.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    config = TinyModelConfig(vocab_size, hidden_size, layers, heads, seed, max_position_embeddings)
    target = Path(out_dir)
    staging = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    ascii_alphabet = sorted({byte_level.pre_tokenize_str(chr(b))[0][0] for b in range(32, 127)} | {"Ċ", "ĉ"})
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = byte_level
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=ascii_alphabet,
        limit_alphabet=len(ascii_alphabet),
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_corpus(seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
        chat_template=CHAT_TEMPLATE,
    )
    fast.save_pretrained(staging)

    torch.manual_seed(seed)
    llama_config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=fast.bos_token_id,
        eos_token_id=None,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(llama_config).eval()
    model.generation_config = GenerationConfig(
        do_sample=False, bos_token_id=fast.bos_token_id, pad_token_id=fast.pad_token_id, eos_token_id=None
    )
    model.save_pretrained(staging)
    stamp = {**_wanted_stamp(config), "vocab_actual": len(fast), "parameters": model.num_parameters()}
    (staging / STAMP_NAME).write_text(json.dumps(stamp, indent=2) + "\n")

    shutil.rmtree(target, ignore_errors=True)
    try:
        staging.rename(target)
    except OSError:  # a concurrent build of the same config won the race: keep its copy
        shutil.rmtree(staging, ignore_errors=True)
        if not _is_cached(target, config):
            raise
    return target


def main(argv: list[str] | None = None) -> int:
    """`python -m toolkit.testbeds.realserver build DIR [--vocab-size N ...]`: build the tiny model."""
    parser = argparse.ArgumentParser(prog="python -m toolkit.testbeds.realserver", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="train the tokenizer and save a random tiny Llama into DIR")
    build.add_argument("out_dir")
    defaults = TinyModelConfig()
    for key, value in asdict(defaults).items():
        build.add_argument(f"--{key.replace('_', '-')}", type=int, default=value)
    args = parser.parse_args(argv)
    options = {key: getattr(args, key) for key in asdict(defaults)}
    path = build_tiny_model(args.out_dir, **options)
    stamp = _read_stamp(path) or {}
    print(f"built {path}: vocab {stamp.get('vocab_actual')}, {stamp.get('parameters')} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
