"""A git checkout on a host, driven through ``host.run``: bisect, check out, worktrees, and put it back.

Every command runs as ``LC_ALL=C git -C REPO ...`` so gitparse reads git's English. A kernel that
dies mid-bisect leaves ``BISECT_START`` behind; our marker in the git directory says which process
started it, so the next run resets only a dead kernel's bisection, never a person's or a live one's.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass

from toolkit.errors import CommandFailed, ToolkitError
from toolkit.host.host import CommandResult, Host
from toolkit.host.shell import quote, quote_path
from toolkit.journal import SourceRepo

__all__ = ["GitCheckout", "CheckoutBusy"]

MARKER = "toolkit-perf-bisect.json"


class CheckoutBusy(ToolkitError):
    """The checkout cannot be used now: uncommitted changes, or a bisection in progress."""


@dataclass(frozen=True)
class Leftover:
    """What a previous bisection left behind, read from the marker and ``BISECT_START``."""

    original: str  # the branch or commit git bisect reset returns to
    owner_pid: int | None
    owner_host: str | None
    started_at: float | None

    def owner_alive(self) -> bool:
        """Whether the Python process that started it still runs (only knowable on its own machine)."""
        if self.owner_pid is None or self.owner_host != socket.gethostname():
            return False
        try:
            os.kill(self.owner_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # alive, another user's
            pass
        return True


class GitCheckout:
    """``repo_dir`` on ``host``: the few git operations a bisection or an A/B of commits needs."""

    def __init__(self, host: Host, repo_dir: str) -> None:
        self.host = host
        self.repo_dir = repo_dir
        self._git_dir: str | None = None

    def __repr__(self) -> str:
        return f"GitCheckout({self.host.name}:{self.repo_dir})"

    def git(self, *args: str, check: bool = True, ok: tuple[int, ...] = (0,)) -> CommandResult:
        """Run ``git -C REPO ARGS`` on the host; exit codes in ``ok`` count as success."""
        words = " ".join(map(quote, args))
        command = f"LC_ALL=C GIT_TERMINAL_PROMPT=0 git -C {quote_path(self.repo_dir)} {words}"
        result = self.host.run(command, check=False)
        if check and result.exit_code not in ok:
            raise CommandFailed(f"`git {' '.join(args)}` in {self.repo_dir} on {self.host.name} exited with "
                                f"status {result.exit_code}", host=self.host.name, command=command,
                                exit_code=result.exit_code, stderr=result.stderr or result.stdout,
                                hint="the evidence is git's own message; "
                                     "run the same command in the checkout to see more")
        return result

    @property
    def git_dir(self) -> str:
        """The absolute git directory (a linked worktree has its own, holding its own bisect state)."""
        if self._git_dir is None:
            self._git_dir = self.git("rev-parse", "--absolute-git-dir").stdout.strip()
        return self._git_dir

    def resolve(self, rev: str) -> str:
        """The full commit id of ``rev`` (a sha, branch, tag, ``HEAD~3``...)."""
        result = self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        if not result.ok:
            raise ToolkitError(
                f"{rev!r} is not a commit in {self.repo_dir} on {self.host.name}",
                hint="fetch it first (git fetch), or check the spelling with `git log --oneline`",
            )
        return result.stdout.strip()

    def subject(self, rev: str) -> str:
        return self.git("log", "-1", "--format=%s", rev).stdout.strip()

    def subjects(self, good: str, bad: str) -> dict[str, str]:
        """``{sha: subject}`` for ``good`` and every commit of ``good..bad``."""
        text = self.git("log", "--format=%H%x09%s", f"{good}..{bad}").stdout
        found = dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)
        return {good: self.subject(good), **found}

    def source_repo(self) -> SourceRepo:
        """Where a reader finds these commits again (the post-mortem's reproduce block)."""
        top = self.git("rev-parse", "--show-toplevel", check=False)
        origin = self.git("remote", "get-url", "origin", check=False)  # exits 2 (128 before git 2.27) without one
        return SourceRepo(top.stdout.strip() if top.ok and top.stdout.strip() else self.repo_dir,
                          origin.stdout.strip() if origin.ok else None)

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.git("merge-base", "--is-ancestor", older, newer, ok=(0, 1)).exit_code == 0

    def current_ref(self) -> str:
        """The checked-out branch name, or the commit id when HEAD is detached."""
        branch = self.git("symbolic-ref", "-q", "--short", "HEAD", ok=(0, 1))
        return branch.stdout.strip() or self.resolve("HEAD")

    def leftover(self) -> Leftover | None:
        """The bisection in progress in this checkout, if any (``BISECT_START`` exists)."""
        if not self.host.run(f"test -e {quote_path(f'{self.git_dir}/BISECT_START')}", check=False).ok:
            return None
        original = self.host.read_file(f"{self.git_dir}/BISECT_START").decode().strip()
        return _read_marker(self.host, self.git_dir, original)

    def recover(self) -> str | None:
        """Reset a bisection a dead session left; :class:`CheckoutBusy` for one by hand or a live kernel's."""
        left = self.leftover()
        if left is None:
            self._remove_marker()
            return None
        if left.owner_pid is None:
            raise CheckoutBusy(
                f"a git bisect is in progress in {self.repo_dir} on {self.host.name} (started outside the toolkit)",
                evidence=self.git("bisect", "log", check=False).stdout.splitlines()[-8:],
                hint=f"finish it, or end it with `git -C {self.repo_dir} bisect reset`, then run again",
            )
        if left.owner_alive():
            raise CheckoutBusy(
                f"pid {left.owner_pid} on {left.owner_host} is bisecting {self.repo_dir} on {self.host.name} now",
                hint="wait for it, or interrupt that kernel (it resets the checkout when it stops)",
            )
        self.git("bisect", "reset")
        self._remove_marker()
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(left.started_at)) if left.started_at else "earlier"
        return (
            f"reset a bisection left over in {self.repo_dir} on {self.host.name} by pid {left.owner_pid} on "
            f"{left.owner_host} ({when}; its kernel died?): the checkout is back on {left.original}"
        )

    def start_bisect(self) -> None:
        """``git bisect start`` (no commits yet: git records HEAD to return to), with our marker."""
        _write_marker(self.host, self.git_dir)
        self.git("bisect", "start")

    def _remove_marker(self) -> None:
        self.host.run(f"rm -f -- {quote_path(f'{self.git_dir}/{MARKER}')}", check=False)

    def checkout(self, rev: str) -> None:
        """Detach HEAD at ``rev`` (inside a bisection: measure the good and bad ends)."""
        self.git("checkout", "-q", "--detach", rev)

    def add_worktree(self, rev: str, *, owned: bool = False) -> str:
        """A fresh detached worktree of ``rev`` in a temporary directory; ``owned``: removable if we die."""
        path = self.host.run("mktemp -d \"${TMPDIR:-/tmp}/toolkit-worktree-XXXXXX\"").stdout.strip()
        try:
            self.git("worktree", "add", "-q", "--detach", path, rev)
            if owned:
                _write_marker(self.host, GitCheckout(self.host, path).git_dir)
        except BaseException:  # the caller never learns the path, so it could not remove it
            self.remove_worktree(path)
            raise
        return path

    def remove_worktree(self, path: str) -> None:
        """Remove a worktree made by :meth:`add_worktree`, build outputs and all."""
        self.git("worktree", "remove", "--force", path, check=False)
        self.host.run(f"rm -rf -- {quote_path(path)}", check=False)
        self.git("worktree", "prune", check=False)

    def switch(self, rev: str) -> None:
        """Detach this checkout (a worktree of ours) at ``rev``, discarding what a build changed in tracked files."""
        self.git("checkout", "-q", "--force", "--detach", rev)

    def remove_leftover_worktrees(self) -> list[str]:
        """Remove the probe worktrees a dead kernel left (not a person's or a live one's); a message each."""
        listing = self.git("worktree", "list", "--porcelain").stdout
        paths = [line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")][1:]
        removed = []
        for path in paths:
            left = _read_marker(self.host, GitCheckout(self.host, path).git_dir, "")
            if left.owner_pid is None or left.owner_alive():
                continue
            self.remove_worktree(path)
            removed.append(f"removed the probe worktree {path} of {self.repo_dir} on {self.host.name}, left by pid "
                           f"{left.owner_pid} on {left.owner_host} (its kernel died?)")
        self.git("worktree", "prune", check=False)
        return removed


def _write_marker(host: Host, git_dir: str) -> None:
    marker = {"pid": os.getpid(), "hostname": socket.gethostname(), "started_at": time.time()}
    host.write_file(f"{git_dir}/{MARKER}", json.dumps(marker))


def _read_marker(host: Host, git_dir: str, original: str) -> Leftover:
    """Who started what ``git_dir`` holds; no owner when there is no marker of ours."""
    try:
        marker = json.loads(host.read_file(f"{git_dir}/{MARKER}"))
    except (CommandFailed, ValueError):
        return Leftover(original, None, None, None)
    return Leftover(original, marker.get("pid"), marker.get("hostname"), marker.get("started_at"))
