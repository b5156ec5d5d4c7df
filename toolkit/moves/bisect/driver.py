"""Run a performance bisection over one or several hosts, in rounds of probes side by side.

With H hosts each round probes H commits spread over the open range: N commits take ⌈log_{H+1} N⌉
rounds. Each host works in its own ``git worktree``, so your checkout never moves; the verdicts are
replayed into ``git bisect`` at the end, and git's conclusion checks ours.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from toolkit.benchmark import Load
from toolkit.errors import ToolkitError
from toolkit.host.host import Host
from toolkit.host.place import Target
from toolkit.journal import Journal
from toolkit.moves.bisect.checkout import GitCheckout
from toolkit.moves.bisect.gitparse import parse_rev_list
from toolkit.moves.bisect.judgement import Judgement, Noise, assess, pool_noise
from toolkit.moves.bisect.ledger import write_ledger
from toolkit.moves.bisect.planner import BisectState
from toolkit.moves.bisect.prober import Prober, record_verdict
from toolkit.moves.bisect.references import References, check_references
from toolkit.moves.bisect.result import BisectResult, NothingToBisect, Probe, ProbeRole
from toolkit.moves.bisect.worktrees import compare_commits, require_checkout_paths
from toolkit.moves.fan_out import HostPool, Hosts, Lane
from toolkit.moves.plan import Plan
from toolkit.moves.trial import make_bench_call
from toolkit.server.spec import ServerSpec

__all__ = ["perf_bisect", "compare_commits", "DEFAULT_BENCH"]

#: The seed's single-stream decode rate, unless the plan says otherwise.
DEFAULT_BENCH = Load(num_prompts=8, max_concurrency=1, input_len=128, output_len=128)


def perf_bisect(hosts: Hosts, repo_dir: str, *, good: str, bad: str, spec: ServerSpec,
                plan: Plan | None = None, threshold: float | None = None, relative_drop: float | None = None,
                max_repeats: int = 8, confidence: float = 0.99, build: str | None = None,
                launch_on: Target | None = None) -> BisectResult:
    """Find the commit between ``good`` and ``bad`` that made ``plan.metric`` regress, on one host or several.

    ``spec`` reaches the code through a path in ``repo_dir`` (the same on every host), rewritten to
    each worktree; ``launch_on`` launches on a ``SlurmTarget`` or ``ContainerTarget`` through a shared
    file system; ``plan``: the bench (default :data:`DEFAULT_BENCH`), ``repeats`` (default 2), journal.
    The ends are measured first (:class:`NothingToBisect` if they do not differ beyond noise even with
    ``max_repeats`` runs); the threshold is ``threshold``, else the good end degraded by
    ``relative_drop``, else halfway. ``build`` runs in the worktree (exit 125: skip). A probe measures
    more while its interval overlaps the threshold, up to ``max_repeats``; contradicting verdicts are
    measured once more, then reported rather than guessed.

    >>> result = perf_bisect([gpu_a, gpu_b, gpu_c], "/src/sglang", good="v0.5.8", bad="main",  # doctest: +SKIP
    ...                      spec=ServerSpec.simulator(tp=8, source_dir="/src/sglang"),
    ...                      plan=tk.Plan(bench=tk.Load(num_prompts=4, output_len=64)))
    >>> result.first_bad_subject, result.rounds, round(result.confidence, 3)  # doctest: +SKIP
    ('[Perf] Use NCCL all-reduce for small batches instead of the custom all-reduce kernel', 3, 0.998)
    """
    plan = plan or Plan()
    repeats, metric, journal, progress = plan.repeats_or(2), plan.metric, plan.journal, plan.progress
    if not repeats <= max_repeats:
        raise ValueError(f"need 1 <= repeats <= max_repeats, got repeats={repeats}, max_repeats={max_repeats}")
    lower = not plan.higher_better()
    started = time.monotonic()
    pool = HostPool(hosts, spec_for_host=plan.spec_for_host)
    if launch_on is not None and len(pool.hosts) > 1:
        raise ValueError("launch_on= launches every probe on one target: pass one host (its login host) with it")
    require_checkout_paths(spec, repo_dir)
    login_hosts = [host for host in pool.hosts if isinstance(host, Host)]
    if len(login_hosts) != len(pool.hosts):
        raise TypeError("perf_bisect checks commits out on Host objects (over SSH); to run its probes in a Slurm "
                        "job or a container, pass the login host and launch_on=the target")
    checkouts = [GitCheckout(host, repo_dir) for host in login_hosts]
    notes = _tidy(checkouts)
    good_sha, bad_sha = checkouts[0].resolve(good), checkouts[0].resolve(bad)
    if good_sha == bad_sha or not checkouts[0].is_ancestor(good_sha, bad_sha):
        raise ToolkitError(f"good {good} ({good_sha[:12]}) is not an older ancestor of bad {bad} ({bad_sha[:12]})",
                           hint="pass the older, fast commit as good= and the newer, slow one as bad=")
    for checkout in checkouts[1:]:  # resolve raises naming a host that lacks the history
        checkout.resolve(good_sha), checkout.resolve(bad_sha)
    commits = parse_rev_list(checkouts[0].git("rev-list", "--first-parent", "--reverse", f"{good_sha}..{bad_sha}").stdout)
    subjects = checkouts[0].subjects(good_sha, bad_sha)
    order = {good_sha: 0, **{sha: i + 1 for i, sha in enumerate(commits)}}
    worktrees: list[GitCheckout] = []
    try:
        for checkout in checkouts:
            worktrees.append(GitCheckout(checkout.host, checkout.add_worktree(good_sha, owned=True)))
        bench_call = make_bench_call(plan.bench or DEFAULT_BENCH, progress=False, alone=plan.bench_alone)
        prober = Prober(spec, repo_dir, worktrees, metric, repeats, max_repeats, build, plan.build_timeout_s,
                        bench_call, journal, plan.timeout_s, plan.log_dir, subjects, order, launch_on=launch_on,
                        repo=checkouts[0].source_repo())
        run = _Rounds(pool, prober, commits, good_sha, bad_sha, progress)
        with pool.progress("bisect", unit="commit", enabled=progress):
            refs = run.ends(journal, threshold=threshold, relative_drop=relative_drop, lower_is_better=lower,
                            min_effect=plan.min_effect)

            def judge(samples: list[float]) -> Judgement:
                return assess(samples, good_ref=refs.good_ref, bad_ref=refs.bad_ref, threshold=threshold,
                              relative_drop=relative_drop, lower_is_better=lower, noise=run.noise(),
                              threshold_se=refs.threshold_se, confidence=confidence)

            run.probe_until_done(judge)
        ledger = write_ledger(worktrees[0], good_sha, bad_sha,
                              [(sha, verdict, order[sha]) for sha, verdict in run.state.history])
    finally:
        for checkout, worktree in zip(checkouts, worktrees, strict=False):
            checkout.remove_worktree(worktree.repo_dir)
    outcome = run.state.outcome()
    first_bad = outcome.first_bad if run.contradiction is None else None
    git_first_bad = checkouts[0].resolve(ledger.step.commit) if ledger.step and ledger.step.kind == "done" \
        and ledger.step.commit else None
    if first_bad is not None and git_first_bad not in (None, first_bad):
        notes.append(f"git and the planner disagree: git says {git_first_bad[:12]}, the planner {first_bad[:12]}")
    why, advice = run.explain(outcome.candidates) if first_bad is None else (None, None)
    sure = run.confidence(refs) if run.contradiction is None else None
    result = BisectResult(metric, good_sha, bad_sha, first_bad, outcome.candidates, tuple(run.probes),
                          refs.threshold, refs.margin, lower, ledger.log, tuple(notes + run.notes),
                          time.monotonic() - started, tuple(subjects.items()), sure, run.round_no,
                          tuple(h.name for h in pool.hosts), why, advice, git_first_bad)
    if journal is not None:
        journal.note("bisect result", f"{result.summary()}\n\n{ledger.log}")
    return result


def _tidy(checkouts: Sequence[GitCheckout]) -> list[str]:
    """Remove what a dead kernel left (probe worktrees, an old-style bisect in the checkout); warn about it."""
    notes = []
    for checkout in checkouts:
        notes += checkout.remove_leftover_worktrees()
        left = checkout.leftover()  # an older driver's bisection in the checkout itself
        dead = left is not None and left.owner_pid is not None and not left.owner_alive()
        if dead and (message := checkout.recover()) is not None:
            notes.append(message)
    for message in notes:
        warnings.warn(message, stacklevel=3)
    return notes


class _Rounds:
    """The rounds of one bisection: the ends, then probes side by side, rechecks, and the account of it."""

    def __init__(self, pool: HostPool, prober: Prober, commits: Sequence[str], good: str, bad: str,
                 progress: bool) -> None:
        self.pool, self.prober, self.commits, self.good, self.bad = pool, prober, commits, good, bad
        self.progress = progress
        self.state = BisectState.start(commits, good=good)
        self.probes: list[Probe] = []
        self.latest: dict[str, Probe] = {}  # the verdict that counts, per commit
        self.rechecked: set[str] = set()
        self.contradiction: str | None = None
        self.notes: list[str] = []
        self.round_no = 0
        self.references: tuple[Probe, ...] = ()

    def noise(self) -> Noise:
        """The run-to-run spread pooled over the ends and every commit judged so far."""
        return pool_noise([p.samples for p in (*self.references, *self.latest.values())])

    def _round(self, picks: Sequence[tuple[str, ProbeRole]], round_no: int, judge: Any,
               runs: int | None = None) -> list[Probe]:
        """Measure ``picks`` side by side, one per host (in turn when there are more); the probes in pick order."""
        lanes = len(self.pool.hosts)
        queues = [list(range(lane, len(picks), lanes)) for lane in range(lanes)]

        def work(lane: Lane, i: int) -> Probe:
            return self.prober.measure(lane, picks[i][0], picks[i][1], round_no, judge, runs)

        done = self.pool.run(queues, work, desc=f"round {round_no}", unit="commit", progress=self.progress,
                             stop_on_error=True)
        by_pick = {d.job: d for lane in done for d in lane}
        for d in by_pick.values():
            if d.error is not None:
                raise d.error
        probes = [p for i in range(len(picks)) if (p := by_pick[i].result) is not None]
        self.probes += sorted(probes, key=lambda p: p.probe)
        return probes

    def ends(self, journal: Journal | None, **judging: Any) -> References:
        """Measure the good and bad ends (again with the full budget while they look alike)."""
        picks: list[tuple[str, ProbeRole]] = [(self.good, "good_ref"), (self.bad, "bad_ref")]
        good, bad = self._round(picks, 0, None)
        try:
            try:
                refs = check_references(good, bad, metric=self.prober.metric, **judging)
            except NothingToBisect as exc:
                if not exc.could_resolve or self.prober.max_repeats <= self.prober.repeats:
                    raise
                self.notes.append(f"the ends looked alike after {self.prober.repeats} runs each ({exc.message}); "
                                  f"measured both again with {self.prober.max_repeats} runs")
                first = (good, bad)
                self.probes = [p for p in self.probes if p not in first]  # the journal keeps them
                good, bad = self._round(picks, 0, None, runs=self.prober.max_repeats)
                for old, new in zip(first, (good, bad), strict=True):
                    if (recorder := self.prober.steps.get(old.probe)) is not None:
                        recorder.set_verdict("inconclusive", note=f"measured again with {self.prober.max_repeats} "
                                             f"runs in step {new.step_id}: the ends looked alike")
                refs = check_references(good, bad, metric=self.prober.metric, **judging)
        except NothingToBisect as exc:  # the seed's "old commit, same baseline": worth keeping
            if journal is not None:
                journal.note("nothing to bisect", str(exc))
            raise
        self.references = refs.probes
        index = {p.probe: i for i, p in enumerate(self.probes)}
        for probe in refs.probes:  # their steps closed before both ends were known
            self.probes[index[probe.probe]] = probe
            if (recorder := self.prober.steps.get(probe.probe)) is not None:
                record_verdict(recorder, probe)
        return refs

    def probe_until_done(self, judge: Callable[[list[float]], Judgement]) -> None:
        hosts = len(self.pool.hosts)
        while True:
            recheck = [sha for sha in self._conflicting() if sha not in self.rechecked][:hosts]
            if self._conflicting() and not recheck:
                self.contradiction = self._describe_conflict()
                return
            picks: list[tuple[str, ProbeRole]] = [(sha, "recheck") for sha in recheck]
            if not recheck:
                picks += [(sha, "probe") for sha in self.state.next_commits(hosts)]
            if not picks:
                return
            self.round_no += 1
            self.rechecked.update(recheck)
            for probe in self._round(picks, self.round_no, judge, runs=self.prober.max_repeats if recheck else None):
                self.latest[probe.commit] = probe
            self._replan()

    def _conflicting(self) -> list[str]:
        """Commits whose verdicts cannot all be right: a good one newer than a bad one."""
        goods = [p for p in self.latest.values() if p.verdict == "good"]
        bads = [p for p in self.latest.values() if p.verdict == "bad"]
        if not goods or not bads or max(p.order for p in goods) < min(p.order for p in bads):
            return []
        first_bad, last_good = min(p.order for p in bads), max(p.order for p in goods)
        involved = [p for p in goods if p.order > first_bad] + [p for p in bads if p.order < last_good]
        return [p.commit for p in sorted(involved, key=lambda p: (p.confidence or 0.0, p.order))]

    def _replan(self) -> None:
        conflicting = set(self._conflicting())
        state = BisectState.start(self.commits, good=self.good)
        for probe in sorted(self.latest.values(), key=lambda p: p.probe):
            if probe.commit not in conflicting:
                state = state.apply(probe.commit, probe.verdict)
        self.state = state

    def _describe_conflict(self) -> str:
        involved = sorted((self.latest[sha] for sha in self._conflicting()), key=lambda p: p.order)
        return "; ".join(f"{p.commit[:10]} (#{p.order}) {p.verdict} at median {p.median:.4g}, "
                         f"confidence {p.confidence or 0:.3g}" for p in involved)

    def explain(self, candidates: Sequence[str]) -> tuple[str, str]:
        """Why there is no single first bad commit, and what to do."""
        if self.contradiction is not None:
            return (f"the verdicts contradict each other even after measuring them again: {self.contradiction}: a "
                    "newer commit is fast while an older one is slow",
                    "the regression may come and go (a revert, a flaky kernel choice) or the noise is beyond the "
                    "budget: raise max_repeats= or lengthen the plan's bench, or bisect each side of the contradiction on its "
                    "own with good=/bad= set to the commits above")
        skipped = [self.latest[c] for c in candidates if c in self.latest and self.latest[c].verdict == "skip"]
        errors = "; ".join(f"{p.commit[:10]}: {(p.error or p.reason)[:160]}" for p in skipped) or "no error recorded"
        return (f"only commits that could not be measured are left between the last good and the first bad one "
                f"({errors})",
                "the first bad commit is one of the candidates; fix what stops them (their errors above: a build, a "
                "start-up crash), or read their diffs; a build that exits 125 marks a commit untestable on purpose")

    def confidence(self, refs: References) -> float:
        """That the answer is right: the ends differ, and every verdict that placed it was right."""
        product = refs.confidence
        for probe in self.latest.values():
            if probe.verdict != "skip" and probe.commit not in set(self._conflicting()):
                product *= probe.confidence if probe.confidence is not None else 1.0
        return product
