"""Which variables do the engines write into their workers' environment, and where? Pure data.

``/proc/PID/environ`` holds the environment a process was *exec'd* with. SGLang's
``_set_envs_and_config`` and vLLM's ``env_override`` write ``os.environ`` in the
launcher after it started, so the launcher still shows what the user exported while
the spawned schedulers and workers show what the engine wrote. :data:`KNOWN_OVERRIDES`
lists those writes with the code responsible, so that an ``overridden`` row can say why.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.moves.envcheck.roles import ProcessRole, Role

__all__ = ["KnownOverride", "KNOWN_OVERRIDES", "override_reason"]


@dataclass(frozen=True)
class KnownOverride:
    """An engine that writes a variable into its children's environment, and where."""

    engine: str
    variable: str
    writes: str  # the value, or how it is computed
    when: str  # the condition, in the engine's terms
    where: str  # the code that does it, for the reader who wants to check

    def reason(self, role: Role) -> str:
        who = {"sglang": "SGLang", "vllm": "vLLM"}.get(self.engine, self.engine)
        if self.engine == "sglang" and role == Role.WORKER:
            procs = "scheduler processes"
        elif role == Role.OTHER:
            procs = "processes it spawns"
        else:
            procs = f"{role} processes"
        return f"{who}'s {self.where} sets {self.variable} in the {procs} ({self.writes}; {self.when})"


# Sources: SGLang python/sglang/srt/entrypoints/engine.py::_set_envs_and_config (0.5.23
# wheel; older releases through public forks of it, e.g. verl's patched copy citing
# sgl-project/sglang#6723), srt/arg_groups/attention_hook.py, srt/utils/common.py;
# vLLM vllm/env_override.py (vllm-project/vllm, several releases),


KNOWN_OVERRIDES: tuple[KnownOverride, ...] = (
    KnownOverride(
        "sglang",
        "NCCL_CUMEM_ENABLE",
        "'0' or str(int(--enable-symm-mem))",
        "always up to 0.4.x; from 0.5 when unset or with --enable-symm-mem",
        "_set_envs_and_config",
    ),
    KnownOverride(
        "sglang",
        "NCCL_NVLS_ENABLE",
        "str(int(--enable-nccl-nvls or --enable-symm-mem))",
        "always up to 0.4.x; later when unset or either flag is given",
        "_set_envs_and_config",
    ),
    KnownOverride(
        "sglang", "CUDA_DEVICE_MAX_CONNECTIONS", "'4', '8' since 0.5.x", "always", "_set_envs_and_config"
    ),
    KnownOverride(
        "sglang", "TORCH_NCCL_AVOID_RECORD_STREAMS", "'1'", "always, up to 0.5.x", "_set_envs_and_config"
    ),
    KnownOverride("sglang", "CUDA_MODULE_LOADING", "'AUTO'", "always, up to 0.5.x", "_set_envs_and_config"),
    KnownOverride("sglang", "TF_CPP_MIN_LOG_LEVEL", "'3'", "always, up to 0.5.x", "_set_envs_and_config"),
    KnownOverride(
        "sglang", "NCCL_GRAPH_MIXING_SUPPORT", "'0'", "when unset and --dcp-size > 1", "_set_envs_and_config"
    ),
    KnownOverride("sglang", "TRTLLM_ENABLE_PDL", "'1'", "unless it is set to '0'", "_set_envs_and_config"),
    KnownOverride(
        "sglang",
        "NCCL_ALGO",
        "'allreduce:tree'",
        "with --enable-deterministic-inference and TP > 1",
        "_handle_deterministic_inference",
    ),
    KnownOverride(
        "sglang",
        "NCCL_MIN_NCHANNELS",
        "SGLANG_DETERMINISTIC_NCCL_NCHANNELS",
        "with --enable-deterministic-inference and TP > 1",
        "_handle_deterministic_inference",
    ),
    KnownOverride(
        "sglang",
        "NCCL_MAX_NCHANNELS",
        "SGLANG_DETERMINISTIC_NCCL_NCHANNELS",
        "with --enable-deterministic-inference and TP > 1",
        "_handle_deterministic_inference",
    ),
    KnownOverride(
        "sglang",
        "CUDA_VISIBLE_DEVICES",
        "the one GPU of the rank",
        "with SGLANG_ONE_VISIBLE_DEVICE_PER_PROCESS=1",
        "maybe_reindex_device_id",
    ),
    KnownOverride(
        "vllm",
        "NCCL_CUMEM_ENABLE",
        "'0'",
        "on `import vllm` (always in 0.6-0.8; later only when unset and no multi-node NVLink)",
        "env_override.py",
    ),
    KnownOverride(
        "vllm", "TORCHINDUCTOR_COMPILE_THREADS", "'1'", "on `import vllm`, always", "env_override.py"
    ),
    KnownOverride(
        "vllm", "PYTORCH_NVML_BASED_CUDA_CHECK", "'1'", "on `import vllm`, always", "env_override.py"
    ),
    KnownOverride(
        "vllm",
        "VLLM_WORKER_MULTIPROC_METHOD",
        "'spawn'",
        "when unset, or when CUDA is already initialised",
        "_maybe_force_spawn",
    ),
    KnownOverride(
        "vllm",
        "OMP_NUM_THREADS",
        "a per-worker thread count",
        "when unset, before starting workers",
        "set_multiprocessing_worker_envs",
    ),
)

_OVERRIDE_INDEX: dict[tuple[str, str], KnownOverride] = {(o.engine, o.variable): o for o in KNOWN_OVERRIDES}
# Processes an engine spawns after writing os.environ: these inherit its overrides.
_SPAWNED_ROLES = frozenset(
    {Role.WORKER, Role.ENGINE_CORE, Role.DETOKENIZER, Role.TOKENIZER, Role.DP_CONTROLLER, Role.OTHER}
)


def override_reason(role: ProcessRole, variable: str) -> str | None:
    """Why ``variable`` differs in a process of ``role``, when an engine is known to write it.

    >>> override_reason(ProcessRole(Role.WORKER, "vllm"), "NCCL_CUMEM_ENABLE").startswith("vLLM's env_override.py")
    True
    """
    known = _OVERRIDE_INDEX.get((role.engine or "", variable))
    if known is None or role.role not in _SPAWNED_ROLES:
        return None
    return known.reason(role.role)
