"""What two profiles say of the gap: GPU time per output token, in or out of CUDA graphs, idle gaps. Pure.

Busy plus idle GPU time per output token is the time per token, so the slow side's extra milliseconds
split into the target's forward and the draft's work; eager work idles the GPU between kernels. The
seed's numbers: decode in a graph ~12 ms per token; EAGLE-3's eager extend-mode verify ~29 ms.

>>> from toolkit.observe.trace import KernelCall
>>> calls = [KernelCall("gemm", 0, 100.0, False, "verify"), KernelCall("gemm", 150, 100.0, False, "verify")]
>>> d = digest_profile("slow", calls, output_tokens=1)
>>> d.groups["forward"].busy_ms, d.groups["forward"].idle_ms, d.groups["forward"].eager_pct
(0.2, 0.05, 100.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from toolkit.moves.diagnose.difference import Difference, same_record
from toolkit.observe.trace import KernelCall

__all__ = ["GroupTime", "ProfileDigest", "digest_profile", "profile_differences", "profiled_gap_ms", "DRAFT_PHASES"]

DRAFT_PHASES = frozenset({"draft", "draft_extend"})  # toolkit.observe.trace.PHASE_RULES' names for the draft model
_GROUP_TOPIC = {"forward": "cuda_graphs", "draft": "speculation"}


@dataclass(frozen=True)
class GroupTime:
    """One group of phases over the profile: milliseconds busy (all, eager) and idle before its kernels."""

    phases: tuple[str, ...]
    calls: int
    busy_ms: float
    eager_ms: float
    idle_ms: float

    @property
    def eager_pct(self) -> float:
        return 100.0 * self.eager_ms / self.busy_ms if self.busy_ms else 0.0

    @property
    def wall_ms(self) -> float:
        return self.busy_ms + self.idle_ms


@dataclass(frozen=True)
class ProfileDigest:
    """A profile reduced to what the ranking needs: per group of phases, and the output tokens it covered."""

    label: str
    output_tokens: int
    groups: Mapping[str, GroupTime]

    def per_token_ms(self, group: str, field: str = "wall_ms") -> float:
        time = self.groups.get(group)
        if time is None or self.output_tokens <= 0:
            return 0.0
        value = {"wall_ms": time.wall_ms, "busy_ms": time.busy_ms, "idle_ms": time.idle_ms,
                 "eager_ms": time.eager_ms}[field]
        return value / self.output_tokens


def _group(phase: str) -> str:
    return "draft" if phase in DRAFT_PHASES else "forward"


def digest_profile(label: str, calls: Sequence[KernelCall], *, output_tokens: int, gap_cap_us: float = 2000.0
                   ) -> ProfileDigest:
    """Busy, eager and idle milliseconds per group of phases (``forward``, ``draft``) of one profile.

    The idle time before a kernel belongs to it (the GPU waited), unless over ``gap_cap_us`` (think time).
    """
    sums: dict[str, list[float]] = {}
    phases: dict[str, set[str]] = {}
    ends: dict[int | None, float] = {}
    for call in sorted(calls, key=lambda c: (c.device or 0, c.ts_us)):
        group = _group(call.phase)
        total = sums.setdefault(group, [0, 0.0, 0.0, 0.0])
        phases.setdefault(group, set()).add(call.phase or "(unknown)")
        previous_end = ends.get(call.device)
        if previous_end is not None and 0.0 < call.ts_us - previous_end <= gap_cap_us:
            total[3] += call.ts_us - previous_end
        ends[call.device] = max(previous_end or 0.0, call.ts_us + call.dur_us)
        total[0] += 1
        total[1] += call.dur_us
        total[2] += 0.0 if call.in_graph else call.dur_us
    groups = {g: GroupTime(tuple(sorted(phases[g])), int(s[0]), s[1] / 1000.0, s[2] / 1000.0, s[3] / 1000.0)
              for g, s in sums.items()}
    return ProfileDigest(label, int(output_tokens), groups)


def profiled_gap_ms(fast: ProfileDigest, slow: ProfileDigest) -> float | None:
    """The slow side's extra milliseconds per output token over every group, as the two profiles saw them."""
    if fast.output_tokens <= 0 or slow.output_tokens <= 0:
        return None
    return sum(slow.per_token_ms(g) for g in slow.groups) - sum(fast.per_token_ms(g) for g in fast.groups)


def _side_text(digest: ProfileDigest, group: str) -> str:
    time = digest.groups.get(group)
    if time is None or not time.calls:
        return "none"
    per = digest.per_token_ms
    return (f"{per(group):.2f} ms/token ({per(group, 'busy_ms'):.2f} busy + {per(group, 'idle_ms'):.2f} idle between "
            f"kernels), {time.eager_pct:.0f}% of its GPU time outside CUDA graphs [{', '.join(time.phases)}]")


def profile_differences(fast: ProfileDigest, slow: ProfileDigest, *, min_ms: float = 0.05, min_rel: float = 0.05
                        ) -> list[Difference]:
    """Per group of phases: the slow side's extra milliseconds per output token, and where they went.

    ``forward`` counts towards CUDA graphs when the slow side runs more of it eager, else ``other``.
    """
    if fast.output_tokens <= 0 or slow.output_tokens <= 0:
        return []
    out = []
    for group in ("forward", "draft"):
        a, b = fast.per_token_ms(group), slow.per_token_ms(group)
        if a == 0.0 and b == 0.0:
            continue
        fast_time, slow_time = fast.groups.get(group), slow.groups.get(group)
        eager_a = fast_time.eager_pct if fast_time else 0.0
        eager_b = slow_time.eager_pct if slow_time else 0.0
        topic = _GROUP_TOPIC[group] if group == "draft" or eager_b > eager_a + 10.0 else "other"
        evidence = (f"fast profile {fast.label!r}: {group}: {_side_text(fast, group)}",
                    f"slow profile {slow.label!r}: {group}: {_side_text(slow, group)}")
        name = ("the draft model's work" if group == "draft" else
                "the target model's forward (decode / verify / prefill)")
        delta = b - a
        if abs(delta) < max(min_ms, min_rel * max(a, b)) and abs(eager_b - eager_a) <= 10.0:
            out.append(same_record("profile", topic, name, _side_text(fast, group), evidence))
            continue
        out.append(Difference("profile", topic, name, _side_text(fast, group), _side_text(slow, group), evidence,
                              explains_ms=delta))
    return out
