"""Engine release numbers: parse them, order them, and read them from a host's output.

The toolkit picks an engine profile by the release installed on the host, so it must
order ``0.5.4.post1 < 0.5.4.post2 < 0.5.5`` and ``0.5.0rc2 < 0.5.0`` the way pip does
(PEP 440): SGLang changed how it writes ``NCCL_CUMEM_ENABLE`` between two ``.post``
releases of 0.5.4. Local labels (``0.33.0+cu128``) are kept for display and ignored in
comparisons. Pure: no imports beyond the standard library.

>>> parse_version("0.5.4.post2") < parse_version("0.5.5") < parse_version("0.5.20")
True
>>> parse_version_output("sglang version: 0.5.23\\n").text
'0.5.23'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Version", "ReleaseRange", "parse_version", "parse_version_output", "VersionError"]

# PEP 440, the parts engines use: N(.N)*[{a|b|rc}N][.postN][.devN][+local]
_VERSION = re.compile(
    r"""v?(?P<release>\d+(?:\.\d+)*)
        (?:[-_.]?(?P<pre_kind>a|b|rc|alpha|beta|c)[-_.]?(?P<pre_n>\d*))?
        (?:[-_.]?(?:post|rev|r)[-_.]?(?P<post>\d*))?
        (?:[-_.]?dev[-_.]?(?P<dev>\d*))?
        (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?""",
    re.VERBOSE | re.IGNORECASE,
)
_PRE_ORDER = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2}
# A version token somewhere in a line: "sglang version: 0.5.23", "0.33.0", "vllm 0.11.1.dev7+g12ab"
_TOKEN = re.compile(
    r"(?<![\w.])v?\d+\.\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?(?:\+[\w.]+)?(?![\w])",
    re.IGNORECASE,
)


class VersionError(ValueError):
    """The text holds no release number this module can read."""


@dataclass(frozen=True, order=False)
class Version:
    """A parsed release: compares like pip, prints as it was written."""

    text: str
    release: tuple[int, ...]
    pre: tuple[int, int] | None = None  # (kind order, number): rc2 -> (2, 2)
    post: int | None = None
    dev: int | None = None
    local: str | None = None
    _key: tuple[object, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        release = self.release
        while len(release) > 1 and release[-1] == 0:  # 0.5 == 0.5.0
            release = release[:-1]
        # PEP 440 order: X.devN < XaN < XrcN < X < X.postN; a dev of a pre/post sorts below it.
        if self.pre is None and self.post is None and self.dev is not None:
            pre: tuple[float, ...] = (-1.0, 0.0)
        elif self.pre is None:
            pre = (3.0, 0.0)
        else:
            pre = (float(self.pre[0]), float(self.pre[1]))
        post = -1 if self.post is None else self.post
        dev = float("inf") if self.dev is None else float(self.dev)
        object.__setattr__(self, "_key", (release, pre, post, dev))

    def __str__(self) -> str:
        return self.text

    def _cmp(self, other: object) -> tuple[tuple[object, ...], tuple[object, ...]]:
        if isinstance(other, str):
            other = parse_version(other)
        if not isinstance(other, Version):
            raise TypeError(f"cannot compare Version with {type(other).__name__}")
        return self._key, other._key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Version, str)):
            return NotImplemented
        a, b = self._cmp(other)
        return a == b

    def __hash__(self) -> int:
        return hash(self._key)

    def __lt__(self, other: Version | str) -> bool:
        a, b = self._cmp(other)
        return a < b

    def __le__(self, other: Version | str) -> bool:
        a, b = self._cmp(other)
        return a <= b

    def __gt__(self, other: Version | str) -> bool:
        a, b = self._cmp(other)
        return a > b

    def __ge__(self, other: Version | str) -> bool:
        a, b = self._cmp(other)
        return a >= b

    @property
    def base(self) -> str:
        """The release without pre/post/dev/local parts: ``0.5.4.post2`` -> ``0.5.4``."""
        return ".".join(str(n) for n in self.release)


def parse_version(text: str) -> Version:
    """Parse one release number; raise :class:`VersionError` when it is not one.

    >>> parse_version("0.5.0rc2") < parse_version("0.5.0") < parse_version("0.5.0.post1")
    True
    >>> parse_version("0.11.1.dev7+g12ab.cu128").local
    'g12ab.cu128'
    """
    cleaned = text.strip()
    match = _VERSION.fullmatch(cleaned)
    if match is None:
        raise VersionError(f"{text!r} is not a release number (expected e.g. 0.5.23 or 0.5.4.post2)")
    pre = None
    if match["pre_kind"]:
        pre = (_PRE_ORDER[match["pre_kind"].lower()], int(match["pre_n"] or 0))
    post = None
    if match["post"] is not None:
        post = int(match["post"] or 0)
    dev = None
    if match["dev"] is not None:
        dev = int(match["dev"] or 0)
    release = tuple(int(part) for part in match["release"].split("."))
    return Version(cleaned.lstrip("vV"), release, pre, post, dev, match["local"])


def parse_version_output(text: str) -> Version:
    """The release in what a host printed for the version question.

    Understands ``python -c "import sglang; print(sglang.__version__)"`` (``0.5.23``),
    ``sglang version`` (``sglang version: 0.5.23``), ``vllm --version`` (``0.33.0``) and
    ``pip show`` (``Version: 0.33.0``). The last release-looking token of the last line
    that has one wins, because import warnings come first and the answer last.

    >>> parse_version_output("WARNING: triton not found\\n0.33.0\\n").text
    '0.33.0'
    >>> parse_version_output("Name: sglang\\nVersion: 0.5.4.post2\\nSummary: x").text
    '0.5.4.post2'
    """
    for line in reversed(text.strip().splitlines()):
        if line.lower().startswith(("summary:", "home-page:", "requires", "location:")):
            continue
        tokens = _TOKEN.findall(line)
        for token in reversed(tokens):
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
        if not isinstance(version, Version):
            return False
        if self.low is not None and version < parse_version(self.low):
            return False
        return not (self.high is not None and version >= parse_version(self.high))

    def __str__(self) -> str:
        if self.low and self.high:
            return f">= {self.low}, < {self.high}"
        if self.low:
            return f">= {self.low}"
        if self.high:
            return f"< {self.high}"
        return "any release"
