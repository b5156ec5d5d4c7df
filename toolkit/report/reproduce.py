"""How to reproduce a step: its full command line, wrapped one flag a line, from the checkout it ran.

A commit step's temporary ``git worktree`` was removed when it ended (:mod:`toolkit.moves.bisect.worktrees`):
every worktree path becomes ``$REPO``, a checkout of the reader's own (docs/postmortem.md).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["WORKTREE", "without_worktrees", "wrap_command", "reproduce_script"]

#: A probe worktree's path, as GitCheckout.add_worktree makes it (``mktemp -d $TMPDIR/toolkit-worktree-XXXXXX``).
WORKTREE = re.compile(r"[^\s'\"=:(\[,]*/toolkit-worktree-[A-Za-z0-9_]+")
_REPO = "$REPO"


def without_worktrees(value: Any) -> Any:
    """``value`` (a stored spec, a list, a string) with every worktree path replaced by ``$REPO``.

    >>> without_worktrees({"flags": [["--source-dir", "/tmp/toolkit-worktree-ab12CD"]]})
    {'flags': [['--source-dir', '$REPO']]}
    >>> without_worktrees("ImportError: ... (/tmp/toolkit-worktree-ab12CD/python/x.py)")
    'ImportError: ... ($REPO/python/x.py)'
    """
    if isinstance(value, str):
        return WORKTREE.sub(_REPO, value)
    if isinstance(value, Mapping):
        return {k: without_worktrees(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(without_worktrees(v) for v in value)
    return value


_OPERATORS = frozenset({"&&", "||", ";", "|"})


def _quote(word: str) -> str:
    if word in _OPERATORS:
        return word
    if _REPO in word:  # "$REPO/python" must expand: double quotes, everything else in it is a plain path
        return '"' + word.replace('"', '\\"') + '"'
    return shlex.quote(word)


def wrap_command(command: str) -> str:
    """``command`` as shell lines a person can read and paste: one flag (with its value) a line.

    A leading ``exec`` is dropped: pasted into a terminal it would close it.

    >>> print(wrap_command("exec env A=1 /venv/bin/python -m toolkit.sim --tp-size 8 --model-path 'x y'"))
    env A=1 /venv/bin/python -m toolkit.sim \\
        --tp-size 8 \\
        --model-path 'x y'
    """
    try:
        words = shlex.split(WORKTREE.sub(_REPO, command))
    except ValueError:  # an unbalanced quote in a hand-written command: show it as it is
        return command
    words = words[1:] if words[:1] == ["exec"] else words
    lines: list[list[str]] = [[]]
    for word in words:
        if (word.startswith("--") or word in _OPERATORS) and lines[-1]:
            lines.append([])
        lines[-1].append(_quote(word))
    return " \\\n    ".join(" ".join(line) for line in lines)


def _clone_folder(origin: str) -> str:
    """The folder ``git clone ORIGIN`` makes: the URL's last part without ``.git`` (``repo`` if none is usable)."""
    name = re.sub(r"\.git$", "", origin.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1])
    return name if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) else "repo"


def _repo_lines(command: str, spec: Mapping[str, Any], repo_dir: str | None, origin: str | None) -> list[str]:
    """The lines that set ``$REPO`` for a commit step, from what the journal recorded of its checkout."""
    if origin:
        folder = _clone_folder(origin)
        return [f"git clone {shlex.quote(origin)} {folder}", f'REPO="$PWD/{folder}"']
    if repo_dir:
        return [f"REPO={shlex.quote(repo_dir)}"]
    in_worktree = bool(WORKTREE.search(command)) or bool(WORKTREE.search(str(spec)))  # a journal of schema 1
    source = spec.get("source") or spec.get("workdir")
    if in_worktree or not source or WORKTREE.search(str(source)):
        return ["REPO=/path/to/your/checkout  # a clone of the repository this step's commit belongs to"]
    return [f"REPO={shlex.quote(str(source))}"]


def _simulator_python(command: str, spec: Mapping[str, Any]) -> str:
    """A simulated step's interpreter, as a reader runs it from their clone of the toolkit."""
    launcher = spec.get("launcher") or []
    python = str(launcher[0]) if launcher else ""
    if not spec.get("simulated") or not python.startswith("/") or python not in command:
        return command
    return command.replace(python, ".venv/bin/python")


def reproduce_script(command: str, spec: Mapping[str, Any] | None, *, repo_dir: str | None = None,
                     origin: str | None = None, bench: Sequence[tuple[str, str]] = ()) -> str:
    """The bash block for one step: ``$REPO`` and ``git checkout SHA`` for a commit step, then the command.

    ``bench``: ``(workload in words, bench command)`` for each workload the step measured.

    >>> print(reproduce_script("python -m sglang.launch_server --source-dir /tmp/toolkit-worktree-a1",
    ...                        {"commit": "3eef625b"}, repo_dir="/src/sglang",
    ...                        origin="https://github.com/sgl-project/sglang.git"))
    git clone https://github.com/sgl-project/sglang.git sglang
    REPO="$PWD/sglang"
    git -C "$REPO" checkout 3eef625b
    python -m sglang.launch_server \\
        --source-dir "$REPO"
    """
    spec = spec or {}
    commit = spec.get("commit")
    head: list[str] = []
    if commit:
        head += _repo_lines(command, spec, repo_dir, origin)
        head.append(f'git -C "$REPO" checkout {shlex.quote(str(commit))}')
    env = [(str(k), str(v)) for k, v in (spec.get("env") or {}).items()] if isinstance(spec.get("env"), Mapping) else []
    exports = [f"export {k}={_quote(without_worktrees(v))}" for k, v in env if f"{k}=" not in command]
    server = wrap_command(_simulator_python(command, spec))
    if spec.get("simulated"):
        head.append("# the toolkit's simulator: run from a clone of the toolkit, after `make .venv/.installed`")
    if bench:
        server += " &\n# once the server is ready (its log says so), the benchmark:"
    lines = [f"# {workload}\n{wrap_command(command)}" for workload, command in bench]
    return "\n".join(head + exports + [server, *lines])
