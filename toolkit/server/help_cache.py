"""Engines' ``--help`` texts kept on the driver's disk, per host, help command and release.

``vllm serve --help=all`` took 24-31 s on the GPU machine (vLLM 0.25.0's import time, issue 23), paid
again by every kernel. Kept in ``~/.cache/toolkit/help`` (``$XDG_CACHE_HOME``; folder 0700, files 0600)
under a hash of host, help command and release; an undetected release is never kept.

>>> import tempfile
>>> cache = HelpTextCache(tempfile.mkdtemp())
>>> cache.put("gpu-a", "vllm", "0.25.0", "vllm serve --help=all", "--max-model-len MAX_MODEL_LEN")
>>> cache.get("gpu-a", "vllm", "0.25.0", "vllm serve --help=all")
'--max-model-len MAX_MODEL_LEN'
>>> cache.get("gpu-b", "vllm", "0.25.0", "vllm serve --help=all") is None
True
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

__all__ = ["HelpTextCache", "default_help_dir"]

_SAFE = re.compile(r"[^A-Za-z0-9._+-]")


def default_help_dir() -> Path:
    """``$XDG_CACHE_HOME/toolkit/help``, else ``~/.cache/toolkit/help``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolkit" / "help"


class HelpTextCache:
    """``--help`` texts on this machine's disk; ``directory=None`` means :func:`default_help_dir` at each call."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self._directory = None if directory is None else Path(directory)

    @property
    def directory(self) -> Path:
        return self._directory if self._directory is not None else default_help_dir()

    def path(self, host: str, engine: str, release: str, command: str) -> Path:
        digest = hashlib.sha256("\0".join((host, engine, release, command)).encode()).hexdigest()[:20]
        return self.directory / f"{_SAFE.sub('_', engine)}-{_SAFE.sub('_', release)}-{digest}.txt"

    def get(self, host: str, engine: str, release: str | None, command: str) -> str | None:
        """The kept text, or None (no release, nothing kept, or a file that cannot be read)."""
        if release is None:
            return None
        try:
            text = self.path(host, engine, release, command).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        return text or None

    def put(self, host: str, engine: str, release: str | None, command: str, text: str) -> None:
        """Keep ``text`` (0600, written whole then renamed); a disk that refuses is not an error."""
        if release is None or not text.strip():
            return
        path = self.path(host, engine, release, command)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(partial, path)
        except OSError:
            partial.unlink(missing_ok=True)
