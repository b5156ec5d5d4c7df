"""What one engine release line does, as data: the nouns every engine profile is made of.

Each fact carries ``source``: the release it was read in and the file and line
("sglang 0.5.23 python/sglang/srt/entrypoints/engine.py:1898"), because a belief about an
engine that cannot be checked ends up wrong (issue 13: the toolkit said SGLang overwrites
a user's ``NCCL_CUMEM_ENABLE``, true only up to 0.5.4.post1). Pure: standard library only;
reading the packaged flag lists is the one file access, done lazily.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from toolkit.engines.flaglists import ReleaseFlags, load_release_flags
from toolkit.engines.versions import ReleaseRange, Version, parse_version

__all__ = [
    "Engine",
    "ProcessRole",
    "WriteWhen",
    "StartMethod",
    "EnvWrite",
    "EnvOutcome",
    "HealthAnswer",
    "HealthCheck",
    "Endpoint",
    "MetricNames",
    "EngineProfile",
]

Engine = Literal["sglang", "vllm", "transformers"]
# Roles as toolkit.envcheck.roles.Role spells them.
ProcessRole = Literal["server", "worker", "engine_core", "api_server", "detokenizer", "dp_controller", "every"]
WriteWhen = Literal["always", "if_unset", "with_flag"]
# Who starts whom: a write in a process reaches the processes it starts afterwards.
_ANCESTORS: dict[str, tuple[str, ...]] = {
    "server": (),
    "api_server": ("server",),
    "engine_core": ("server", "api_server"),
    "worker": ("server", "api_server", "engine_core"),
    "detokenizer": ("server",),
    "dp_controller": ("server",),
}
# "threads": one process, its workers are threads (transformers serve's batching worker).
StartMethod = Literal["fork", "spawn", "threads"]
# What a health answer says, as the engine's code means it. "starting_or_dead": the engine answers
# the same for "not warmed up yet" and "stuck" (SGLang's 503): only the log tells them apart.
AnswerMeaning = Literal["ready", "starting", "dead", "starting_or_dead"]


@dataclass(frozen=True)
class EnvWrite:
    """The engine sets ``name`` in ``os.environ`` of ``process`` (in Python, after exec).

    ``when``: ``always`` overwrites whatever the user exported; ``if_unset`` keeps a
    user's value; ``with_flag`` writes only when ``flag`` is on the command line (and then
    overwrites). ``condition`` narrows it further in the engine's own terms ("TP > 1").
    ``visible_in`` lists the roles whose ``/proc/<pid>/environ`` shows the written value:
    only processes *exec'd* after the write (multiprocessing ``spawn``) do; the writer
    itself and forked children keep their exec-time environment there, so for them only
    NCCL's own ``NCCL_DEBUG=INFO`` echo tells what NCCL used. ``releases`` narrows the
    write to part of the profile's range when it appeared or vanished inside it.
    """

    name: str
    value: str
    process: ProcessRole
    when: WriteWhen
    source: str
    flag: str | None = None
    condition: str = ""
    visible_in: tuple[ProcessRole, ...] = ()
    releases: ReleaseRange | None = None

    def applies_to(self, version: Version | str | None) -> bool:
        """Whether this write exists in ``version`` (None: assume it does)."""
        return version is None or self.releases is None or version in self.releases

    def outcome(self, user_value: str | None, flags: Collection[str] = ()) -> str | None:
        """The value left after this write, given what the user exported and passed.

        A ``condition`` is not evaluated (it needs the engine's resolved config): the
        result is the value when the condition holds.

        >>> EnvWrite("NCCL_CUMEM_ENABLE", "0", "server", "if_unset", "x").outcome("1")
        '1'
        >>> EnvWrite("NCCL_CUMEM_ENABLE", "0", "server", "always", "x").outcome("1")
        '0'
        """
        if self.when == "always":
            return self.value
        if self.when == "if_unset":
            return self.value if user_value is None else user_value
        return self.value if self.flag in flags else user_value


@dataclass(frozen=True)
class EnvOutcome:
    """One variable after the engine started: what the user exported, what it became, and why."""

    name: str
    exported: str | None
    result: str | None
    writes: tuple[EnvWrite, ...]

    @property
    def overridden(self) -> bool:
        return self.exported is not None and self.result != self.exported


@dataclass(frozen=True)
class HealthAnswer:
    """One answer of a health endpoint and what it means, read in the engine's handler.

    ``body`` describes what the answer carries ("empty", or the JSON shape). When the
    engine puts the reason in a JSON field, ``reason_field`` names it, so a toolkit that
    reads the answer can quote it instead of waiting (transformers serve's
    ``{"status": "unhealthy", "reason": "cb_worker_dead"}``).
    """

    status: int
    meaning: AnswerMeaning
    source: str
    body: str = "empty"
    reason_field: str | None = None


_TRUE = frozenset({"1", "true", "yes", "y"})  # SGLang's EnvBool (0.5.23 python/sglang/srt/environ.py:143-150)


@dataclass(frozen=True)
class HealthCheck:
    """A health endpoint and what its answers mean.

    ``proves_generation``: a 200 means a token went through the scheduler (SGLang's
    ``/health_generate``), not only that HTTP is up. ``min_latency_s``: the shortest time
    a healthy answer takes (SGLang sleeps 1 s before it looks). ``timeout_s``: when the
    engine itself gives up and answers ``unhealthy_status``. ``unhealthy_when`` lists the
    engine's reasons for a non-200 answer, in its terms; ``body`` says what the answer
    carries (both engines send an empty body: there is no reason text to quote).
    """

    path: str
    method: Literal["GET", "POST"]
    proves_generation: bool
    min_latency_s: float
    source: str
    timeout_s: float | None = None
    unhealthy_status: int = 503
    unhealthy_when: tuple[str, ...] = ()
    body: str = "empty"
    answers: tuple[HealthAnswer, ...] = ()
    bypassed_by: tuple[str, ...] = ()  # variables that, true in the server's environment, make a 200 prove nothing

    def meaning(self, status: int) -> AnswerMeaning | None:
        """What ``status`` means on this endpoint (None: the engine's code does not answer it)."""
        return next((a.meaning for a in self.answers if a.status == status), None)

    def answer(self, status: int) -> HealthAnswer | None:
        return next((a for a in self.answers if a.status == status), None)


@dataclass(frozen=True)
class Endpoint:
    """An HTTP endpoint the release serves, and what must be set for it to exist.

    ``enabled_by`` is the flag or environment assignment without which the route is not
    registered (404), e.g. ``--enable-metrics`` or ``VLLM_SERVER_DEV_MODE=1``;
    ``body_fields`` the JSON fields the handler reads.
    """

    path: str
    methods: tuple[str, ...]
    source: str
    enabled_by: str | None = None
    body_fields: tuple[str, ...] = ()
    query_fields: tuple[str, ...] = ()
    output_env: str | None = None  # the variable naming where output goes
    note: str = ""


@dataclass(frozen=True)
class MetricNames:
    """Prometheus series names on ``/metrics`` (counters as exposed, with ``_total``)."""

    running: str
    waiting: str
    kv_cache_usage: str
    source: str
    spec_accepted_tokens: str | None = None
    spec_draft_tokens: str | None = None
    spec_drafts: str | None = None
    spec_accept_length: str | None = None  # a gauge the engine computes itself (SGLang)
    enabled_by: str | None = None


@dataclass(frozen=True)
class EngineProfile:
    """One release line of one engine: everything the toolkit believes about it, with sources.

    ``releases`` is the range the line covers; ``flag_releases`` the releases whose
    argument parser was captured into ``toolkit/engines/flags/`` (see
    ``scripts/engine_contracts.py``). ``flags(version)`` loads the capture nearest below
    ``version``. ``name`` reads like ``sglang-0.5.20+``.
    """

    engine: Engine
    name: str
    releases: ReleaseRange
    start_method: StartMethod
    start_method_source: str
    env_writes: tuple[EnvWrite, ...]
    health: tuple[HealthCheck, ...]
    ready_log_line: str
    ready_log_source: str
    models_path: str
    metrics_path: str | None  # None: the engine serves no /metrics (do not probe it)
    metrics: MetricNames | None
    flush_cache: Endpoint | None
    start_profile: Endpoint | None
    stop_profile: Endpoint | None
    api_key_flag: str | None  # None: the engine has no API key
    api_key_env: str | None
    api_key_source: str
    api_key_guarded: tuple[str, ...]  # path prefixes that need the key ...
    api_key_open: tuple[str, ...]  # ... except these, open even with a key set
    version_command: str
    version_source: str
    flag_releases: tuple[str, ...]
    allow_abbrev: bool = True
    notes: tuple[str, ...] = ()
    info_paths: tuple[str, ...] = ()  # server-info endpoints, newest first (SGLang /server_info, /get_server_info)
    version_path: str | None = None  # an endpoint answering {"version": ...} (vLLM /version)
    api_key_env_wins: bool = False  # both set: the server takes api_key_env's value (vLLM 0.6.x-0.8.2)
    _flags: dict[str, ReleaseFlags] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __contains__(self, version: object) -> bool:
        return version in self.releases

    def needs_api_key(self, path: str) -> bool:
        """Whether a server started with ``api_key_flag`` (or ``api_key_env``) rejects ``path`` without it.

        The answer is 401 ``{"error": "Unauthorized"}``; the key goes in ``Authorization: Bearer KEY``.
        """
        if self.api_key_flag is None or any(path.startswith(prefix) for prefix in self.api_key_open):
            return False
        return any(path.startswith(prefix) for prefix in self.api_key_guarded)

    def under_env(self, env: Mapping[str, str]) -> EngineProfile:
        """This profile for a server started with ``env``: a health endpoint that a variable there makes answer 200
        without generating (``HealthCheck.bypassed_by``) no longer proves generation.

        >>> from toolkit.engines import resolve_profile
        >>> p = resolve_profile("sglang", "0.5.23").profile
        >>> p.under_env({"SGLANG_DIAG_BYPASS_HEALTH_GENERATE": "1"}).readiness_check.proves_generation
        False
        >>> p.under_env({"SGLANG_DIAG_BYPASS_HEALTH_GENERATE": "0"}).readiness_check.proves_generation
        True
        """
        def bypassed(check: HealthCheck) -> bool:
            return any(env.get(name, "").strip().lower() in _TRUE for name in check.bypassed_by)
        if not any(bypassed(check) for check in self.health):
            return self
        return replace(self, health=tuple(replace(c, proves_generation=False) if bypassed(c) else c for c in self.health))

    @property
    def readiness_check(self) -> HealthCheck:
        """The health endpoint that says the most: one that proves generation, else the first listed."""
        return next((h for h in self.health if h.proves_generation), self.health[0])

    def flags(self, version: Version | str | None = None) -> ReleaseFlags:
        """The captured flag list for ``version`` (the newest capture at or below it).

        Loaded from the package's data files on first use and kept.
        """
        chosen = self.flag_release_for(version)
        if chosen not in self._flags:
            self._flags[chosen] = load_release_flags(self.engine, chosen)
        return self._flags[chosen]

    def flag_release_for(self, version: Version | str | None) -> str:
        """Which captured release stands for ``version`` in this line."""
        captured = sorted(self.flag_releases, key=parse_version)
        if version is None:
            return captured[-1]
        target = parse_version(version) if isinstance(version, str) else version
        below = [r for r in captured if parse_version(r) <= target]
        return below[-1] if below else captured[0]

    def env_writes_at(self, version: Version | str | None = None) -> tuple[EnvWrite, ...]:
        """The writes that exist in ``version`` (all of the line's when None)."""
        return tuple(w for w in self.env_writes if w.applies_to(version))

    def predict_env(
        self,
        exported: Mapping[str, str],
        flags: Collection[str] = (),
        version: Version | str | None = None,
        role: ProcessRole = "worker",
    ) -> dict[str, EnvOutcome]:
        """What a process of ``role`` ends up with, for every variable the release writes on its way.

        A write counts when it happens in ``role`` itself, in every process (``import vllm``), or
        in a process that starts ``role`` (the server starts SGLang's schedulers; vLLM's engine
        core starts its workers). Returns name -> :class:`EnvOutcome`. Writes whose
        ``condition`` the engine decides at run time are assumed to fire.

        >>> from toolkit.engines import profile_for
        >>> profile_for("sglang", "0.4.10").predict_env({"NCCL_CUMEM_ENABLE": "1"})["NCCL_CUMEM_ENABLE"].result
        '0'
        """
        reaches = {role, "every", *_ANCESTORS.get(role, ())}
        out: dict[str, EnvOutcome] = {}
        for write in self.env_writes_at(version):
            if write.process not in reaches:
                continue
            prior = out.get(write.name)
            current = prior.result if prior else exported.get(write.name)
            result = write.outcome(current, flags)
            writes = (*prior.writes, write) if prior else (write,)
            out[write.name] = EnvOutcome(write.name, exported.get(write.name), result, writes)
        return out
