"""``tk.diagnose_commits``: the same configuration at two commits, diagnosed like two configurations.

Each commit runs from its own temporary ``git worktree`` (the user's checkout never moves); the
changed files are the code difference's evidence, and a code reason proposes :func:`perf_bisect`.
"""

from __future__ import annotations

from typing import Any

from toolkit.host.host import Host
from toolkit.moves.bisect.checkout import GitCheckout
from toolkit.moves.bisect.worktrees import commit_specs, require_checkout_paths
from toolkit.moves.diagnose.environment import CodeRange
from toolkit.moves.diagnose.move import diagnose
from toolkit.moves.diagnose.result import Diagnosis
from toolkit.moves.plan import Plan
from toolkit.server.spec import ServerSpec

__all__ = ["diagnose_commits"]


def diagnose_commits(host: Host, repo_dir: str, fast: str, slow: str, *, spec: ServerSpec, build: str | None = None,
                     **options: Any) -> Diagnosis:
    """Diagnose ``spec`` at commit ``slow`` against ``fast`` (both from ``repo_dir``); ``options`` go to :func:`diagnose`.

    >>> tk.diagnose_commits(host, "/src/sglang", "v0.5.8", "main", spec=spec.with_source("/src/sglang"))  # doctest: +SKIP
    """
    checkout = GitCheckout(host, repo_dir)
    shas = checkout.resolve(fast), checkout.resolve(slow)
    require_checkout_paths(spec, repo_dir)
    changed = checkout.git("diff", "--name-only", shas[0], shas[1]).stdout.split()
    build_timeout_s = (options.get("plan") or Plan()).build_timeout_s  # as compare_commits: the plan's
    with commit_specs(checkout, spec, shas, build=build, build_timeout_s=build_timeout_s) as specs:
        return diagnose(host, specs[0], specs[1], code=CodeRange(repo_dir, tuple(changed)), **options)
