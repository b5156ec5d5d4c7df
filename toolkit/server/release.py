"""Which engine release a spec will run on a host: asked once, kept, and turned into its profile.

:func:`detect_release` asks ``importlib.metadata`` in the spec's own interpreter, directory and
environment (instant; ``import sglang`` loads the runtime). A checkout (``with_source``) is asked
its own ``version.py`` or nearest tag: from 0.5.7 ``sglang.__version__`` of a checkout on
``PYTHONPATH`` reports the *installed* release (python/sglang/version.py:1-8 in 0.5.19).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolkit.engines import EngineProfile, ProfileMatch, VersionError, parse_version_output, resolve_profile
from toolkit.host.shell import join, quote, quote_path
from toolkit.server.source import LAYOUT

if TYPE_CHECKING:
    from toolkit.host.place import Place, Target
    from toolkit.server.spec import ServerSpec

__all__ = ["DetectedRelease", "ReleaseCache", "DEFAULT_RELEASES", "detect_release", "release_key",
           "version_command", "release_from_output"]

_DISTRIBUTIONS = {"sglang": "sglang", "vllm": "vllm", "transformers": "transformers"}
_VERSION_CODE = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"


@dataclass(frozen=True)
class DetectedRelease:
    """The release a spec runs on a host, how that was learnt, and the profile that describes it."""

    engine: str
    version: str | None
    match: ProfileMatch | None  # None: no engine profile applies (a plain command)
    how: str  # "metadata", "--version", "checkout", "assumed" (not read: the newest profile), "none"
    command: str = ""  # the bash line that asked the host

    @property
    def profile(self) -> EngineProfile | None:
        return self.match.profile if self.match is not None else None

    def describe(self) -> str:
        """``sglang 0.5.23 (profile sglang-0.5.20+)``, or what was assumed and why."""
        if self.match is None:
            return f"{self.engine}: no engine profile"
        head = f"{self.engine} {self.version}" if self.version else f"{self.engine} (release unknown)"
        note = f"; {self.match.note}" if self.match.note else ""
        return f"{head} (profile {self.match.profile.name}, read by {self.how}{note})"

    def provenance(self) -> dict[str, str]:
        """What a journal step records: ``{"vllm": "0.25.0", "vllm_release_read_by": "metadata"}``."""
        if self.how == "none":
            return {}
        return {self.engine: self.version or "unknown", f"{self.engine}_release_read_by": self.how}

    def problem(self) -> str | None:
        """Why the release is not known, what was assumed, and what to do; None when it was read."""
        if self.version is not None or self.match is None:
            return None
        return (f"the {self.engine} release on this host could not be read (`{self.command}` printed no version); "
                f"the toolkit assumes {self.match.profile.name} and asks --help at every launch. Point the spec's "
                f"python= at the interpreter that imports {self.engine} (a wrapper that sets PYTHONPATH works)")


def _version_of_interpreter(program: str, dist: str, spec: ServerSpec) -> str:
    """Bash printing ``dist``'s version as the interpreter behind ``program`` sees it."""
    # The python beside the script comes first: a venv's, or an interpreter wrapper that puts the engine on
    # PYTHONPATH (the GPU machine's /tmp/vv/bin/{python,vllm} are bash wrappers, issue 23: the #! line of such a
    # script names bash, and asking bash for importlib.metadata read nothing). No engine import: metadata only.
    find = f"py={quote(program)}" if program.rsplit("/", 1)[-1].startswith("python") else (
        f"exe=$(command -v -- {quote(program)}) || exit 3; py=; "
        'for c in "${exe%/*}/python" "${exe%/*}/python3"; do [ -x "$c" ] && { py=$c; break; }; done; '
        '[ -n "$py" ] || { py=$(head -n 1 "$exe" | sed -n \'s/^#! *//p\' | cut -d \' \' -f 1); '
        'case ${py##*/} in python*) ;; *) py=python3;; esac; }')
    cd = f"cd {quote_path(spec.workdir)} && " if spec.workdir else ""
    env = f"env {join(f'{k}={v}' for k, v in spec.env)} " if spec.env else ""
    return f'{cd}{find}; {env}"$py" -c {quote(_VERSION_CODE)} {quote(dist)} 2>/dev/null'


def sim_launcher(spec: ServerSpec) -> tuple[str, ...]:
    """The simulator's launcher with the release it imitates (``--sim-engine-version``), if named."""
    chosen = spec.flag("--sim-engine-version")
    return (*spec.launcher, *(("--sim-engine-version", chosen) if isinstance(chosen, str) else ()))


def version_command(spec: ServerSpec) -> str | None:
    """The bash line whose output names ``spec``'s release on its host; None for a plain command."""
    if spec.simulated:
        words = (*sim_launcher(spec), "--version")
        return dataclasses.replace(spec, launcher=words, flags=()).command() + " 2>&1"
    if spec.engine not in _DISTRIBUTIONS:
        return None
    if spec.source is not None and spec.engine in LAYOUT:
        package = f"{LAYOUT[spec.engine]}/{spec.engine}".lstrip("./")
        literal = f"sed -n 's/^__version__ *= *[\"'\\'']\\([^\"'\\'']*\\).*/\\1/p' {package}/version.py 2>/dev/null"
        return f"cd {quote_path(spec.source)} && {{ git describe --tags --abbrev=0 2>/dev/null; {literal}; }}"
    return _version_of_interpreter(spec.launcher[0], _DISTRIBUTIONS[spec.engine], spec)


def release_key(host_name: str, spec: ServerSpec) -> str:
    """What makes two specs the same build on a host: engine, launcher, checkout, directory, environment."""
    env = dict(spec.env)
    parts = [host_name, spec.engine, join(spec.launcher[:3]), spec.source or "", spec.commit or "",
             spec.workdir or "", env.get("PYTHONPATH", ""), env.get("VIRTUAL_ENV", "")]
    if spec.simulated:
        chosen = spec.flag("--sim-engine-version")
        parts.append(chosen if isinstance(chosen, str) else "")
    return "|".join(parts)


def release_from_output(engine: str, output: str | None, how: str, command: str = "") -> DetectedRelease:
    """Pure: the release named in a version command's output, and its profile (``how="assumed"`` when unreadable)."""
    version = None
    if output:
        with contextlib.suppress(VersionError):
            version = parse_version_output(output).text
    how = how if version is not None else "assumed"
    try:
        match: ProfileMatch | None = resolve_profile(engine, version)
    except ValueError:
        match = None
    return DetectedRelease(engine, version, match, how, command)


class ReleaseCache:
    """Detected releases per :func:`release_key`; thread-safe. ``clear()`` forgets them (after an upgrade)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, DetectedRelease] = {}

    def get(self, key: str) -> DetectedRelease | None:
        with self._lock:
            return self._known.get(key)

    def put(self, key: str, release: DetectedRelease) -> None:
        with self._lock:
            self._known[key] = release

    def clear(self) -> None:
        with self._lock:
            self._known.clear()


#: The cache :func:`detect_release` uses unless given another.
DEFAULT_RELEASES = ReleaseCache()


def detect_release(host: Place | Target, spec: ServerSpec, *, cache: ReleaseCache = DEFAULT_RELEASES,
                   timeout_s: float = 60.0) -> DetectedRelease:
    """The release ``spec`` runs on ``host``, asked once per host and build (if unreadable: every time)."""
    key = release_key(host.name, spec)
    known = cache.get(key)
    if known is not None:
        return known
    command = version_command(spec)
    if command is None:
        return DetectedRelease(spec.engine, None, None, "none", "a plain command: no engine release")
    result = host.run(command, check=False, timeout_s=timeout_s)
    output = result.stdout if result.ok else None
    how = "--version" if spec.simulated else "checkout" if spec.source is not None else "metadata"
    release = release_from_output(spec.engine, output, how, command)
    if release.version is not None:
        cache.put(key, release)
    return release
