"""Does the old commit show the same baseline? Two commits, A/B-tested from temporary git worktrees.

The seed ruled out a ``git pull`` by re-measuring the old commit; by hand that moves the user's
checkout. Here each commit has its own worktree, and the spec's paths (``workdir``, ``PYTHONPATH``,
``--source-dir``) are rewritten from ``repo_dir`` to it; a spec that never mentions ``repo_dir``
would run the same installed code on both sides, so it is refused.
"""

from __future__ import annotations

import dataclasses

from toolkit.benchmark.labels import metric_label, shorten_words
from toolkit.errors import InvalidFlag
from toolkit.host.host import Host
from toolkit.host.shell import quote_path
from toolkit.moves.abtest import ABResult, compare
from toolkit.moves.abverdict import Expectation
from toolkit.moves.bisect.checkout import GitCheckout
from toolkit.moves.plan import Plan
from toolkit.server.spec import FlagValue, ServerSpec

__all__ = ["compare_commits", "retarget", "require_checkout_paths"]


def _moved(value: str, old: str, new: str) -> str:
    """``value`` with each ``:``-separated path under ``old`` moved under ``new`` (PYTHONPATH-style lists too)."""
    root = old.rstrip("/")
    parts = []
    for part in value.split(":"):
        if part == root or part.startswith(root + "/"):
            part = new.rstrip("/") + part[len(root):]
        parts.append(part)
    return ":".join(parts)


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


def compare_commits(
    host: Host,
    repo_dir: str,
    a: str,
    b: str,
    *,
    spec: ServerSpec,
    plan: Plan | None = None,
    build: str | None = None,
    kind: str = "commit",
    title: str | None = None,
    hypothesis: str | None = None,
    labels: tuple[str, str] | None = None,
    expect: Expectation | None = "changed",
) -> ABResult:
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
    subjects = [checkout.subject(sha) for sha in shas]
    require_checkout_paths(spec, repo_dir)
    worktrees: list[str] = []
    try:
        specs = []
        for sha in shas:
            worktrees.append(checkout.add_worktree(sha))
            built = build or spec.source_build()  # with_source: its per-commit build (a venv), if any
            if built:
                host.run(f"cd {quote_path(worktrees[-1])} && {built}", timeout_s=plan.build_timeout_s)
            specs.append(spec_at_worktree(spec, repo_dir, worktrees[-1], sha))
        named = [f"{sha[:8]} {shorten_words(subject, 40)}" for sha, subject in zip(shas, subjects, strict=True)]
        return compare(
            host, specs[0], specs[1], plan=plan, kind=kind, title=title or f"commit {shas[1][:8]} vs {shas[0][:8]}",
            hypothesis=hypothesis or f"{metric_label(plan.metric)} changed between {shas[0][:8]} and {shas[1][:8]}",
            expect=expect, labels=labels or (named[0], named[1]), repo=checkout.source_repo(),
        )
    finally:
        for path in worktrees:
            checkout.remove_worktree(path)


def spec_at_worktree(spec: ServerSpec, repo_dir: str, worktree: str, sha: str) -> ServerSpec:
    """``spec`` running ``worktree`` at ``sha``: its source moved there (``with_source``), else its paths."""
    if spec.source is not None:
        return spec.at_checkout(worktree, sha)
    return dataclasses.replace(retarget(spec, repo_dir, worktree), commit=sha)


def require_checkout_paths(spec: ServerSpec, repo_dir: str) -> None:
    """Refuse a spec that never mentions ``repo_dir``: every worktree would run the same installed code.

    ``PYTHONPATH=<repo_dir>/python``, rewritten to each worktree, beats an editable install.
    """
    probe = "/toolkit-worktree-probe"
    if retarget(spec, repo_dir, probe) == spec:
        raise InvalidFlag(
            f"the spec never mentions {repo_dir}: both commits would run the same installed code",
            evidence=[spec.command()],
            hint=f"run the checkout's code: spec.with_source('{repo_dir}') (SGLang: PYTHONPATH={repo_dir}/python; "
                 "vLLM: a per-commit venv with its precompiled wheel)",
        )
