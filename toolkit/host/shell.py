"""Shell quoting: the one place where words become a bash command line.

Pure. Every flag value, environment value and path sent to a host goes through here, so any value
reaches the remote process byte for byte (property-tested through a real sshd); hand-built
f-strings with unquoted values are how a launch silently runs with the wrong flag.

>>> join(["python", "-m", "sglang.launch_server", "--served-model-name", "kimi k2"])
"python -m sglang.launch_server --served-model-name 'kimi k2'"
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from toolkit.errors import InvalidFlag

__all__ = ["ENV_NAME", "quote", "quote_path", "join", "check_env_name", "check_word"]

#: What POSIX shells and ``env`` accept as a variable name.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def quote(word: str) -> str:
    """Quote one word for bash; ``shlex.quote`` (single quotes) is exact for any bytes but NUL."""
    return shlex.quote(word)


def quote_path(path: str) -> str:
    """Quote a path, letting a leading ``~/`` mean the remote user's home (quoted, ``~`` would be literal).

    >>> quote_path("~/sglang dev")
    '"$HOME"/\\'sglang dev\\''
    """
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + quote(path[2:])
    return quote(path)


def join(argv: Iterable[str]) -> str:
    """Render an argv list as one bash command line, every word quoted."""
    return " ".join(quote(word) for word in argv)


def check_word(word: str, *, what: str) -> str:
    """Refuse a word that no argv or environment can carry (a NUL byte ends C strings)."""
    if "\x00" in word:
        raise InvalidFlag(f"{what} contains a NUL byte, which no command line or environment can carry",
                          evidence=[repr(word)], hint="remove the NUL character from the value")
    return word


def check_env_name(name: str) -> str:
    """Refuse an environment variable name that ``env`` would take for a command."""
    if not ENV_NAME.fullmatch(name):
        raise InvalidFlag(
            f"{name!r} is not a valid environment variable name", evidence=[f"name: {name!r}"],
            hint="use letters, digits and underscores, not starting with a digit (e.g. NCCL_ALGO)")
    return name
