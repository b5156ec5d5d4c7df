"""One thing that differs between the fast and the slow side, with its evidence. Pure.

Each names the mechanism (``topic``) it bears on, so the ranking can join what the configuration,
the log and the profile say about one cause; a checked sameness (``same=True``) is a finding too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Difference", "DifferenceKind", "KINDS", "TOPICS", "topic_of_setting", "config_differences", "same_record"]

DifferenceKind = Literal["config", "env", "log_metric", "profile", "telemetry", "server_metrics", "code"]
KINDS: tuple[DifferenceKind, ...] = ("config", "env", "log_metric", "profile", "telemetry", "server_metrics", "code")

TOPICS = {
    "cuda_graphs": "work running outside CUDA graphs (kernels launched one by one from the CPU)",
    "speculation": "speculative decoding: draft work and how many tokens each verify accepts",
    "attention": "the attention backend or mode",
    "batching": "batching and chunked prefill",
    "precision": "dtype, quantization, KV-cache dtype",
    "parallelism": "tensor, pipeline, data or expert parallelism",
    "memory": "memory fractions and KV-cache size",
    "load": "how loaded the server was during the runs (running and queued requests)",
    "gpu": "the GPUs' own state (clocks, power, utilisation)",
    "environment": "the environment of the server's processes",
    "code": "the engine's code (the commit)",
    "model": "the model or its files",
    "other": "other settings",
}

# A resolved setting's name -> topic: the first rule whose words all appear in the name wins.
_SETTING_TOPICS = (
    (("cuda", "graph"), "cuda_graphs"), (("enforce", "eager"), "cuda_graphs"), (("cudagraph",), "cuda_graphs"),
    (("compilation", "config"), "cuda_graphs"), (("speculative", "attention"), "cuda_graphs"),
    (("speculative",), "speculation"), (("spec",), "speculation"), (("draft",), "speculation"),
    (("attention",), "attention"), (("attn",), "attention"),
    (("chunked",), "batching"), (("max", "running"), "batching"), (("max", "num", "seqs"), "batching"),
    (("batched",), "batching"), (("schedule",), "batching"),
    (("dtype",), "precision"), (("quantization",), "precision"),
    (("tp", "size"), "parallelism"), (("parallel",), "parallelism"), (("dp", "size"), "parallelism"),
    (("ep", "size"), "parallelism"),
    (("mem",), "memory"), (("memory",), "memory"), (("kv", "cache"), "memory"),
    (("model",), "model"), (("tokenizer",), "model"),
)
# Settings that differ from launch to launch without saying anything of speed.
_INCIDENTAL = frozenset({"port", "host", "random_seed", "seed", "served_model_name", "log_level", "api_key",
                         "model_tag", "profiler_config", "sim_startup_s", "file_storage_path", "enable_metrics",
                         "decode_log_interval"})


def topic_of_setting(name: str) -> str:
    """``disable_cuda_graph`` -> ``cuda_graphs``; ``speculative_num_steps`` -> ``speculation``; else ``other``."""
    words = name.lower().replace("-", "_").split("_")
    joined = "_".join(words)
    for needed, topic in _SETTING_TOPICS:
        if all(word in words or (len(needed) == 1 and word in joined) for word in needed):
            return topic
    return "other"


@dataclass(frozen=True)
class Difference:
    """One difference (or one checked sameness) between the two sides, and the evidence for it."""

    kind: DifferenceKind
    topic: str
    name: str
    fast: str
    slow: str
    evidence: tuple[str, ...] = ()
    explains_ms: float | None = None  # the ms per output token of the gap it accounts for, when measurable
    same: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a difference's kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if self.topic not in TOPICS:
            raise ValueError(f"a difference's topic must be one of {', '.join(TOPICS)}, not {self.topic!r}")

    @property
    def text(self) -> str:
        if self.same:
            return f"{self.name}: the same on both sides ({self.fast})"
        return f"{self.name}: {self.fast} (fast) -> {self.slow} (slow)"


def same_record(kind: DifferenceKind, topic: str, name: str, what: str, evidence: tuple[str, ...] = ()) -> Difference:
    """A checked sameness: the gatherer looked and both sides agree (it explains none of the gap)."""
    return Difference(kind, topic, name, what, what, evidence, 0.0, same=True)


def config_differences(fast: dict[str, tuple[str, str]], slow: dict[str, tuple[str, str]]) -> list[Difference]:
    """Resolved settings that differ (incidental ones left out), ``{name: (value, its line)}`` per side.

    A setting printed on one side only differs only when both sides printed a configuration.
    """
    if not fast or not slow:
        return []
    out = []
    for name in sorted(set(fast) | set(slow)):
        if name in _INCIDENTAL:
            continue
        a, b = fast.get(name, ("(not printed)", "")), slow.get(name, ("(not printed)", ""))
        if a[0] == b[0]:
            continue
        evidence = tuple(f"{side}: {_clip_around(line, name)}" for side, (_, line) in (("fast", a), ("slow", b)) if line)
        out.append(Difference("config", topic_of_setting(name), name, a[0], b[0], evidence))
    return out


def _clip_around(line: str, name: str, width: int = 160) -> str:
    """The part of a long dump line around ``name=``."""
    at = max(line.find(f"{name}="), line.find(f"'{name}':"))
    if at < 0 or len(line) <= width:
        return line[:width]
    return ("..." if at else "") + line[at:at + width] + ("..." if at + width < len(line) else "")
