"""A real inference server on CPU: `transformers serve` with a tiny random Llama built here.

The simulator proves the toolkit's logic; this proves it against a real engine (uvicorn, a real tokenizer,
paged-attention continuous batching) with no GPU and no Hub access. The weights are random: output is
gibberish by design, only its timing means anything. This half runs in the main venv (stdlib only); the
builder, :mod:`toolkit.testbeds.tiny_model`, runs in ``.venv-cpu`` (torch + transformers).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from toolkit.errors import CommandFailed, CommandNotFound, InvalidFlag, ToolkitError
from toolkit.server.spec import ServerSpec
from toolkit.testbeds.tiny_model import STAMP_NAME, TinyModelConfig, config_args, is_cached, read_stamp

__all__ = ["CPU_VENV_PYTHON", "OTHER_SERVE_OPTIONS", "SERVE_FLAGS", "ServeFlag", "TinyModelConfig",
           "ensure_tiny_model", "serve_env", "tiny_server_spec", "transformers_serve_argv"]

CPU_VENV_PYTHON = ".venv-cpu/bin/python"
"""Where `make .venv-cpu/.installed` puts the interpreter that has torch and transformers."""

@dataclass(frozen=True)
class ServeFlag:
    """One `transformers serve` option worth sweeping, spelled as the engine spells it."""

    name: str
    kind: Literal["switch", "value"]  # switch: `--x` / `--no-x`; value: `--x VALUE`
    values: tuple[str, ...]  # values that make sense on a CPU; () for free-form
    why: str


SERVE_FLAGS: tuple[ServeFlag, ...] = (
    ServeFlag("--continuous-batching", "switch", (),
              "paged-attention scheduler; off = one request at a time"),
    ServeFlag("--attn-implementation", "value", ("sdpa", "eager"), "flash_attention_* need CUDA"),
    ServeFlag("--dtype", "value", ("auto", "float32", "bfloat16"), "auto = the checkpoint's (float32 here)"),
    ServeFlag("--device", "value", ("cpu", "auto"), "auto picks cpu on a machine without GPU"),
    ServeFlag("--compile", "switch", (), "torch.compile; long warm-up on CPU"),
    ServeFlag("--cb-num-blocks", "value", (), "caps the KV cache; uncapped, CB zero-fills 60% of host RAM"),
    ServeFlag("--cb-max-batch-tokens", "value", (), "tokens per scheduled step; default 8192"),
    ServeFlag("--cb-block-size", "value", (), "KV tokens per page (5.17 deprecated it for page_size)"),
    ServeFlag("--cb-max-memory-percent", "value", (), "fraction of free memory for the KV cache"),
    ServeFlag("--default-seed", "value", (), "torch seed at start-up"),
    ServeFlag("--log-level", "value", ("warning", "info"),
              "info adds config dumps; uvicorn logs at info anyway"),
)
"""The options of `transformers serve` (5.24) worth sweeping; a test checks each is in `--help`."""

OTHER_SERVE_OPTIONS = ("--enable-cors", "--model-timeout", "--quantization", "--reasoning",
                       "--chat-template-kwargs", "--decision-config", "--trust-remote-code",
                       "--cb-use-cuda-graph")
"""The rest of its options, accepted in `extra_flags` (`--host`/`--port` have their own arguments)."""

# Options that transformers_serve_argv renders from its own keyword arguments: passing them again
# in extra_flags would render them twice (typer keeps the last), or turn CB on without its caps.
_KEYWORD_OPTIONS = {option: option[2:].replace("-", "_") for option in (
    "--host", "--port", "--device", "--dtype", "--attn-implementation", "--log-level",
    "--continuous-batching", "--cb-num-blocks", "--cb-max-batch-tokens")}


def transformers_serve_argv(model_dir: str | os.PathLike[str], *, port: int, host: str = "127.0.0.1",
                            continuous_batching: bool = False, cb_num_blocks: int | None = 64,
                            cb_max_batch_tokens: int | None = 512, device: str = "cpu",
                            dtype: str | None = None, attn_implementation: str | None = None,
                            log_level: str = "warning", launcher: Sequence[str] = ("transformers", "serve"),
                            extra_flags: Mapping[str, str | None] | None = None) -> list[str]:
    """The command line that serves `model_dir` and nothing else.

    The model is the positional FORCE_MODEL: loaded before the port opens, never unloaded on idle, listed
    alone by `/v1/models`. Pass an absolute path (a missing one fails as "Repo id must be in the form").
    The `--cb-*` caps keep the KV cache at 64 pages: uncapped CB on CPU zero-fills 60% of the host's RAM.

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
            raise InvalidFlag(f"{name!r} has its own argument in transformers_serve_argv.",
                              hint=f"pass {_KEYWORD_OPTIONS[bare]}=... instead of extra_flags[{name!r}].")
        if bare not in known:
            raise InvalidFlag(f"{name!r} is not a `transformers serve` option this toolkit knows.",
                              hint="use one of: " + ", ".join(sorted(known - _KEYWORD_OPTIONS.keys())))
        argv += [name] if value is None else [name, value]
    return argv


def serve_env(base: Mapping[str, str] | None = None, *, omp_num_threads: int | None = None) -> dict[str, str]:
    """Offline (a wrong model path fails at once, not after download retries), unbuffered, bounded threads."""
    env = dict(os.environ if base is None else base)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1",
               TOKENIZERS_PARALLELISM="false")
    if omp_num_threads is not None:
        env["OMP_NUM_THREADS"] = str(int(omp_num_threads))
    return env


def tiny_server_spec(model_dir: str | os.PathLike[str], *, port: int, python: str = CPU_VENV_PYTHON,
                     host: str = "127.0.0.1", continuous_batching: bool = False, cb_num_blocks: int = 64,
                     cb_max_batch_tokens: int = 512, omp_num_threads: int = 1) -> ServerSpec:
    """A launchable :class:`ServerSpec` for `transformers serve` of the tiny model, offline, KV cache capped.

    A relative ``python`` is made absolute: the server starts in the host's home directory, not this one.

    >>> tiny_server_spec("/m", port=8011, python="/venv/bin/python").argv()[:4]
    ['/venv/bin/transformers', 'serve', '/m', '--port']
    """
    python = python if os.path.isabs(python) else os.path.abspath(python)
    spec = ServerSpec.transformers(model=os.path.abspath(os.fspath(model_dir)), port=port, host=host, python=python)
    spec = spec.with_flags({"--device": "cpu", "--log-level": "warning"})
    if continuous_batching:
        spec = spec.with_flags({"--continuous-batching": True, "--cb-num-blocks": cb_num_blocks,
                                "--cb-max-batch-tokens": cb_max_batch_tokens})
    return spec.with_env(serve_env({}, omp_num_threads=omp_num_threads))


def ensure_tiny_model(out_dir: str | os.PathLike[str], *, python: str | os.PathLike[str] = CPU_VENV_PYTHON,
                      config: TinyModelConfig | None = None, timeout_s: float = 600.0) -> Path:
    """Build the tiny model into `out_dir` with `python` (which has torch) unless the same build is there.

    >>> ensure_tiny_model("out/tiny-llama")  # doctest: +SKIP
    PosixPath('out/tiny-llama')
    """
    config = config or TinyModelConfig()
    target = Path(out_dir)
    if is_cached(target, config):
        return target
    if target.exists() and any(target.iterdir()) and read_stamp(target) is None:
        raise ToolkitError(f"{target} exists and is not a tiny model built by the toolkit (no {STAMP_NAME}).",
                           hint="pass an empty or new directory, or delete this one.")
    interpreter = Path(python)
    if not interpreter.exists():
        raise CommandNotFound(f"{interpreter.absolute()} does not exist, so the tiny model cannot be built "
                              "(it needs torch).", host="localhost", command=str(interpreter), exit_code=127,
                              hint="run `make .venv-cpu/.installed`, or pass python= the interpreter that "
                                   "has transformers.")
    command = [str(interpreter), "-m", "toolkit.testbeds.tiny_model", "build", str(target), *config_args(config)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    if result.returncode != 0 or not is_cached(target, config):
        raise CommandFailed(f"building the tiny model into {target} failed (exit {result.returncode}).",
                            host="localhost", command=" ".join(command), exit_code=result.returncode,
                            stderr=result.stderr,
                            hint="read the evidence. \"No module named 'toolkit'\" means the venv predates "
                                 "the toolkit's install there: `rm .venv-cpu/.installed && make "
                                 ".venv-cpu/.installed`.")
    return target
