"""``tk.diagnose(host, fast, slow)``: from "B is slower than A" to the ranked reasons why, with evidence.

Measure both sides alike (A B B A; within noise it stops there), gather what each showed, profile one
launch of each, rank the differences by their share of the gap, propose the next experiment.

>>> diagnosis = tk.diagnose(host, fast=base, slow=eagle, plan=tk.Plan(repeats=3, journal=journal))  # doctest: +SKIP
>>> diagnosis.top.title  # doctest: +SKIP
'the speculative verify step runs outside CUDA graphs on the slow side (launch-bound)'
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from toolkit.benchmark import Load
from toolkit.benchmark import bench as run_bench
from toolkit.engines import ReleaseFlags, resolve_profile
from toolkit.journal import Journal, StepRecorder
from toolkit.moves.abtest import compare
from toolkit.moves.abverdict import ab_verdict
from toolkit.moves.diagnose.analyse import Side, SideEvidence, gather_differences, resolved_values
from toolkit.moves.diagnose.environment import CodeRange
from toolkit.moves.diagnose.gather import DEFAULT_ENV, SideGatherer
from toolkit.moves.diagnose.profile_gap import ProfileDigest, digest_profile, profiled_gap_ms
from toolkit.moves.diagnose.proposal import propose
from toolkit.moves.diagnose.ranking import Gap, rank
from toolkit.moves.diagnose.result import Diagnosis
from toolkit.moves.fan_out import HostPool, Hosts
from toolkit.moves.plan import Plan
from toolkit.moves.profile import profile, with_profiling
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec
from toolkit.stats import compare_samples, metric_direction

__all__ = ["diagnose", "diagnosis_dir", "PROFILE_BENCH"]

PROFILE_BENCH = Load(num_prompts=2, max_concurrency=1, input_len=64, output_len=32)
_MIN_EFFECT = 0.02  # a gap under 2% of the fast side is noise for a diagnosis, whatever the interval says
_MORE_ROUNDS = 2  # extra rounds when the gap looks large but its interval still includes zero


def diagnosis_dir(journal: Journal) -> Path:
    """``eagle3.sqlite`` -> ``eagle3.diagnoses/`` beside it."""
    return journal.path.parent / f"{journal.path.stem}.diagnoses"


def diagnose(hosts: Hosts, fast: ServerSpec, slow: ServerSpec, *, plan: Plan | None = None,
             profile_bench: Load | None = PROFILE_BENCH, env: Sequence[str] = DEFAULT_ENV,
             code: CodeRange | None = None) -> Diagnosis:
    """Measure ``fast`` and ``slow`` alike, gather every difference, rank them by the share of the gap, propose.

    ``plan.repeats``: runs per side and round (default 3, at least 2); a gap under 2 % is noise here
    whatever ``plan.min_effect`` says. ``profile_bench``: profiled on each side (None: no profile);
    ``env``: variables read on every rank (the specs' own are added); ``code``: from :func:`diagnose_commits`.
    """
    plan = plan or Plan()
    repeats, journal = plan.repeats_or(3), plan.journal
    if repeats < 2:
        raise ValueError(f"repeats must be >= 2: a diagnosis needs the noise of each side to tell a gap from it, "
                         f"got {repeats}")
    started = time.monotonic()
    apart: dict[Side, str] = {"fast": fast.describe_apart(slow), "slow": slow.describe_apart(fast)}
    labels: dict[Side, str] = {side: f"{side}: {text}" for side, text in apart.items()}
    specs: dict[Side, ServerSpec] = {"fast": dataclasses.replace(fast, label=labels["fast"]),
                                     "slow": dataclasses.replace(slow, label=labels["slow"])}
    names = tuple(dict.fromkeys([*env, *(n for s in (fast, slow) for n, _ in s.env)]))
    gatherer = SideGatherer(plan.bench, {label: side for side, label in labels.items()}, env=names)
    costs: dict[str, float] = {}
    step, recorded = None, False
    if journal is not None:  # the step exists before the first launch: a failure is recorded with its evidence
        step = journal.step("diagnosis", f"diagnosis: why is {apart['slow']} slower than {apart['fast']}?",
                            spec=slow, host=hosts)
    try:
        with _timed(costs, "measure"):
            gap = _measure(hosts, specs, labels, gatherer, plan.replace(repeats=repeats))
        with _timed(costs, "record"):
            if step is not None:
                recorded = True
                gatherer.record_runs(step, labels)
        digests: list[ProfileDigest] = []
        if gap.beyond_noise and profile_bench is not None:
            with _timed(costs, "profile"):
                digests = [_profile_side(hosts, specs[side], side, profile_bench, journal, step, plan.timeout_s)
                           for side in ("fast", "slow")]
        sides = gatherer.sides
        with _timed(costs, "rank"):
            diagnosis = _diagnosis(labels, gap, sides["fast"], sides["slow"], digests, code,
                                   slow.engine, None if step is None else step.id, costs)
        if step is not None:
            with _timed(costs, "record"):
                _record(diagnosis, journal, step)  # type: ignore[arg-type]
    except BaseException as exc:
        if step is not None:
            if not recorded:  # the runs that finished before the failure are kept with it
                try:
                    gatherer.record_runs(step, labels)
                except Exception as journal_exc:
                    exc.add_note(f"the journal could not store the diagnosis's runs: {journal_exc}")
            step.__exit__(type(exc), exc, exc.__traceback__)
        raise
    if step is not None:
        step.finish("done")
    costs["total"] = time.monotonic() - started
    return diagnosis


@contextlib.contextmanager
def _timed(costs: dict[str, float], phase: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        costs[phase] = costs.get(phase, 0.0) + time.monotonic() - started


def _measure(hosts: Hosts, specs: Mapping[Side, ServerSpec], labels: Mapping[Side, str], gatherer: SideGatherer,
             plan: Plan) -> Gap:
    """A B B A rounds until the gap is beyond noise, or surely not worth more rounds.

    A gap past ``_MIN_EFFECT`` whose interval still includes zero (a busy machine's one slow run) earns
    up to ``_MORE_ROUNDS`` more rounds; every run of both sides is pooled (Welch).
    """
    metric = plan.metric
    for _ in range(1 + _MORE_ROUNDS):
        compare(hosts, specs["fast"], specs["slow"],
                plan=plan.replace(bench=gatherer, journal=None, min_effect=_MIN_EFFECT), expect=None,
                labels=(labels["fast"], labels["slow"]), title=f"diagnosis: {labels['slow']} vs {labels['fast']}")
        values = {side: [v for result, _ in gatherer.sides[side].runs
                         if isinstance(v := result.summary.get(metric), int | float) and not math.isnan(v)]
                  for side in ("fast", "slow")}
        direction = metric_direction(metric)
        comparison = compare_samples(values["fast"], values["slow"], higher_is_better=direction is not False)
        verdict, _ = ab_verdict(comparison, _MIN_EFFECT)
        large = not math.isnan(comparison.ratio) and abs(comparison.ratio - 1.0) >= _MIN_EFFECT
        if verdict != "within_noise" or not large:
            break
    return Gap.from_throughput(metric, comparison.mean_a, comparison.mean_b, (comparison.ci_low, comparison.ci_high),
                               beyond_noise=verdict != "within_noise")


def _profile_side(hosts: Hosts, spec: ServerSpec, side: Side, bench: Load, journal: Journal | None,
                  step: StepRecorder | None, timeout_s: float) -> ProfileDigest:
    """One launch of ``spec`` with a profile over ``bench``: its kernels per output token."""
    host = HostPool(hosts).hosts[0]
    launched = with_profiling(spec) if spec.engine == "vllm" else spec
    with contextlib.ExitStack() as stack:
        out_dir = None if journal is not None else stack.enter_context(tempfile.TemporaryDirectory(prefix="diagnose-"))
        with launch(host, launched) as server:
            server.wait_ready(timeout_s=timeout_s)
            run_bench(server, bench.replace(num_prompts=1), progress=False)  # warm-up, outside the window
            with profile(server, label=f"{side} side", journal=journal, step=step, out_dir=out_dir) as capture:
                result = run_bench(server, bench, progress=False)
        if capture.result is None:
            raise RuntimeError(f"the {side} side's profile returned no result")
        tokens = result.summary.get("total_output_tokens")
        return digest_profile(capture.result.label, capture.result.calls(),
                              output_tokens=int(tokens) if isinstance(tokens, int | float) and not math.isnan(tokens)
                              else 0)


def _release_flags(engine: str, version: str | None) -> ReleaseFlags | None:
    if engine not in ("sglang", "vllm") or version is None:
        return None
    return resolve_profile(engine, version).profile.flags(version)


def _diagnosis(labels: Mapping[Side, str], gap: Gap, fast: SideEvidence, slow: SideEvidence,
               digests: Sequence[ProfileDigest], code: CodeRange | None, engine: str, step_id: int | None,
               costs: Mapping[str, float]) -> Diagnosis:
    version = slow.version or fast.version
    if not gap.beyond_noise:
        return Diagnosis(labels["fast"], labels["slow"], gap, (), (), version, step_id, {}, costs)
    if len(digests) == 2:
        gap = dataclasses.replace(gap, profiled_ms=profiled_gap_ms(digests[0], digests[1]))
    differences = gather_differences(fast, slow, profiles=digests,
                                     changed_files=code.changed_files if code is not None else ())
    reasons = rank(differences, gap)
    flags = _release_flags(engine, version)
    slow_config = resolved_values(slow)
    proposals = tuple(p for r in reasons[:3]
                      if (p := propose(r, engine=engine, flags=flags, slow_config=slow_config,
                                       commits=(fast.commit, slow.commit),
                                       repo=code.repo_dir if code is not None else None)) is not None)
    profiles = dict(zip(("fast", "slow"), digests, strict=False))
    return Diagnosis(labels["fast"], labels["slow"], gap, reasons, proposals, version, step_id, profiles, costs)


def _record(diagnosis: Diagnosis, journal: Journal, step: StepRecorder) -> None:
    folder = diagnosis_dir(journal) / f"step-{step.id}"
    diagnosis.write(folder)
    where = folder.relative_to(journal.path.parent) if folder.is_relative_to(journal.path.parent) else folder
    step.note(f"diagnosis: {where.as_posix()}\n{diagnosis.text()}")
