"""Which profile describes the engine release on a host: the registry and the lookup.

A missing or unreadable release falls back to the newest line and says so in
:attr:`ProfileMatch.note`, so a report shows that its beliefs were assumed, not matched.

>>> profile_for("sglang", "0.5.23").name
'sglang-0.5.20+'
>>> resolve_profile("vllm", None).note
'no vllm release given: assuming the newest line, vllm-0.14+'
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.engines.release_profile import EngineProfile
from toolkit.engines.sglang import SGLANG_PROFILES
from toolkit.engines.transformers import TRANSFORMERS_PROFILES
from toolkit.engines.versions import Version, VersionError, parse_version
from toolkit.engines.vllm import VLLM_PROFILES

__all__ = ["PROFILES", "ProfileMatch", "resolve_profile", "profile_for", "profile_named", "flag_history"]

# Oldest first; the last line of each engine is the newest.
PROFILES: dict[str, tuple[EngineProfile, ...]] = {
    "sglang": SGLANG_PROFILES, "vllm": VLLM_PROFILES, "transformers": TRANSFORMERS_PROFILES}


@dataclass(frozen=True)
class ProfileMatch:
    """The profile chosen for an engine and release, and whether it was matched or assumed."""

    profile: EngineProfile
    version: Version | None
    exact: bool
    note: str = ""


def resolve_profile(engine: str, version: str | Version | None) -> ProfileMatch:
    """The release line of ``engine`` that covers ``version``; ValueError names the known engines.

    No or an unreadable version: the newest line, ``exact=False``, a note; older than every line: the oldest.
    """
    lines = PROFILES.get(engine)
    if not lines:
        raise ValueError(f"no profiles for engine {engine!r}; known: {', '.join(sorted(PROFILES))}")
    newest = lines[-1]
    if version is None:
        return ProfileMatch(newest, None, False, f"no {engine} release given: assuming the newest line, {newest.name}")
    try:
        parsed = version if isinstance(version, Version) else parse_version(version)
    except VersionError:
        return ProfileMatch(newest, None, False,
                            f"{engine} release {version!r} is unreadable: assuming the newest line, {newest.name}")
    for line in lines:
        if parsed in line:
            read = max((parse_version(r) for r in line.flag_releases), default=None)
            if line is newest and read is not None and parsed > read:
                return ProfileMatch(line, parsed, True, f"{engine} {parsed} is newer than the newest release read "
                                                        f"({read}): {line.name}'s beliefs may be out of date")
            return ProfileMatch(line, parsed, True)
    oldest = lines[0].releases.low
    if oldest is not None and parsed < oldest:
        return ProfileMatch(lines[0], parsed, False,
                            f"{engine} {parsed} predates every profile: using the oldest, {lines[0].name}")
    return ProfileMatch(newest, parsed, False, f"{engine} {parsed} is outside every profile: using {newest.name}")


def profile_for(engine: str, version: str | Version | None) -> EngineProfile:
    """Shortcut for ``resolve_profile(engine, version).profile``."""
    return resolve_profile(engine, version).profile


def profile_named(name: str) -> EngineProfile:
    """A profile by its name (``sglang-0.5.20+``); ``KeyError`` lists the names."""
    by_name = {line.name: line for lines in PROFILES.values() for line in lines}
    if name not in by_name:
        raise KeyError(f"no engine profile named {name!r}; known: {', '.join(by_name)}")
    return by_name[name]


def flag_history(engine: str, flag: str) -> tuple[str | None, str | None]:
    """(the last captured release that has ``flag``, the first after it that has not); (None, None): never.

    >>> flag_history("sglang", "--cuda-graph-max-bs")
    ('0.5.19', '0.5.20')
    """
    captured = sorted({(line, r) for line in PROFILES.get(engine, ()) for r in line.flag_releases},
                      key=lambda pair: parse_version(pair[1]))
    last_with, first_without = None, None
    for line, release in captured:
        if flag in line.flags(release):
            last_with, first_without = release, None
        elif last_with is not None and first_without is None:
            first_without = release
    return last_with, first_without
