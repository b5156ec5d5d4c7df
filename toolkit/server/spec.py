"""ServerSpec: what to launch, as an immutable value that renders its own command line.

Pure data, so a sweep is a list of specs and the journal stores them. Every word is quoted
(:mod:`toolkit.host.shell`): a value with a space or ``$`` reaches the engine exactly, and one with a
character no shell word may carry is refused here, before anything runs.

>>> base = ServerSpec.sglang("moonshotai/Kimi-K2.5", tp=8, port=8000)
>>> eagle = base.with_flags({"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2})
>>> eagle.describe()
'EAGLE3 steps=2'
>>> eagle.command()
'exec python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp-size 8 --port 8000 --host 0.0.0.0 --speculative-algorithm EAGLE3 --speculative-num-steps 2'
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, overload

from toolkit.errors import InvalidFlag
from toolkit.host.shell import check_env_name, check_word, join, quote, quote_path
from toolkit.redaction import Redactor
from toolkit.server import source as sources
from toolkit.server.naming import FlagValue, apart, describe, parameters, secret_values

__all__ = ["ServerSpec", "FlagValue", "MISSING", "SPEC_ENGINES"]

SPEC_ENGINES: Final = ("sglang", "vllm", "transformers", "command")

#: Flags whose value counts GPUs or processes, as the releases' own parsers list them (captured in
#: toolkit/engines/flags/: sglang-0.5.23.txt:72,74,77,290 --tp-size --pp-size --dp-size --ep-size, with their
#: long spellings; vllm-0.20.0.txt:120,147,150 --data-parallel-size --pipeline-parallel-size
#: --tensor-parallel-size). ``tp=0`` was accepted and failed minutes later inside the engine (issue 25).
PARALLEL_SIZES = frozenset({"--tp-size", "--dp-size", "--pp-size", "--ep-size", "--tensor-parallel-size",
                            "--pipeline-parallel-size", "--data-parallel-size", "--expert-parallel-size"})


class _Missing:
    """The value of a flag a spec does not have (distinct from None, which is a switch)."""

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()


def render_value(name: str, value: object) -> FlagValue | _Missing:
    """A Python value as a flag value: True/None switch, False drops the flag, dict -> JSON."""
    if name in PARALLEL_SIZES and not isinstance(value, bool) and value is not None and not (
            str(value).isdigit() and int(str(value)) >= 1):  # a switch is flag_check's "needs a value"
        raise InvalidFlag(f"{name} {value!r}: a parallel size is a whole number of 1 or more (tp=1: one GPU)")
    if value is None or value is True:
        return None
    if value is False:
        return MISSING
    if isinstance(value, str):
        return check_word(value, what=f"the value of {name}")
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, os.PathLike):
        return check_word(os.fspath(value), what=f"the value of {name}")
    if isinstance(value, bytes | bytearray):
        raise InvalidFlag(f"{name}: pass text, not bytes", evidence=[repr(value)], hint="decode it first")
    if isinstance(value, Mapping):
        return check_word(json.dumps(value, separators=(",", ":")), what=f"the value of {name}")
    if isinstance(value, Sequence):
        words = tuple(render_value(name, item) for item in value)
        if not all(isinstance(w, str) for w in words):
            raise InvalidFlag(f"{name}: every item of a list value must be a string or a number",
                              evidence=[repr(value)])
        return words  # type: ignore[return-value]
    raise InvalidFlag(f"{name}: a flag value must be str, int, float, bool, dict (JSON) or a list, not "
                      f"{type(value).__name__}", evidence=[repr(value)],
                      hint="True makes a switch, False removes the flag, a dict becomes compact JSON")


def check_flag_name(name: str) -> str:
    if not isinstance(name, str) or not name.startswith("-") or name.strip("-") == "" or " " in name:
        raise InvalidFlag(f"{name!r} is not a flag name", hint="spell flags as on the command line, e.g. "
                          "'--speculative-num-steps' (or a keyword: speculative_num_steps=2)")
    return name


def tool(tool: str, python: str | None) -> str:
    """Where an engine's console script lives: beside the :func:`interpreter` of ``python``."""
    directory = os.path.dirname(interpreter(python))
    return f"{directory}/{tool}" if directory else tool


def interpreter(python: str | None) -> str:
    """The interpreter to run: ``python`` itself, a venv directory's ``bin/python``, or ``python`` on PATH."""
    if python is None:
        return "python"
    base = python.rstrip("/")
    return base if os.path.basename(base).startswith("python") else f"{base}/bin/python"


def as_flags(flags: Mapping[str, object]) -> dict[str, object]:
    return {("--" + k.replace("_", "-") if not k.startswith("-") else k): v for k, v in flags.items()}


def _command_preset(cls: type[ServerSpec], argv: Sequence[str], *, port: int, model: str | None = None,
                    env: Mapping[str, object] | None = None, label: str | None = None) -> ServerSpec:
    """``ServerSpec.command(argv, port=...)``: any program, argv as given; with_flags appends flags."""
    return cls("command", tuple(argv), model, port, label=label).with_env(env or {})


def _render_command(spec: ServerSpec) -> str:
    """``spec.command()``: ``cd WORKDIR && exec env K=V ... ARGV`` (``exec``: the engine is the pid)."""
    argv = spec.argv()
    first = quote_path(argv[0]) if argv[0].startswith("~/") else quote(argv[0])
    env = f"env {join(f'{k}={v}' for k, v in spec.env)} " if spec.env else ""
    line = f"exec {env}" + " ".join([first, *(quote(w) for w in argv[1:])])
    return f"cd {quote_path(spec.workdir)} && {line}" if spec.workdir else line


class _BuildOrRender:
    """``ServerSpec.command(argv, port=...)`` builds a spec; ``spec.command()`` renders one."""

    @overload
    def __get__(self, obj: None, owner: type[ServerSpec]) -> Callable[..., ServerSpec]: ...
    @overload
    def __get__(self, obj: ServerSpec, owner: type[ServerSpec]) -> Callable[[], str]: ...
    def __get__(self, obj: ServerSpec | None, owner: type[ServerSpec]) -> Callable[..., Any]:
        if obj is None:
            return functools.partial(_command_preset, owner)
        return functools.partial(_render_command, obj)


@dataclass(frozen=True, repr=False)
class ServerSpec:
    """An immutable description of one server launch; ``with_*`` methods return new specs."""

    engine: str
    launcher: tuple[str, ...]
    model: str | None = None
    port: int = 8000
    flags: tuple[tuple[str, FlagValue], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    workdir: str | None = None
    python: str | None = None
    commit: str | None = None
    label: str | None = None
    simulated: bool = False
    source: str | None = None  # the checkout whose code runs (with_source)
    source_install: sources.Install = "pythonpath"

    def __post_init__(self) -> None:
        if self.engine not in SPEC_ENGINES:
            raise InvalidFlag(f"unknown engine {self.engine!r}", hint=f"valid engines: {', '.join(SPEC_ENGINES)}")
        launcher = tuple(check_word(str(w), what="the launcher") for w in self.launcher)
        if not launcher:
            raise InvalidFlag(
                "a ServerSpec needs a launcher argv, e.g. ('python', '-m', 'sglang.launch_server')")
        if not isinstance(self.port, int) or isinstance(self.port, bool) or not 0 < self.port < 65536:
            raise InvalidFlag(f"port must be an integer 1-65535, not {self.port!r}")
        flags = tuple((check_flag_name(n), tuple(v) if isinstance(v, list) else v) for n, v in self.flags)
        names = [n for n, _ in flags]
        if len(set(names)) != len(names):
            raise InvalidFlag("a flag appears twice", evidence=names,
                              hint="use with_flags() to change a flag")
        env = tuple((check_env_name(k), check_word(str(v), what=f"the value of {k}")) for k, v in self.env)
        object.__setattr__(self, "launcher", launcher)
        object.__setattr__(self, "flags", flags)
        object.__setattr__(self, "env", env)
        port_flag = dict(flags).get("--port")
        if isinstance(port_flag, str) and port_flag != str(self.port):
            raise InvalidFlag(f"--port {port_flag} disagrees with port={self.port}",
                              hint="set the port with with_flags")

    @classmethod
    def sglang(cls, model: str, *, tp: int = 1, port: int = 30000, host: str = "0.0.0.0",
               python: str | None = "python", **flags: object) -> ServerSpec:
        """``python -m sglang.launch_server --model-path M --tp-size N --port P --host H`` plus ``flags``
        (``--tp-size``, not ``--tp``: that worked only as argparse's prefix of it)."""
        base = cls("sglang", (interpreter(python), "-m", "sglang.launch_server"), model, port, python=python)
        preset = {"--model-path": model, "--tp-size": tp, "--port": port, "--host": host}
        return base.with_flags({**preset, **as_flags(flags)})

    @classmethod
    def vllm(cls, model: str, *, tp: int = 1, port: int = 8000, host: str | None = None,
             speculative_config: Mapping[str, object] | None = None, python: str | None = None,
             **flags: object) -> ServerSpec:
        """``vllm serve MODEL --tensor-parallel-size N --port P [--speculative-config JSON]``."""
        base = cls("vllm", (tool("vllm", python), "serve", model), model, port, python=python)
        preset: dict[str, object] = {"--tensor-parallel-size": tp, "--port": port}
        if host is not None:
            preset["--host"] = host
        if speculative_config is not None:
            preset["--speculative-config"] = dict(speculative_config)
        return base.with_flags({**preset, **as_flags(flags)})

    @classmethod
    def transformers(cls, *, port: int = 8000, host: str = "0.0.0.0", model: str | None = None,
                     python: str | None = None, **flags: object) -> ServerSpec:
        """``transformers serve [MODEL] --port P --host H``; the model loads before the port opens (5.x)."""
        launcher = (tool("transformers", python), "serve") + ((model,) if model else ())
        base = cls("transformers", launcher, model, port, python=python)
        return base.with_flags({"--port": port, "--host": host, **as_flags(flags)})

    @classmethod
    def simulator(cls, engine: str = "sglang", *, model: str = "sim-model", tp: int = 8,
                  port: int | None = None, host: str = "0.0.0.0", python: str = sys.executable,
                  **flags: object) -> ServerSpec:
        """The simulated server (``python -m toolkit.sim``), logging and taking flags like ``engine``'s newest
        release (``sim_engine_version="0.4.10"`` names another)."""
        if engine not in ("sglang", "vllm", "transformers"):
            raise InvalidFlag(f"the simulator imitates sglang, vllm or transformers, not {engine!r}",
                              hint="engine='sglang', 'vllm' or 'transformers'")
        chosen = port if port is not None else (30000 if engine == "sglang" else 8000)
        launcher: tuple[str, ...] = (python, "-m", "toolkit.sim")
        preset: dict[str, object] = {"--model-path": model, "--tp-size": tp}
        if engine == "vllm":
            launcher, preset = (*launcher, "--engine", "vllm"), {"--model": model, "--tensor-parallel-size": tp}
        elif engine == "transformers":  # one process; the model is transformers serve's positional FORCE_MODEL
            launcher, preset = (*launcher, "--engine", "transformers", model), {}
        base = cls(engine, launcher, model, chosen, python=python, simulated=True)
        preset.update({"--port": chosen, "--host": host})
        return base.with_flags({**preset, **as_flags(flags)})

    def with_flags(self, flags: Mapping[str, object] | None = None, /, **keyword_flags: object) -> ServerSpec:
        """A new spec with flags set (True: switch, False: removed, dict: JSON, list: nargs)."""
        current = dict(self.flags)
        changes: dict[str, Any] = {}
        for name, value in {**(flags or {}), **as_flags(keyword_flags)}.items():
            rendered = render_value(check_flag_name(name), value)
            if rendered is MISSING:
                current.pop(name, None)
                continue
            current[name] = rendered  # type: ignore[assignment]
            if name == "--port":
                if not isinstance(rendered, str) or not rendered.isdigit():
                    raise InvalidFlag(f"--port must be a number, not {value!r}")
                changes["port"] = int(rendered)
            if name in ("--model-path", "--model") and isinstance(rendered, str):
                changes["model"] = rendered
        return dataclasses.replace(self, flags=tuple(current.items()), **changes)

    def without_flags(self, *names: str) -> ServerSpec:
        """A new spec without the named flags (absent names are ignored)."""
        return dataclasses.replace(self, flags=tuple((n, v) for n, v in self.flags if n not in names))

    def with_env(self, env: Mapping[str, object] | None = None, /, **keyword_env: object) -> ServerSpec:
        """A new spec with environment variables set; a value of None removes the variable."""
        current = dict(self.env)
        for name, value in {**(env or {}), **keyword_env}.items():
            if value is None:
                current.pop(name, None)
            elif isinstance(value, str | int | float) and not isinstance(value, bool):
                current[check_env_name(name)] = str(value)
            else:
                raise InvalidFlag(f"environment value of {name} must be str, int or float, "
                                  f"not {type(value).__name__}")
        return dataclasses.replace(self, env=tuple(current.items()))

    def with_source(self, repo_dir: str, *, commit: str | None = None,
                    install: sources.Install = "pythonpath") -> ServerSpec:
        """The same launch running the code of the checkout ``repo_dir`` (at ``commit``, for the record).

        SGLang: ``PYTHONPATH=<repo_dir>/python`` (``<repo_dir>`` alone runs the installed release), or
        ``install="editable"``; vLLM: a per-commit venv with that commit's precompiled wheel
        (:mod:`toolkit.server.source`, :meth:`source_build`).

        >>> spec = ServerSpec.sglang("m").with_source("/src/sglang", commit="1a2b3c4d")
        >>> dict(spec.env)["PYTHONPATH"], spec.commit
        ('/src/sglang/python', '1a2b3c4d')
        """
        if self.engine not in sources.LAYOUT:
            raise InvalidFlag(f"with_source runs SGLang or vLLM from a checkout, not {self.engine}",
                              hint="for any other program, set workdir= or PYTHONPATH with with_env")
        root = repo_dir.rstrip("/")
        chosen: sources.Install = "editable" if self.engine == "vllm" and not self.simulated else install
        current = dict(self.env).get("PYTHONPATH")
        if self.source is not None and current:  # moving to another checkout: drop the old entry
            current = ":".join(p for p in current.split(":") if not p.startswith(self.source.rstrip("/") + "/")
                               and p != self.source.rstrip("/"))
        spec = self.with_env({"PYTHONPATH": sources.pythonpath(self.engine, root, current)})
        launcher = self.launcher
        if chosen == "editable" and not self.simulated:
            venv = f"{root}/{sources.VENV}"
            head = (f"{venv}/bin/vllm", "serve") if self.engine == "vllm" else (f"{venv}/bin/python",)
            launcher = (*head, *self.launcher[len(head):])
        return dataclasses.replace(spec, launcher=launcher, source=root, source_install=chosen,
                                   commit=commit if commit is not None else self.commit)

    def at_checkout(self, repo_dir: str, commit: str) -> ServerSpec:
        """This spec's source moved to another checkout of the same repository (a worktree), at ``commit``."""
        if self.source is None:
            raise InvalidFlag("at_checkout needs a spec made with with_source(repo_dir)", evidence=[self.command()])
        return self.with_source(repo_dir, commit=commit, install=self.source_install)

    def source_build(self) -> str | None:
        """What must run in the checkout before this spec can launch (None: nothing)."""
        if self.source is None or self.simulated:
            return None
        return sources.build_command(self.engine, self.source_install)

    def api_key(self) -> str | None:
        """The API key the server demands (``--api-key``; vLLM also ``VLLM_API_KEY``), for probes, bench."""
        value = self.flag("--api-key")
        if isinstance(value, tuple):
            return value[0] if value else None
        if isinstance(value, str):
            return value
        return dict(self.env).get("VLLM_API_KEY") if self.engine == "vllm" else None

    def flag(self, name: str) -> FlagValue | _Missing:
        """The value of ``name``: a string, a tuple (nargs), None (a switch), or MISSING."""
        return dict(self.flags).get(name, MISSING)

    def argv(self) -> list[str]:
        """The exact argv the engine receives."""
        words = list(self.launcher)
        for name, value in self.flags:
            words += [name, value] if isinstance(value, str) else [name, *(value or ())]
        return words

    command = _BuildOrRender()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe; env is NOT redacted here (the journal redacts). Reversible with from_dict."""
        return {**dataclasses.asdict(self), "launcher": list(self.launcher), "env": dict(self.env),
                "flags": [[n, list(v) if isinstance(v, tuple) else v] for n, v in self.flags],
                "describe": self.describe(), "command": self.command()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerSpec:
        """Rebuild a spec from :meth:`to_dict` output (derived keys are ignored)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["launcher"] = tuple(values.get("launcher", ()))  # __post_init__ turns nargs lists into tuples
        values["env"] = tuple(dict(values.get("env", {})).items())
        return cls(**values)

    def describe(self) -> str:
        """A short label of what differs from a plain launch, for tables and plot legends."""
        return self.label or describe(self.flags, self.env, self.commit, simulated=self.simulated)

    def describe_apart(self, other: ServerSpec) -> str:
        """What this spec has that ``other`` lacks, briefly, for a title that sets the two side by side:
        ``sim EAGLE3 steps=2`` against ``sim baseline``; the label, where one was given."""
        return self.label or describe(apart(self.flags, other.flags), apart(self.env, other.env),
                                      None if self.commit == other.commit else self.commit, simulated=self.simulated)

    def secrets(self) -> frozenset[str]:
        """Values of this spec's secret flags and variables, to hide wherever they are quoted."""
        return secret_values(self.flags, self.env)

    def __repr__(self) -> str:
        """The dataclass's repr with the secrets hidden: executed notebooks show it, and others read them."""
        fields = ", ".join(f"{name}={value!r}" for name, value in dataclasses.asdict(self).items())
        return Redactor.of(self.secrets()).text(f"ServerSpec({fields})")

    def parameters(self) -> dict[str, str]:
        """Every flag (``--x``), variable (``env:X``) and the commit as text: what a diff compares."""
        return parameters(self.flags, self.env, self.commit)
