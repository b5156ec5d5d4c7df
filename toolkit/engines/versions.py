"""Engine release numbers: parse them, order them, and read them from a host's output.

Ordered as pip orders them (PEP 440, ``packaging``): SGLang changed how it writes
``NCCL_CUMEM_ENABLE`` between 0.5.4.post1 and 0.5.4.post2. Local labels (``+cu128``) are shown,
not compared.

>>> parse_version("0.5.4.post2") < parse_version("0.5.5") < parse_version("0.5.20")
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering

from packaging.version import InvalidVersion
from packaging.version import Version as Pep440Version

__all__ = ["Version", "ReleaseRange", "parse_version", "parse_version_output", "VersionError"]

# A version token somewhere in a line: "sglang version: 0.5.23", "0.33.0", "vllm 0.11.1.dev7+g12ab"
_TOKEN = re.compile(
    r"(?<![\w.])v?\d+\.\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?(?:\+[\w.]+)?(?![\w])",
    re.IGNORECASE,
)


class VersionError(ValueError):
    """The text holds no release number this module can read."""


@total_ordering
@dataclass(frozen=True, eq=False)
class Version:
    """A parsed release: compares like pip (its local label aside), prints as it was written."""

    text: str
    parsed: Pep440Version = field(repr=False)
    _key: Pep440Version = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", Pep440Version(self.parsed.public))

    def __str__(self) -> str:
        return self.text

    @property
    def release(self) -> tuple[int, ...]:
        return self.parsed.release

    @property
    def local(self) -> str | None:
        return self.parsed.local

    @property
    def base(self) -> str:
        """The release without pre/post/dev/local parts: ``0.5.4.post2`` -> ``0.5.4``."""
        return ".".join(str(n) for n in self.release)

    def _other(self, other: object) -> Pep440Version:
        if isinstance(other, str):
            other = parse_version(other)
        if not isinstance(other, Version):
            raise TypeError(f"cannot compare Version with {type(other).__name__}")
        return other._key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Version, str)):
            return NotImplemented
        return self._key == self._other(other)

    def __hash__(self) -> int:
        return hash(self._key)

    def __lt__(self, other: Version | str) -> bool:
        return self._key < self._other(other)


def parse_version(text: str) -> Version:
    """Parse one release number (PEP 440, as pip reads it); raise :class:`VersionError` when it is not one.

    >>> parse_version("0.5.0rc2") < parse_version("0.5.0") < parse_version("0.5.0.post1")
    True
    >>> parse_version("0.11.1.dev7+g12ab.cu128").local
    'g12ab.cu128'
    """
    cleaned = text.strip()
    try:
        parsed = Pep440Version(cleaned)
    except InvalidVersion:
        raise VersionError(f"{text!r} is not a release number (expected e.g. 0.5.23 or 0.5.4.post2)") from None
    return Version(cleaned.lstrip("vV"), parsed)


def parse_version_output(text: str) -> Version:
    """The release in what a host printed for the version question (``__version__``, ``sglang version``,
    ``vllm --version``, ``pip show``): the last token of the last line that has one, as warnings come first.

    >>> parse_version_output("WARNING: triton not found\\n0.33.0\\n").text
    '0.33.0'
    >>> parse_version_output("Name: sglang\\nVersion: 0.5.4.post2\\nSummary: x").text
    '0.5.4.post2'
    """
    for line in reversed(text.strip().splitlines()):
        if line.lower().startswith(("summary:", "home-page:", "requires", "location:")):
            continue
        for token in reversed(_TOKEN.findall(line)):
            try:
                return parse_version(token)
            except VersionError:
                continue
    raise VersionError(f"no release number in the output {text.strip()[:200]!r}")


@dataclass(frozen=True)
class ReleaseRange:
    """Releases ``low <= v < high`` (either end open when ``None``), written as text too.

    >>> "0.5.4.post2" in ReleaseRange("0.5.4.post2", "0.5.20")
    True
    >>> str(ReleaseRange("0.5.20", None))
    '>= 0.5.20'
    """

    low: str | None
    high: str | None

    def __post_init__(self) -> None:
        for end in (self.low, self.high):
            if end is not None:
                parse_version(end)  # fail at import, not at lookup

    def __contains__(self, version: object) -> bool:
        if isinstance(version, str):
            try:
                version = parse_version(version)
            except VersionError:
                return False
        return isinstance(version, Version) and (self.low is None or version >= self.low) \
            and (self.high is None or version < self.high)

    def __str__(self) -> str:
        parts = ([f">= {self.low}"] if self.low else []) + ([f"< {self.high}"] if self.high else [])
        return ", ".join(parts) or "any release"
