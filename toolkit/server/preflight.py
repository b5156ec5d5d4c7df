"""Check a spec's flags against the engine's own ``--help`` on the host, before a long launch.

An 8-GPU SGLang launch loads weights for minutes before argparse's verdict on a typo
would reach anyone, and argparse's prefix matching can make a typo silently mean
another flag. :func:`validate_spec` runs the engine's ``--help`` where the engine will
run (same interpreter or venv, same working directory and environment), parses it with
the pure :mod:`toolkit.server.help_table`, and raises :class:`~toolkit.errors.InvalidFlag` naming
every unknown flag (with the nearest real one) and every invalid choice (with the valid
ones). Tables are cached per host, engine build and checkout (:class:`FlagTableCache`),
so ``--help`` runs once per build, not once per launch: a bisection changes the commit,
and with it the key.

The help commands: ``python -m sglang.launch_server --help``, ``vllm serve --help=all``,
``transformers serve --help``, and the simulator's ``python -m toolkit.sim --help`` (with
``--engine vllm`` in its vLLM mode). A ``ServerSpec.command`` has no help to read: it is
not checked.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolkit.errors import CommandFailed, InvalidFlag
from toolkit.host.shell import join, quote, quote_path
from toolkit.server.flag_check import FlagTableCache, check_flags
from toolkit.server.help_table import FlagProblem, parse_help

if TYPE_CHECKING:
    from toolkit.host.host import Host
    from toolkit.server.spec import ServerSpec

__all__ = ["validate_spec", "help_source", "HelpSource", "DEFAULT_CACHE"]

#: The cache :func:`validate_spec` uses unless given another; ``DEFAULT_CACHE.clear()`` empties it.
DEFAULT_CACHE = FlagTableCache()

# Which installed distribution's version names the build whose --help we read.
_DISTRIBUTIONS = {"sglang": "sglang", "vllm": "vllm", "transformers": "transformers"}
_VERSION_CODE = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"


@dataclass(frozen=True)
class HelpSource:
    """Where a spec's flag table comes from: the help command, and how to name its build.

    ``command`` is the full bash line (working directory and environment as the launch
    has them); ``shown`` the same without the environment, for messages (values such as
    tokens stay out of errors); ``version_command`` prints the distribution's version.
    """

    engine: str
    command: str
    shown: str
    version_command: str


def help_source(spec: ServerSpec) -> HelpSource | None:
    """The ``--help`` command for ``spec``'s engine, or None for a plain command (nothing to read).

    >>> from toolkit.server.spec import ServerSpec
    >>> help_source(ServerSpec.vllm("Qwen/Qwen3-8B", python="/venv")).shown
    '/venv/bin/vllm serve --help=all'
    """
    launcher = spec.launcher
    if spec.simulated:
        words, dist = (*launcher, "--help"), "toolkit"
    elif spec.engine == "sglang":
        words, dist = (*launcher, "--help"), _DISTRIBUTIONS["sglang"]
    elif spec.engine in ("vllm", "transformers"):
        head = launcher[: launcher.index("serve") + 1] if "serve" in launcher else launcher
        words, dist = (*head, "--help=all" if spec.engine == "vllm" else "--help"), _DISTRIBUTIONS[spec.engine]
    else:
        return None
    helper = dataclasses.replace(spec, launcher=words, flags=())
    return HelpSource(spec.engine, helper.command(), join(words), _version_command(words[0], dist, helper))


def _version_command(program: str, dist: str, helper: ServerSpec) -> str:
    """Bash that prints ``dist``'s version as seen by the interpreter behind ``program``.

    A console script (``vllm``, ``transformers``) names its interpreter in its ``#!`` line.
    """
    find = (
        f"py={quote(program)}"
        if program.rsplit("/", 1)[-1].startswith("python")
        else f"exe=$(command -v -- {quote(program)}) || exit 3; "
        "py=$(head -n 1 \"$exe\" | sed -n 's/^#! *//p' | cut -d ' ' -f 1); [ -x \"$py\" ] || py=python3"
    )
    cd = f"cd {quote_path(helper.workdir)} && " if helper.workdir else ""
    env = "env " + " ".join(quote(f"{k}={v}") for k, v in helper.env) + " " if helper.env else ""
    return f'{cd}{find}; {env}"$py" -c {quote(_VERSION_CODE)} {quote(dist)} 2>/dev/null'


def validate_spec(
    host: Host, spec: ServerSpec, *, cache: FlagTableCache = DEFAULT_CACHE, timeout_s: float = 300.0
) -> list[FlagProblem]:
    """Raise :class:`~toolkit.errors.InvalidFlag` if ``host``'s engine would reject ``spec``'s flags.

    Returns the warnings (an abbreviation argparse would accept by prefix), or ``[]``.
    The table is cached under (host, engine, distribution version + commit + the help
    command with its working directory and environment); an engine whose version cannot be
    read is asked every time. Raises :class:`~toolkit.errors.CommandFailed` when ``--help``
    itself fails (the engine is not installed there): the launch would fail the same way.

    >>> spec = ServerSpec.simulator(tp=8).with_flags({"--speculative-atention-mode": "decode"})  # doctest: +SKIP
    >>> validate_spec(Host.local(), spec)  # doctest: +SKIP
    InvalidFlag: unknown flag --speculative-atention-mode for sglang; did you mean --speculative-attention-mode?
    """
    source = help_source(spec)
    if source is None:
        return []
    probe = host.run(source.version_command, check=False, timeout_s=60)
    version = (probe.stdout.strip() or None) if probe.ok else None
    key = None if version is None else f"{version}|{spec.commit or ''}|{source.command}"
    table = cache.get(host.name, source.engine, key)
    if table is None:
        result = host.run(source.command, check=False, timeout_s=timeout_s)
        if not result.ok:
            raise CommandFailed(
                f"`{source.shown}` failed on {host.name} (exit {result.exit_code}): its flags cannot be checked, "
                "and a launch would most likely fail the same way",
                host=host.name,
                command=source.shown,
                exit_code=result.exit_code,
                stderr=result.stderr or result.stdout,
                hint="install the engine there, or point the spec's python= at the environment that has it",
            )
        text = result.stdout if result.stdout.strip() else result.stderr
        named = f"toolkit.sim {version}" if spec.simulated and version else version
        table = parse_help(text, engine=source.engine, version=named, source=source.shown)
        cache.put(host.name, source.engine, key, table)
    flags = [(name, " ".join(value) if isinstance(value, tuple) else value) for name, value in spec.flags]
    try:
        return list(check_flags(flags, table))
    except InvalidFlag as exc:
        raise InvalidFlag(f"{exc.message} (checked against {table.label} on {host.name})", evidence=exc.evidence,
                          hint=exc.hint) from None
