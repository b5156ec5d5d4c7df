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

The release on the host is detected first (:func:`~toolkit.server.release.detect_release`,
cached the same way) and names the table: an error says which release rejected the flag,
and when a flag existed in an earlier release it says when it went (``--cuda-graph-max-bs``:
last in SGLang 0.5.19, gone in 0.5.20). A spec that runs a checkout (``with_source``) has its
compiled parts checked against the checkout before anything starts
(:class:`~toolkit.errors.ExtensionMismatch`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolkit.engines import flag_history
from toolkit.errors import CommandFailed, ExtensionMismatch, InvalidFlag
from toolkit.host.shell import join
from toolkit.server import source as sources
from toolkit.server.flag_check import FlagTableCache, check_flags
from toolkit.server.help_cache import HelpTextCache
from toolkit.server.help_table import FlagProblem, parse_help
from toolkit.server.release import DEFAULT_RELEASES, DetectedRelease, ReleaseCache, detect_release

if TYPE_CHECKING:
    from toolkit.host.place import Target
    from toolkit.server.spec import ServerSpec

__all__ = ["validate_spec", "check_source", "help_source", "HelpSource", "DEFAULT_CACHE", "DEFAULT_HELP_TEXTS"]

#: The cache :func:`validate_spec` uses unless given another; ``DEFAULT_CACHE.clear()`` empties it.
DEFAULT_CACHE = FlagTableCache()
#: The ``--help`` texts kept on disk (``~/.cache/toolkit/help``) that :func:`validate_spec` reads before asking a host.
DEFAULT_HELP_TEXTS = HelpTextCache()



@dataclass(frozen=True)
class HelpSource:
    """Where a spec's flag table comes from: the help command, and how to name its build.

    ``command`` is the full bash line (working directory and environment as the launch
    has them); ``shown`` the same without the environment, for messages (values such as
    tokens stay out of errors). The release is named by :func:`~toolkit.server.release.detect_release`.
    """

    engine: str
    command: str
    shown: str


def help_source(spec: ServerSpec) -> HelpSource | None:
    """The ``--help`` command for ``spec``'s engine, or None for a plain command (nothing to read).

    >>> from toolkit.server.spec import ServerSpec
    >>> help_source(ServerSpec.vllm("Qwen/Qwen3-8B", python="/venv")).shown
    '/venv/bin/vllm serve --help=all'
    """
    launcher = spec.launcher
    if spec.simulated:
        chosen = spec.flag("--sim-engine-version")
        words: tuple[str, ...] = (*launcher, *(("--sim-engine-version", chosen) if isinstance(chosen, str) else ()),
                                  "--help")
    elif spec.engine == "sglang":
        words = (*launcher, "--help")
    elif spec.engine in ("vllm", "transformers"):
        head = launcher[: launcher.index("serve") + 1] if "serve" in launcher else launcher
        words = (*head, "--help=all" if spec.engine == "vllm" else "--help")
    else:
        return None
    helper = dataclasses.replace(spec, launcher=words, flags=())
    return HelpSource(spec.engine, helper.command(), join(words))


def validate_spec(
    host: Target, spec: ServerSpec, *, cache: FlagTableCache = DEFAULT_CACHE, timeout_s: float = 300.0,
    releases: ReleaseCache = DEFAULT_RELEASES, help_texts: HelpTextCache = DEFAULT_HELP_TEXTS,
) -> list[FlagProblem]:
    """Raise :class:`~toolkit.errors.InvalidFlag` if ``host``'s engine would reject ``spec``'s flags.

    Returns the warnings (an abbreviation argparse would accept by prefix), or ``[]``.
    The table is cached under (host, engine, distribution version + commit + the help
    command with its working directory and environment); an engine whose version cannot be
    read is asked every time. The ``--help`` text is also kept on this machine's disk
    (``help_texts``, 0600 under ``~/.cache/toolkit/help``), so another process that checks the
    same release on the same host reads it there instead of paying the engine's import again. Raises :class:`~toolkit.errors.CommandFailed` when ``--help``
    itself fails (the engine is not installed there): the launch would fail the same way.

    >>> spec = ServerSpec.simulator(tp=8).with_flags({"--speculative-atention-mode": "decode"})  # doctest: +SKIP
    >>> validate_spec(Host.local(), spec)  # doctest: +SKIP
    InvalidFlag: unknown flag --speculative-atention-mode for sglang; did you mean --speculative-attention-mode?
    """
    source = help_source(spec)
    if source is None:
        return []
    release = detect_release(host, spec, cache=releases)
    if spec.source is not None and not spec.simulated:
        check_source(host, spec)
    version = release.version
    key = None if version is None else f"{version}|{spec.commit or ''}|{source.command}"
    table = cache.get(host.name, source.engine, key)
    kept = help_texts.get(host.name, source.engine, version, source.command) if table is None else None
    if table is None and kept is not None:
        named = f"{version} (toolkit.sim)" if spec.simulated and version else version
        table = parse_help(kept, engine=source.engine, version=named, source=f"{source.shown} (kept on disk)")
        cache.put(host.name, source.engine, key, table)
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
        named = f"{version} (toolkit.sim)" if spec.simulated and version else version
        table = parse_help(text, engine=source.engine, version=named, source=source.shown)
        cache.put(host.name, source.engine, key, table)
        help_texts.put(host.name, source.engine, version, source.command, text)
    flags = [(name, " ".join(value) if isinstance(value, tuple) else value) for name, value in spec.flags]
    try:
        return list(check_flags(flags, table))
    except InvalidFlag as exc:
        gone = _removed_flags(spec, release)
        raise InvalidFlag(f"{exc.message} (checked against {table.label} on {host.name})",
                          evidence=[*exc.evidence, *gone], hint=exc.hint) from None


def _removed_flags(spec: ServerSpec, release: DetectedRelease) -> list[str]:
    """For each flag of ``spec`` the detected release lacks but an earlier release had: when it went."""
    profile = release.profile
    if profile is None or release.version is None:
        return []
    have = profile.flags(release.version)
    notes = []
    for name, _ in spec.flags:
        bare = name.split("=", 1)[0]
        if bare in have:
            continue
        last_with, first_without = flag_history(spec.engine, bare)
        if last_with is not None and first_without is not None:
            notes.append(f"{bare} exists up to {spec.engine} {last_with} and is gone from {first_without} "
                         f"(this host runs {release.version}); see docs/engine-releases.md")
    return notes


def check_source(host: Target, spec: ServerSpec, *, timeout_s: float = 120.0) -> None:
    """Raise :class:`~toolkit.errors.ExtensionMismatch` when the checkout's compiled parts do not fit.

    The question SGLang's launcher asks at start (is the kernel wheel new enough for this
    commit?) or vLLM's import of its ``_C`` would answer minutes later, asked in seconds.
    """
    if spec.source is None:
        return
    python = spec.launcher[0] if spec.launcher[0].rsplit("/", 1)[-1].startswith("python") else (
        spec.launcher[0].rsplit("/", 1)[0] + "/python" if "/" in spec.launcher[0] else "python")
    command = sources.check_command(spec.engine, spec.source, python, spec.env)
    if command is None:
        return
    result = host.run(command, check=False, timeout_s=timeout_s)
    where = f"{spec.source}" + (f" at {spec.commit[:12]}" if spec.commit else "")
    verdict = sources.parse_check(spec.engine, result.stdout + "\n" + result.stderr, where)
    if not verdict.fits:
        raise ExtensionMismatch(
            f"{verdict.problem} on {host.name}", host=host.name, evidence=verdict.evidence,
            hint="install the kernel the commit needs (or rebuild the checkout: spec.source_build()); a "
                 "bisection skips such a commit: it cannot be measured")
