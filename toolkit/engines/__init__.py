"""What each engine release does, as data: env writes, flags, health and other endpoints.

Pure. Every fact names the release and source line it was read in (``docs/engine-releases.md``);
``scripts/engine_contracts.py`` regenerates the flag lists from the releases' own parsers.

>>> from toolkit.engines import profile_for
>>> p = profile_for("sglang", "0.5.23")
>>> "--cuda-graph-max-bs" in p.flags("0.5.23"), "--tp-size" in p.flags("0.5.23")
(False, True)
"""

from __future__ import annotations

from toolkit.engines.bench_names import PEER_NAMES, PeerName, peer_names
from toolkit.engines.flaglists import FlagEntry, ReleaseFlags, load_release_flags
from toolkit.engines.hints import RELEASE_HINTS, ReleaseHint, hint_text
from toolkit.engines.release_profile import (
    Endpoint,
    EngineProfile,
    EnvOutcome,
    EnvWrite,
    HealthAnswer,
    HealthCheck,
    MetricNames,
)
from toolkit.engines.releases import (
    PROFILES,
    ProfileMatch,
    flag_history,
    profile_for,
    profile_named,
    resolve_profile,
)
from toolkit.engines.versions import ReleaseRange, Version, VersionError, parse_version, parse_version_output

__all__ = [
    "PEER_NAMES", "PROFILES", "RELEASE_HINTS", "Endpoint", "EngineProfile", "EnvOutcome", "EnvWrite",
    "FlagEntry", "HealthAnswer", "HealthCheck", "MetricNames", "PeerName", "ProfileMatch", "ReleaseFlags",
    "ReleaseHint", "ReleaseRange", "Version", "VersionError", "flag_history", "hint_text",
    "load_release_flags", "parse_version", "parse_version_output", "peer_names", "profile_for",
    "profile_named", "resolve_profile",
]
