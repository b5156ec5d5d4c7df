"""What one engine release line does, as data: the nouns every engine profile is made of.

Each fact carries ``source``, the release and file:line it was read in ("sglang 0.5.23
python/sglang/srt/entrypoints/engine.py:1898"): an unchecked belief ends up wrong (issue 13: the
toolkit said SGLang overwrites a user's ``NCCL_CUMEM_ENABLE``, true only up to 0.5.4.post1).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from toolkit.engines.flaglists import ReleaseFlags, load_release_flags
from toolkit.engines.versions import ReleaseRange, Version, parse_version

__all__ = ["Engine", "ENGINE_NAMES", "ProcessRole", "WriteWhen", "StartMethod", "EnvWrite", "EnvOutcome",
           "HealthAnswer", "HealthCheck", "Endpoint", "MetricNames", "EngineProfile"]

Engine = Literal["sglang", "vllm", "transformers"]
#: How each engine is named in messages and reports.
ENGINE_NAMES: Mapping[str, str] = {"sglang": "SGLang", "vllm": "vLLM", "transformers": "transformers serve"}
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

    ``when``: ``always`` overwrites the user's value, ``if_unset`` keeps it, ``with_flag`` overwrites
    only with ``flag``; ``condition`` narrows it in the engine's terms ("TP > 1"). ``visible_in``: the
    roles whose ``/proc/<pid>/environ`` shows the value, only those *exec'd* after the write (``spawn``);
    for the writer and forked children only NCCL's ``NCCL_DEBUG=INFO`` echo tells. ``releases``: the
    part of the profile's range that has the write.
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
        """The value left after this write, given what the user exported and passed (``condition`` holds).

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

    ``reason_field`` names the JSON field with the reason, so the toolkit quotes it instead of waiting
    (transformers serve's ``{"status": "unhealthy", "reason": "cb_worker_dead"}``).
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

    ``proves_generation``: a 200 means a token went through the scheduler (SGLang's ``/health_generate``),
    not only that HTTP is up. ``min_latency_s``: SGLang sleeps 1 s before it looks. ``timeout_s``: when
    the engine gives up and answers ``unhealthy_status``.
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

    def answer(self, status: int) -> HealthAnswer | None:
        return next((a for a in self.answers if a.status == status), None)


@dataclass(frozen=True)
class Endpoint:
    """An HTTP endpoint the release serves; without ``enabled_by`` (``--enable-metrics``,
    ``VLLM_SERVER_DEV_MODE=1``) the route is not registered (404)."""

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
    """One release line of one engine (``sglang-0.5.20+``): all the toolkit believes about it, with sources.

    ``flag_releases``: the releases whose parser was captured into ``toolkit/engines/flags/``
    (``scripts/engine_contracts.py``).
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
        """Whether a server started with an API key answers 401 to ``path`` without it."""
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
        """The captured flag list for ``version`` (the newest capture at or below it), loaded once."""
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

    def predict_env(self, exported: Mapping[str, str], flags: Collection[str] = (),
                    version: Version | str | None = None, role: ProcessRole = "worker",
                    ) -> dict[str, EnvOutcome]:
        """What a process of ``role`` ends up with, for every variable the release writes on its way.

        A write counts in ``role`` itself, in every process (``import vllm``), or in a process that starts
        ``role``; writes with a run-time ``condition`` are assumed to fire.

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
