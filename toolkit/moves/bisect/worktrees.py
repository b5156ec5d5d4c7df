"""Does the old commit show the same baseline? Two commits, A/B-tested from temporary git worktrees.

The seed ruled out a ``git pull`` by re-measuring the old commit; by hand that moves the user's
checkout. Here each commit has its own worktree, and the spec's paths are rewritten to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence

from toolkit.benchmark.labels import metric_label, shorten_words
from toolkit.errors import InvalidFlag
from toolkit.host.host import Host
from toolkit.host.shell import quote_path
from toolkit.moves.abtest import ABResult, compare
from toolkit.moves.abverdict import Expectation
from toolkit.moves.bisect.checkout import GitCheckout
from toolkit.moves.plan import Plan
from toolkit.server.spec import FlagValue, ServerSpec

__all__ = ["compare_commits", "retarget", "require_checkout_paths", "commit_specs"]


def _moved(value: str, old: str, new: str) -> str:
    """``value`` with each ``:``-separated path under ``old`` moved under ``new`` (PYTHONPATH-style lists too)."""
    root, new = old.rstrip("/"), new.rstrip("/")
    return ":".join(new + part[len(root):] if part == root or part.startswith(root + "/") else part
                    for part in value.split(":"))


def retarget(spec: ServerSpec, repo_dir: str, worktree: str) -> ServerSpec:
    """``spec`` with every path inside ``repo_dir`` moved into ``worktree`` (not its untracked venv).

    >>> from toolkit.server.spec import ServerSpec
    >>> spec = ServerSpec.simulator(tp=1, source_dir="/src/sglang").with_env({"PYTHONPATH": "/src/sglang/python"})
    >>> moved = retarget(spec, "/src/sglang", "/tmp/wt1")
    >>> moved.flag("--source-dir"), dict(moved.env)["PYTHONPATH"]
    ('/tmp/wt1', '/tmp/wt1/python')
    """

    def move_flag(value: FlagValue) -> FlagValue:
        if isinstance(value, tuple):
            return tuple(_moved(v, repo_dir, worktree) for v in value)
        return None if value is None else _moved(value, repo_dir, worktree)

    return dataclasses.replace(
        spec,
        launcher=(spec.launcher[0], *(_moved(w, repo_dir, worktree) for w in spec.launcher[1:])),
        flags=tuple((name, move_flag(value)) for name, value in spec.flags),
        env=tuple((name, _moved(value, repo_dir, worktree)) for name, value in spec.env),
        workdir=_moved(spec.workdir, repo_dir, worktree) if spec.workdir else None,
    )


def compare_commits(host: Host, repo_dir: str, a: str, b: str, *, spec: ServerSpec, plan: Plan | None = None,
                    build: str | None = None, kind: str = "commit", title: str | None = None,
                    hypothesis: str | None = None, labels: tuple[str, str] | None = None,
                    expect: Expectation | None = "changed") -> ABResult:
    """A/B-test commit ``a`` (the reference) against ``b``, each from its own worktree, with :func:`compare`.

    ``spec`` points at ``repo_dir``; ``build`` runs in each worktree first (``plan.build_timeout_s``).
    The worktrees are removed on every way out; ``repo_dir`` itself is never touched.

    >>> ab = compare_commits(Host.local(), "/src/sglang", "v0.5.8", "main",  # doctest: +SKIP
    ...                      spec=ServerSpec.simulator(tp=8, source_dir="/src/sglang"), plan=tk.Plan(repeats=3))
    >>> ab.comparison.verdict  # doctest: +SKIP
    'within_noise'
    """
    plan = plan or Plan()
    checkout = GitCheckout(host, repo_dir)
    shas = checkout.resolve(a), checkout.resolve(b)
    named = [f"{sha[:8]} {shorten_words(checkout.subject(sha), 40)}" for sha in shas]
    require_checkout_paths(spec, repo_dir)
    old, new, metric = shas[0][:8], shas[1][:8], metric_label(plan.metric)
    with commit_specs(checkout, spec, shas, build=build, build_timeout_s=plan.build_timeout_s) as specs:
        return compare(host, specs[0], specs[1], plan=plan, kind=kind, expect=expect,
                       title=title or f"commit {new} vs {old}",
                       hypothesis=hypothesis or f"{metric} changed between {old} and {new}",
                       labels=labels or (named[0], named[1]), repo=checkout.source_repo())


@contextlib.contextmanager
def commit_specs(checkout: GitCheckout, spec: ServerSpec, shas: Sequence[str], *, build: str | None,
                 build_timeout_s: float | None) -> Iterator[list[ServerSpec]]:
    """``spec`` at each of ``shas``, each from its own built worktree; the worktrees go on every way out."""
    worktrees: list[str] = []
    try:
        specs = []
        for sha in shas:
            worktrees.append(checkout.add_worktree(sha))
            built = build or spec.source_build()  # with_source: its per-commit build (a venv), if any
            if built:
                checkout.host.run(f"cd {quote_path(worktrees[-1])} && {built}", timeout_s=build_timeout_s)
            specs.append(spec_at_worktree(spec, checkout.repo_dir, worktrees[-1], sha))
        yield specs
    finally:
        for path in worktrees:
            checkout.remove_worktree(path)


def spec_at_worktree(spec: ServerSpec, repo_dir: str, worktree: str, sha: str) -> ServerSpec:
    """``spec`` running ``worktree`` at ``sha``: its source moved there (``with_source``), else its paths."""
    if spec.source is not None:
        return spec.at_checkout(worktree, sha)
    return dataclasses.replace(retarget(spec, repo_dir, worktree), commit=sha)


def require_checkout_paths(spec: ServerSpec, repo_dir: str) -> None:
    """Refuse a spec that never mentions ``repo_dir``: every worktree would run the same installed code."""
    probe = "/toolkit-worktree-probe"
    if retarget(spec, repo_dir, probe) == spec:
        raise InvalidFlag(
            f"the spec never mentions {repo_dir}: both commits would run the same installed code",
            evidence=[spec.command()],
            hint=f"run the checkout's code: spec.with_source('{repo_dir}') (SGLang: PYTHONPATH={repo_dir}/python; "
                 "vLLM: a per-commit venv with its precompiled wheel)",
        )
