"""Run a performance bisection on a host's checkout, and compare two commits; always put the checkout back.

The seed's first two moves were "an old commit gave the same baseline" (not a git pull:
:func:`compare_commits`) and, had it not, a bisection (:func:`perf_bisect`). Both are
slow loops of check out, build, launch, wait, benchmark, judge: the pure planner
(:mod:`~toolkit.moves.bisect.planner`) and judge (:mod:`~toolkit.moves.bisect.judgement`)
decide, this module only moves the checkout and the servers.

Each commit is one launch of ``spec`` measured ``repeats`` times by
:func:`toolkit.moves.run_launch`, so a bisection's journal steps hold the same evidence
as a sweep's: readiness, one run per repeat, the server's metric lines, decisive log lines.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from toolkit.benchmark import BenchResult
from toolkit.errors import (
    AuthenticationFailed,
    ChangedHostKey,
    CommandFailed,
    HostUnreachable,
    InvalidFlag,
    JournalError,
    PortInUse,
    ToolkitError,
    UnknownHostKey,
)
from toolkit.host.host import Host
from toolkit.host.place import Target
from toolkit.host.shell import quote_path
from toolkit.journal import Journal, StepRecorder
from toolkit.moves.bisect.checkout import GitCheckout
from toolkit.moves.bisect.gitparse import CommitVerdict, parse_bisect_step, parse_rev_list
from toolkit.moves.bisect.judgement import Judgement, assess
from toolkit.moves.bisect.planner import BisectState, expected_probes
from toolkit.moves.bisect.references import References, check_references
from toolkit.moves.bisect.result import BisectResult, NothingToBisect, Probe, ProbeRole
from toolkit.moves.bisect.worktrees import compare_commits
from toolkit.moves.trial import make_bench_call, run_launch
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec
from toolkit.stats import metric_direction

__all__ = ["perf_bisect", "compare_commits", "DEFAULT_BENCH"]

#: The benchmark of each probe unless ``bench=`` says otherwise: the seed's single-stream decode rate.
DEFAULT_BENCH: Mapping[str, Any] = MappingProxyType(
    {"num_prompts": 8, "max_concurrency": 1, "input_len": 128, "output_len": 128}
)
# Errors that say "this environment cannot run anything", not "this commit cannot be measured":
# they stop the bisection instead of skipping a commit.
_FATAL_ERRORS = (
    PortInUse,
    InvalidFlag,
    CommandFailed,
    HostUnreachable,
    AuthenticationFailed,
    UnknownHostKey,
    ChangedHostKey,
    JournalError,
)
BUILD_SKIP_EXIT = 125  # as `git bisect run`: this commit cannot be built, skip it
_JOURNAL_VERDICT = {"bad": "confirmed", "good": "refuted", "skip": "inconclusive"}


@dataclasses.dataclass
class _Prober:
    """Measures one commit of the checkout: build, launch, wait, benchmark ``repeats`` times, stop."""

    host: Host
    checkout: GitCheckout
    spec: ServerSpec
    metric: str
    repeats: int
    build: str | None
    build_timeout_s: float | None
    bench_call: Callable[[Server], Any]
    journal: Journal | None
    timeout_s: float
    log_dir: str | None
    subjects: dict[str, str]
    order: dict[str, int]
    count: int = 0
    steps: dict[int, StepRecorder] = dataclasses.field(default_factory=dict)
    launch_on: Target | None = None  # where servers run, when not on the checkout's host (a Slurm job, a container)

    def measure(self, sha: str, role: ProbeRole, judge: Callable[[list[float]], Judgement] | None) -> Probe:
        """One commit, as checked out now; ``judge`` None for the reference ends (judged together later)."""
        started = time.monotonic()
        subject = self.subjects.get(sha) or self.checkout.subject(sha)
        spec = dataclasses.replace(self.spec, commit=sha)
        samples: list[float] = []
        error: str | None = None
        with self._step(sha, subject, role, spec) as step:
            try:
                self._build(sha)
                run_launch(
                    self.launch_on or self.host,
                    spec,
                    step=step,
                    benches=self.repeats,
                    bench_call=self.bench_call,
                    timeout_s=self.timeout_s,
                    log_dir=self.log_dir,
                    run_label=sha[:8],
                    on_run=lambda outcome: samples.append(_sample(outcome.result, self.metric)),
                )
            except _FATAL_ERRORS:
                raise
            except ToolkitError as exc:  # ServerDied, ReadinessTimeout, no request completed, ...
                error = f"{type(exc).__name__}: {exc.message}" + (f" [{exc.evidence[-1].strip()}]" if exc.evidence else "")
            judgement = judge(samples) if judge is not None and error is None else None
            verdict: CommitVerdict = judgement.verdict if judgement is not None else "skip"
            reason = judgement.reason if judgement is not None else (error or "reference: judged with its pair")
            probe = Probe(
                self.count, self.order.get(sha, -1), sha, subject, role, tuple(samples), verdict, reason,
                error, judgement, None if step is None else step.id, time.monotonic() - started,
            )
            self.count += 1
            if step is not None:
                self.steps[probe.probe] = step
                if judge is not None or error is not None:
                    record_verdict(step, probe)
        return probe

    def _build(self, sha: str) -> None:
        build = self.build or self.spec.source_build()  # with_source: its per-commit build, if any
        if not build:
            return
        result = self.host.run(
            f"cd {quote_path(self.checkout.repo_dir)} && {build}", check=False, timeout_s=self.build_timeout_s
        )
        if result.exit_code == BUILD_SKIP_EXIT:
            raise ToolkitError(f"the build of {sha[:12]} exited {BUILD_SKIP_EXIT}: it cannot be tested (skip)",
                               evidence=(result.stderr or result.stdout).splitlines()[-8:])
        if not result.ok:
            raise CommandFailed(
                f"the build command failed on {sha[:12]} in {self.checkout.repo_dir} on {self.host.name} "
                f"(exit {result.exit_code}); the bisection stopped",
                host=self.host.name, command=result.command, exit_code=result.exit_code,
                stderr=result.stderr or result.stdout,
                hint=f"fix the build, or make it exit {BUILD_SKIP_EXIT} for a commit that cannot be built "
                     "(it is then skipped, as with `git bisect run`)",
            )

    @contextlib.contextmanager
    def _step(self, sha: str, subject: str, role: ProbeRole, spec: ServerSpec) -> Iterator[StepRecorder | None]:
        if self.journal is None:
            yield None
            return
        what = {"good_ref": "good end", "bad_ref": "bad end", "probe": "probe"}[role]
        hypothesis = {
            "good_ref": f"{self.metric} at the good end is the fast reference",
            "bad_ref": f"{self.metric} at the bad end is the slow reference",
            "probe": f"the regression is already in {sha[:8]}",
        }[role]
        with self.journal.step("bisect_probe", f"{what} {sha[:8]} {subject}"[:120], hypothesis=hypothesis,
                               spec=spec, host=self.launch_on or self.host) as step:
            yield step


def record_verdict(step: StepRecorder, probe: Probe) -> None:
    """A probe's verdict in its journal step: a note with the numbers, and confirmed/refuted/inconclusive."""
    samples = ", ".join(f"{x:.4g}" for x in probe.samples) or "none"
    step.note(f"{probe.verdict}: {probe.reason} (samples: {samples})")
    if probe.role == "probe":
        step.set_verdict(_JOURNAL_VERDICT[probe.verdict], note=probe.reason)  # type: ignore[arg-type]
    else:
        expected = "good" if probe.role == "good_ref" else "bad"
        step.set_verdict("confirmed" if probe.verdict == expected else "refuted", note=probe.reason)
    if probe.error is not None:
        step.finish("failed", error=probe.error)


def _sample(result: BenchResult, metric: str) -> float:
    value = result.summary.get(metric)
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def perf_bisect(
    host: Host,
    repo_dir: str,
    *,
    good: str,
    bad: str,
    spec: ServerSpec,
    metric: str = "output_throughput",
    threshold: float | None = None,
    relative_drop: float | None = None,
    lower_is_better: bool | None = None,
    min_effect: float = 0.01,
    repeats: int = 2,
    build: str | None = None,
    build_timeout_s: float | None = 3600.0,
    bench: Mapping[str, Any] | Callable[[Server], Any] = DEFAULT_BENCH,
    journal: Journal | None = None,
    timeout_s: float = 900.0,
    progress: bool = True,
    log_dir: str | None = None,
    launch_on: Target | None = None,
) -> BisectResult:
    """Find the commit between ``good`` and ``bad`` that made ``metric`` regress, with ``git bisect`` on ``host``.

    ``spec`` must run the code checked out in ``repo_dir`` (``workdir=``, ``PYTHONPATH``, an
    editable install, the simulator's ``--source-dir``); the driver only sets its ``commit``.
    First the good and bad ends are measured; if they do not differ beyond noise (Welch's
    interval, and at least ``min_effect`` relative) or the threshold,
    :class:`~toolkit.moves.bisect.NothingToBisect` says so with the numbers. The threshold is
    ``threshold`` (metric units), else the good end degraded by ``relative_drop``, else
    halfway between the ends; ``lower_is_better`` follows the metric's name. Then
    git picks each commit; ``build`` (a shell command, run in ``repo_dir``) builds it (exit
    125: cannot be built, skip; any other failure stops); the server is launched, waited
    for (``timeout_s``), benchmarked ``repeats`` times and stopped; the pure judge says
    good, bad or skip (a server that does not start is a skip, recorded with its error).
    Each commit is a ``bisect_probe`` journal step. Whatever happens (an error, Ctrl-C), the
    server is stopped and the checkout is reset to the branch it was on; a bisection left
    over by a dead kernel is reset (with a warning) before a new one starts. ``launch_on``
    launches the servers elsewhere than ``host`` (a ``SlurmTarget`` from that login host, a
    ``ContainerTarget``), reading the checkout through a file system both share.

    >>> result = perf_bisect(Host.local(), "/src/sglang", good="v0.5.8", bad="main",  # doctest: +SKIP
    ...                      spec=ServerSpec.simulator(tp=8, source_dir="/src/sglang"),
    ...                      bench={"num_prompts": 4, "output_len": 64})
    >>> result.first_bad_subject, result.probe_count  # doctest: +SKIP
    ('[Perf] Use NCCL all-reduce for small batches instead of the custom all-reduce kernel', 4)
    """
    from tqdm.auto import tqdm

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    lower = _direction(metric, lower_is_better)
    started = time.monotonic()
    checkout = GitCheckout(host, repo_dir)
    notes: list[str] = []
    if (message := checkout.recover()) is not None:
        warnings.warn(message, stacklevel=2)
        notes.append(message)
    checkout.require_clean()
    good_sha, bad_sha = checkout.resolve(good), checkout.resolve(bad)
    if good_sha == bad_sha or not checkout.is_ancestor(good_sha, bad_sha):
        raise ToolkitError(f"good {good} ({good_sha[:12]}) is not an older ancestor of bad {bad} ({bad_sha[:12]})",
                           hint="pass the older, fast commit as good= and the newer, slow one as bad=")
    commits = parse_rev_list(checkout.git("rev-list", "--reverse", f"{good_sha}..{bad_sha}").stdout)
    subjects = checkout.subjects(good_sha, bad_sha)
    order = {good_sha: 0, **{sha: i + 1 for i, sha in enumerate(commits)}}
    state = BisectState.start(commits, good=good_sha)
    prober = _Prober(host, checkout, spec, metric, repeats, build, build_timeout_s,
                     make_bench_call(bench, progress=False), journal, timeout_s, log_dir, subjects, order,
                     launch_on=launch_on)
    bar = tqdm(total=2 + expected_probes(len(commits)), desc="bisect", unit="commit", disable=not progress)
    probes: list[Probe] = []
    try:
        checkout.start_bisect()
        refs = _measure_ends(prober, checkout, probes, bar, good_sha, bad_sha, journal, threshold=threshold,
                             relative_drop=relative_drop, lower_is_better=lower, min_effect=min_effect)

        def judge(samples: list[float]) -> Judgement:
            return assess(samples, good_ref=refs.good_ref, bad_ref=refs.bad_ref, threshold=threshold,
                          relative_drop=relative_drop, lower_is_better=lower)

        checkout.git("bisect", "bad", bad_sha)
        step = parse_bisect_step(_output(checkout.git("bisect", "good", good_sha)))
        while step.kind == "next" and step.commit is not None:
            sha = checkout.resolve(step.commit)
            bar.set_postfix_str(f"{sha[:8]} ({step.revisions_left} left)")
            probe = prober.measure(sha, "probe", judge)
            probes.append(probe)
            if sha in order:  # git may test a merge base outside GOOD..BAD: the planner has no say there
                state = _apply(state, probe, probes)
            if probe.verdict == "skip":
                bar.total += 1
            bar.update(1)
            step = parse_bisect_step(_output(checkout.git("bisect", probe.verdict, sha, ok=(0, 2))))
        git_log = checkout.git("bisect", "log").stdout
    except BaseException as exc:
        try:  # the checkout goes back whatever happened; a failure to do so must not hide why we stopped
            checkout.end_bisect()
        except Exception as cleanup:
            exc.add_note(f"and the checkout could not be reset: {cleanup}")
        raise
    else:
        checkout.end_bisect()
    finally:
        bar.close()
    first_bad = checkout.resolve(step.commit) if step.kind == "done" and step.commit else None
    ours = state.outcome()
    if first_bad is not None and ours.first_bad not in (None, first_bad):
        notes.append(f"git and the planner disagree: git says {first_bad[:12]}, the planner {ours.first_bad[:12]}")
    result = BisectResult(
        metric, good_sha, bad_sha, first_bad, (first_bad,) if first_bad else step.candidates, tuple(probes),
        refs.threshold, refs.margin, lower, git_log, tuple(notes), time.monotonic() - started,
        tuple(subjects.items()),
    )
    if journal is not None:
        journal.note("bisect result", f"{result.summary()}\n\n{git_log}")
    return result


def _measure_ends(
    prober: _Prober,
    checkout: GitCheckout,
    probes: list[Probe],
    bar: Any,
    good_sha: str,
    bad_sha: str,
    journal: Journal | None,
    **judging: Any,
) -> References:
    """Measure the good and bad ends and check that there is something to bisect between them."""
    for sha, role in ((good_sha, "good_ref"), (bad_sha, "bad_ref")):
        bar.set_postfix_str(f"{role.split('_')[0]} end {sha[:8]}")
        checkout.checkout(sha)
        probes.append(prober.measure(sha, role, None))  # type: ignore[arg-type]
        bar.update(1)
    try:
        refs = check_references(probes[0], probes[1], metric=prober.metric, **judging)
    except NothingToBisect as exc:  # the seed's "old commit, same baseline": worth keeping
        if journal is not None:
            journal.note("nothing to bisect", str(exc))
        raise
    probes[:2] = refs.probes
    for probe in probes[:2]:  # their steps closed before both ends were known
        if (recorder := prober.steps.get(probe.probe)) is not None:
            record_verdict(recorder, probe)
    return refs


def _apply(state: BisectState, probe: Probe, probes: list[Probe]) -> BisectState:
    try:
        return state.apply(probe.commit, probe.verdict)
    except ValueError as exc:  # a good commit after a bad one: the metric is too noisy to bisect
        raise ToolkitError(str(exc), evidence=[_evidence(p) for p in probes],
                           hint="raise repeats= or lengthen bench= so that each probe is steadier") from None


def _direction(metric: str, lower_is_better: bool | None) -> bool:
    if lower_is_better is not None:
        return lower_is_better
    higher = metric_direction(metric)
    if higher is None:
        raise ValueError(f"cannot tell whether more {metric} is better; pass lower_is_better=True or False")
    return not higher


def _output(result: Any) -> str:
    return f"{result.stdout}\n{result.stderr}"


def _evidence(probe: Probe) -> str:
    median = statistics.median(probe.samples) if probe.samples else math.nan
    return f"{probe.commit[:10]} {probe.verdict}: median {median:.4g} ({probe.reason})"



