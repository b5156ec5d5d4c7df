"""Why a variable differs in a process: the engine release that wrote it, where, when, and whether /proc can show it.

The facts are the engine profiles' (``toolkit.engines``: every write with its release and source
line); this module phrases them. ``/proc/PID/environ`` is the *exec-time* environment: SGLang's
launcher writes ``os.environ`` before it spawns its schedulers, so their ``/proc`` shows the writes;
vLLM 0.6's workers write inside themselves and vLLM 0.7-0.8.2 forks, so there ``/proc`` keeps what
the user exported while NCCL reads something else (:func:`unseen_writes`).

>>> from toolkit.moves.envcheck.roles import ProcessRole, Role
>>> override_reason(ProcessRole(Role.WORKER, "sglang"), "NCCL_CUMEM_ENABLE", "0", "0.4.10")[:96]
"SGLang 0.4.10 writes NCCL_CUMEM_ENABLE='0' in its launcher before it starts its worker processes"
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from toolkit.engines import PROFILES, EngineProfile, EnvWrite, resolve_profile
from toolkit.engines.release_profile import ENGINE_NAMES
from toolkit.engines.release_profile import ProcessRole as EngineRole
from toolkit.moves.envcheck.roles import ProcessRole, Role

__all__ = ["KnownOverride", "KNOWN_OVERRIDES", "known_overrides", "override_reason", "predicted_environ", "unseen_writes"]

_PROCESS_WORDS = {"server": "its launcher", "every": "every process that imports it", "worker": "each worker itself",
                  "engine_core": "its engine core", "api_server": "its API server"}
# envcheck's roles as the profiles name them; an untitled child of the server is one it spawned.
_ROLES: dict[Role, EngineRole] = {
    Role.SERVER: "server", Role.WORKER: "worker", Role.ENGINE_CORE: "engine_core", Role.API_SERVER: "api_server",
    Role.DETOKENIZER: "detokenizer", Role.DP_CONTROLLER: "dp_controller", Role.TOKENIZER: "detokenizer",
    Role.OTHER: "worker",
}


@dataclass(frozen=True)
class KnownOverride:
    """One write of one engine release line, as a report explains it (from ``EngineProfile.env_writes``)."""

    engine: str
    variable: str
    writes: str  # the value
    when: str  # always / only when unset / with a flag, and the engine's condition
    where: str  # the release and source line
    line: str  # the profile line, e.g. sglang-0.5.20+
    visible_in: tuple[str, ...]

    def reason(self, role: Role) -> str:
        shown = ", ".join(self.visible_in) or "no process"
        return (f"{ENGINE_NAMES.get(self.engine, self.engine)} ({self.line}) writes "
                f"{self.variable}={self.writes!r} "
                f"{self.when} ({self.where}); /proc shows it in: {shown}")


def _when(write: EnvWrite) -> str:
    base = {"always": "whatever the user exported", "if_unset": "only when it is unset"}.get(
        write.when, f"when started with {write.flag}")
    return base + (f", {write.condition}" if write.condition else "")


def known_overrides(engine: str, version: str | None = None) -> tuple[KnownOverride, ...]:
    """Every write of ``engine``'s release line for ``version`` (the newest line when None)."""
    profile = resolve_profile(engine, version).profile
    return tuple(KnownOverride(engine, w.name, w.value, _when(w), w.source, profile.name, tuple(w.visible_in))
                 for w in profile.env_writes_at(version))


#: The newest line's writes of each engine (what a report assumes when the release is unknown).
KNOWN_OVERRIDES: tuple[KnownOverride, ...] = tuple(o for engine in PROFILES for o in known_overrides(engine))


def _reaching(profile: EngineProfile, variable: str, version: str | None, role: EngineRole) -> tuple[EnvWrite, ...]:
    """The writes of ``variable`` that happen in ``role`` or in a process that starts it (the profile's rule)."""
    flags = {w.flag for w in profile.env_writes if w.flag}
    outcome = profile.predict_env({}, flags, version, role).get(variable)
    return outcome.writes if outcome is not None else ()


def predicted_environ(role: ProcessRole, exported: Mapping[str, str], version: str | None) -> dict[str, str]:
    """What a process of ``role`` holds in ``os.environ``: ``exported`` plus every write of the release that
    reaches it (in a process that starts it, in every process, in itself), whatever ``/proc`` shows."""
    engine_role = _ROLES.get(role.role)
    if role.engine not in PROFILES or engine_role is None:
        return dict(exported)
    profile = resolve_profile(role.engine, version).profile
    environ = dict(exported)
    for name, outcome in profile.predict_env(exported, (), version, engine_role).items():
        if outcome.result is None:
            environ.pop(name, None)
        else:
            environ[name] = outcome.result
    return environ


def _label(profile: EngineProfile, version: str | None) -> str:
    name = ENGINE_NAMES.get(profile.engine, profile.engine)
    return f"{name} {version}" if version else f"{name} ({profile.name}, release not detected)"


def override_reason(role: ProcessRole, variable: str, actual: str | None = None, version: str | None = None, *,
                    seen_by: str = "proc") -> str | None:
    """Why ``variable`` reads ``actual`` in a process of ``role``, when the engine release writes it there.

    ``seen_by="proc"``: the value came from ``/proc/PID/environ``, so only writes that ``/proc``
    of that role shows can explain it; ``"nccl"``: NCCL's echo, which sees every write.
    """
    engine_role = _ROLES.get(role.role)
    if role.engine not in PROFILES or engine_role is None:
        return None
    profile = resolve_profile(role.engine, version).profile
    writes = [w for w in _reaching(profile, variable, version, engine_role)
              if seen_by == "nccl" or engine_role in w.visible_in]
    if not writes:
        return None
    matching = [w for w in writes if actual is None or w.value == actual] or writes
    write = matching[-1]
    where = _PROCESS_WORDS.get(write.process, f"its {write.process}")
    before = (f" before it starts its {role.role} processes" if write.process not in (engine_role, "every")
              else "")
    return (f"{_label(profile, version)} writes {variable}={write.value!r} in {where}{before}, {_when(write)} "
            f"({write.source})")


def unseen_writes(engine: str | None, version: str | None, variables: Iterable[str],
                  roles: Iterable[Role]) -> list[str]:
    """What ``/proc`` cannot show: writes of ``variables`` that reach a process of ``roles`` in its own
    Python (or before a fork), so its ``/proc`` keeps the exported value while NCCL reads the written one."""
    if engine not in PROFILES:
        return []
    profile = resolve_profile(engine, version).profile
    notes: list[str] = []
    for variable in variables:
        for role in dict.fromkeys(r for r in roles if r in (Role.WORKER, Role.ENGINE_CORE)):  # where NCCL runs
            engine_role = _ROLES[role]
            for write in _reaching(profile, variable, version, engine_role):
                if engine_role in write.visible_in:
                    continue
                note = (f"{variable}: {_label(profile, version)} writes {write.value!r} where /proc of its {role} "
                        f"processes cannot show it ({_when(write)}; {write.source}): their /proc keeps the exported "
                        "value; only NCCL's own echo (NCCL_DEBUG=INFO) says what NCCL used")
                if note not in notes:
                    notes.append(note)
    return notes
