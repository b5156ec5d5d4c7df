"""Check a spec's flags against the engine's own ``--help`` on the host, before a long launch.

An 8-GPU SGLang launch loads weights for minutes before argparse rejects a typo (or, by prefix
matching, takes it for another flag). ``--help`` runs where the engine will (same interpreter,
directory, environment), cached per host, release and checkout; a flag an earlier release had is
named with the release it went (``--cuda-graph-max-bs``: last in SGLang 0.5.19, gone in 0.5.20).
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
from toolkit.server.release import DEFAULT_RELEASES, ReleaseCache, detect_release, sim_launcher

if TYPE_CHECKING:
    from toolkit.host.place import Target
    from toolkit.server.release import DetectedRelease
    from toolkit.server.spec import ServerSpec

__all__ = ["validate_spec", "check_source", "help_source", "HelpSource", "DEFAULT_CACHE", "DEFAULT_HELP_TEXTS"]

#: The cache :func:`validate_spec` uses unless given another; ``DEFAULT_CACHE.clear()`` empties it.
DEFAULT_CACHE = FlagTableCache()
#: The ``--help`` texts kept on disk (``~/.cache/toolkit/help``) that :func:`validate_spec` reads before asking a host.
DEFAULT_HELP_TEXTS = HelpTextCache()


@dataclass(frozen=True)
class HelpSource:
    """The help command as the launch would run it (``command``), and without its environment (``shown``,
    for messages: tokens stay out of errors)."""

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
        words = (*sim_launcher(spec), "--help")
    elif spec.engine == "sglang":
        words = (*launcher, "--help")
    elif spec.engine in ("vllm", "transformers"):
        head = launcher[: launcher.index("serve") + 1] if "serve" in launcher else launcher
        words = (*head, "--help=all" if spec.engine == "vllm" else "--help")
    else:
        return None
    helper = dataclasses.replace(spec, launcher=words, flags=())
    return HelpSource(spec.engine, helper.command(), join(words))


def validate_spec(host: Target, spec: ServerSpec, *, cache: FlagTableCache = DEFAULT_CACHE,
                  timeout_s: float = 300.0, releases: ReleaseCache = DEFAULT_RELEASES,
                  help_texts: HelpTextCache = DEFAULT_HELP_TEXTS) -> list[FlagProblem]:
    """Raise :class:`~toolkit.errors.InvalidFlag` if ``host``'s engine would reject ``spec``'s flags.

    Returns the warnings (an abbreviation argparse accepts by prefix). An engine whose version cannot
    be read is asked every time; the ``--help`` text is also kept on disk (``help_texts``), so another
    process skips the engine's import. Raises :class:`~toolkit.errors.CommandFailed` when ``--help``
    itself fails: the launch would fail the same way.

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
    if table is None:
        named = f"{version} (toolkit.sim)" if spec.simulated and version else version
        kept = help_texts.get(host.name, source.engine, version, source.command)
        if kept is not None:
            shown = f"{source.shown} (kept on disk)"
            table = parse_help(kept, engine=source.engine, version=named, source=shown)
        else:
            result = host.run(source.command, check=False, timeout_s=timeout_s)
            if not result.ok:
                raise CommandFailed(
                    f"`{source.shown}` failed on {host.name} (exit {result.exit_code}): its flags cannot be "
                    "checked, and a launch would most likely fail the same way", host=host.name,
                    command=source.shown, exit_code=result.exit_code, stderr=result.stderr or result.stdout,
                    hint="install the engine there, or point the spec's python= at the environment "
                         "that has it")
            text = result.stdout if result.stdout.strip() else result.stderr
            table = parse_help(text, engine=source.engine, version=named, source=source.shown)
            help_texts.put(host.name, source.engine, version, source.command, text)
        cache.put(host.name, source.engine, key, table)
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
    bare = [name.split("=", 1)[0] for name, _ in spec.flags]
    history = [(name, *flag_history(spec.engine, name)) for name in bare if name not in have]
    return [f"{name} exists up to {spec.engine} {last} and is gone from {gone} "
            f"(this host runs {release.version}); see docs/engine-releases.md"
            for name, last, gone in history if last is not None and gone is not None]


def check_source(host: Target, spec: ServerSpec, *, timeout_s: float = 120.0) -> None:
    """Raise :class:`~toolkit.errors.ExtensionMismatch` now when the checkout's compiled parts do not fit."""
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
