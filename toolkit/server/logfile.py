"""The server's log file on its host: how many lines it has, its last lines (quoted as launch wrote it)."""

from __future__ import annotations

from toolkit.errors import ToolkitError
from toolkit.host.place import Place
from toolkit.host.shell import quote_path

__all__ = ["count_lines", "tail_lines"]


def count_lines(host: Place, path: str) -> int | None:
    """Lines in the file now; None when it cannot be read (missing, or the host is gone)."""
    try:
        result = host.run(f"wc -l < {quote_path(path)}", check=False)
    except ToolkitError:
        return None
    text = result.stdout.strip()
    return int(text) if result.ok and text.isdigit() else None


def tail_lines(host: Place, path: str, lines: int = 50) -> list[str]:
    """The last ``lines`` lines of the file ([] when it cannot be read)."""
    result = host.run(f"tail -n {int(lines)} -- {quote_path(path)}", check=False)
    return result.stdout.splitlines() if result.ok else []
