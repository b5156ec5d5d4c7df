"""Which engine release the simulator imitates, and what that release does to its processes' environment.

``--sim-engine-version`` names the release (default: the newest, SGLang 0.5.23 / vLLM 0.33.0 /
transformers 5.24.0). Its flags, environment writes and health answers come from ``toolkit.engines``,
so the stand-in and the toolkit's beliefs cannot drift apart (the one arrow from ``sim`` into the
toolkit, docs/architecture.md). A write before a child is *exec'd* shows in its ``/proc/<pid>/environ``;
one inside the child (vLLM 0.6's ``init_worker``) or before a fork (vLLM 0.7-0.8.2) does not: children
get the visible writes at exec and apply the others to their own ``os.environ``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from toolkit.engines import (
    PROFILES,
    EngineProfile,
    ReleaseFlags,
    Version,
    VersionError,
    parse_version,
    resolve_profile,
)
from toolkit.engines.release_profile import ENGINE_NAMES, EnvWrite, ProcessRole

__all__ = ["DEFAULT_VERSIONS", "SimRelease", "EnvContext", "release_from_argv", "role_of", "KNOWN_CONDITIONS",
           "installed_kernel", "option_value"]

DEFAULT_VERSIONS = {"sglang": "0.5.23", "vllm": "0.33.0", "transformers": "5.24.0"}


@dataclass(frozen=True)
class EnvContext:
    """What a write's condition depends on, as far as a simulator on a CPU can know it."""

    tp: int
    cuda_graph: bool
    flags: frozenset[str]  # every flag on the command line, spelled as given
    values: Mapping[str, object]  # parsed values by argparse dest (``dcp_size``, ``moe_a2a_backend``)


def _true(_: EnvContext) -> bool:
    return True


# The conditions the profiles write in the engine's terms, as the simulator evaluates them. A profile
# with a condition missing here makes the simulator refuse to start (tests/test_sim_release.py checks
# every profile). No multi-node NVLink fabric (MNNVL/IMEX) exists on a simulator.
KNOWN_CONDITIONS: tuple[tuple[str, Callable[[EnvContext], bool]], ...] = (
    ("'1' on one node with --enable-kv-cache-sharding", _true),  # the '0' write fires; the '1' case is not simulated
    ("'1' with --enable-nccl-nvls", _true),
    ("--dcp-size > 1", lambda c: int(str(c.values.get("dcp_size") or 1)) > 1),
    ("--moe-a2a-backend deepep_v2", lambda c: c.values.get("moe_a2a_backend") == "deepep_v2"),
    ("--nnodes > 1 on an MNNVL fabric", lambda c: False),
    ("TP > 1", lambda c: c.tp > 1),
    ("VLLM_ENABLE_CUDA_COMPATIBILITY=1 and a compat folder exists", lambda c: False),  # no CUDA compat libs here
    ("and TP > 1 on CUDA", lambda c: c.tp > 1),
    ("and no /dev/nvidia-caps-imex-channels", _true),
    ("in each worker's own Python", _true),
    ("kept only when exported as '0'", _true),
    ("max(TP, EP, DP) > 1 and CUDA graphs on", lambda c: c.tp > 1 and c.cuda_graph),
    ("on `import vllm`", _true),
    ("only when unset", _true),
    ("str(int(--enable-nccl-nvls)), skipped with --enable-symm-mem", lambda c: "--enable-symm-mem" not in c.flags),
    ("str(int(--enable-symm-mem))", _true),
    ("unless /dev/nvidia-caps-imex-channels exists", _true),
    ("vllm serve / python -m vllm.entrypoints.openai.api_server", _true),
)


def condition_holds(condition: str, context: EnvContext) -> bool:
    """Whether a write's ``condition`` holds for this launch; ValueError names an unknown one."""
    if not condition:
        return True
    for prefix, predicate in KNOWN_CONDITIONS:
        if condition.startswith(prefix):
            return predicate(context)
    raise ValueError(f"toolkit.sim does not know how to evaluate the engine condition {condition!r}: add it to "
                     "toolkit/sim/release.py KNOWN_CONDITIONS")


_ROLES: dict[tuple[str, str], ProcessRole] = {("sglang", "scheduler"): "worker", ("vllm", "worker"): "worker",
                                               ("vllm", "engine-core"): "engine_core"}


def role_of(engine: str, sim_role: str) -> ProcessRole:
    return _ROLES.get((engine, sim_role), "worker")


@dataclass(frozen=True)
class SimRelease:
    """One named release of one engine: its profile line and its captured flags."""

    engine: str
    version: Version
    profile: EngineProfile

    @property
    def label(self) -> str:
        """``SGLang 0.5.23``."""
        return f"{ENGINE_NAMES.get(self.engine, self.engine)} {self.version}"

    @property
    def flags(self) -> ReleaseFlags:
        return self.profile.flags(self.version)

    def at_least(self, version: str) -> bool:
        return self.version >= parse_version(version)

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def child_environment(self, parent: Mapping[str, str], sim_role: str,
                          context: EnvContext) -> tuple[dict[str, str], dict[str, str]]:
        """(what the child is exec'd with: its ``/proc/<pid>/environ``, what it then writes in os.environ)."""
        role = role_of(self.engine, sim_role)
        writes = tuple(w for w in self.profile.env_writes_at(self.version) if condition_holds(w.condition, context))
        visible = tuple(w for w in writes if role in w.visible_in)
        started = {**parent, **_outcomes(self.profile, visible, parent, context, role)}
        everything = _outcomes(self.profile, writes, started, context, role)
        return started, {k: v for k, v in everything.items() if started.get(k) != v}


def _outcomes(profile: EngineProfile, writes: Sequence[EnvWrite], exported: Mapping[str, str],
              context: EnvContext, role: ProcessRole) -> dict[str, str]:
    """The values ``writes`` leave for ``role`` (the profile's own reach rules: who starts whom)."""
    narrowed = dataclasses.replace(profile, env_writes=tuple(writes))
    predicted = narrowed.predict_env(exported, context.flags, None, role)
    return {name: _concrete(outcome.result, exported, context)
            for name, outcome in predicted.items() if outcome.result is not None}


def _concrete(value: str, exported: Mapping[str, str], context: EnvContext) -> str:
    """A profile value as the engine computes it: some are written as the rule, not the number."""
    if value == "per-worker count":  # vLLM startup_omp_num_threads(local_world_size): at least 1
        return str(max(1, (os.cpu_count() or 1) // max(context.tp, 1)))
    if value == "SGLANG_DETERMINISTIC_NCCL_NCHANNELS":  # EnvInt(8), sglang 0.5.23 python/sglang/srt/environ.py:1531
        return exported.get(value, "8")
    return value


def option_value(argv: Sequence[str], name: str) -> str | None:
    """The value of ``name`` on a command line (``--x V`` or ``--x=V``), before full parsing."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def release_from_argv(argv: Sequence[str], engine: str) -> SimRelease:
    """The release named by ``--sim-engine-version`` (or the default); ValueError when no profile covers it."""
    text = option_value(argv, "--sim-engine-version") or DEFAULT_VERSIONS[engine]
    try:
        version = parse_version(text)
    except VersionError as exc:
        raise ValueError(f"--sim-engine-version {text!r}: {exc}") from None
    match = resolve_profile(engine, version)
    if not match.exact:
        lines = ", ".join(f"{p.name} ({p.releases})" for p in PROFILES.get(engine, ()))
        raise ValueError(f"--sim-engine-version {text}: {match.note}; the simulator imitates {lines}")
    return SimRelease(engine, version, match.profile)


# The kernel wheel each release's launcher demands (its own minimum: what a fresh install of that
# release has), read in python/sglang/srt/entrypoints/engine.py of each wheel.
_KERNELS = (
    ("0.4.10", "sgl-kernel", "0.2.8", "sglang 0.4.10 python/sglang/srt/entrypoints/engine.py:649-653"),
    ("0.5.4.post1", "sgl-kernel", "0.3.16.post4", "sglang 0.5.4.post1 python/sglang/srt/entrypoints/engine.py:713-717"),
    ("0.5.9", "sgl-kernel", "0.3.21", "sglang 0.5.9 python/sglang/srt/entrypoints/engine.py:856-860"),
    ("0.5.19", "sglang-kernel", "0.4.6.post1", "sglang 0.5.19 python/sglang/srt/entrypoints/engine.py:1714-1718"),
    ("0.5.23", "sglang-kernel", "0.4.9", "sglang 0.5.23 python/sglang/srt/entrypoints/engine.py:1962-1966"),
)


def installed_kernel(release: SimRelease) -> tuple[str, str]:
    """(package, version) of the kernel wheel the simulated install of ``release`` has."""
    below = [k for k in _KERNELS if parse_version(k[0]) <= release.version]
    chosen = below[-1] if below else _KERNELS[0]
    return chosen[1], chosen[2]
