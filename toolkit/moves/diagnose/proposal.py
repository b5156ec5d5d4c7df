"""The next experiment for a ranked reason: a flag of the detected release, or a commit range. Pure.

Only flags the release's own parser accepts are proposed (:class:`toolkit.engines.ReleaseFlags`).
Beliefs, with their sources:

- SGLang ``--speculative-attention-mode`` (``prefill``, the default, or ``decode``): ``prefill``
  verifies in extend mode, not captured in CUDA graphs; ``decode`` verifies under graphs. Default:
  ``speculative_attention_mode: str = "prefill"`` (sglang python/sglang/srt/server_args.py, beside
  ``speculative_token_map``; the line moves every release), printed in the ``server_args`` dump; in
  the captured flag lists from 0.5.4.post1 to 0.5.23 (toolkit/engines/flags/). The seed incident:
  29 ms per eager 3-token verify against 12 ms per graph decode step.
- SGLang ``--disable-cuda-graph`` and vLLM ``--enforce-eager`` turn CUDA graphs off (sglang
  0.5.23 server_args.py ``disable_cuda_graph``; vllm 0.25-0.33 engine/arg_utils.py
  ``enforce_eager``, whose engine prints ``Cudagraph is disabled under eager mode``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from toolkit.engines import ReleaseFlags
from toolkit.moves.diagnose.ranking import Reason

__all__ = ["Proposal", "propose"]

_OFF = ("none", "false", "", "(not printed)")


@dataclass(frozen=True)
class Proposal:
    """One next experiment: what to run, as text and as the toolkit call that runs it."""

    rank: int
    text: str
    call: str  # the toolkit call, to paste (``tk.compare_flag(...)`` or ``tk.perf_bisect(...)``)
    flag: str | None = None  # the flag (or ``env:NAME``) it changes, checked against the release
    values: tuple[object, object] = (None, None)  # (now on the slow side, proposed)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _has(flags: ReleaseFlags | None, flag: str) -> bool:
    return flags is not None and flag in flags


def _value(text: str) -> object:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return None if lowered in ("none", "(not printed)") else text


def _compare_call(flag: str, a: object, b: object, rank: int) -> str:
    return (f"tk.compare_flag(host, slow, {flag!r}, {a!r}, {b!r}, plan=tk.Plan(journal=journal), "
            f"hypothesis=diagnosis.hypothesis({rank}))")


def _cuda_graphs(reason: Reason, engine: str, flags: ReleaseFlags | None, slow: Mapping[str, str]) -> Proposal | None:
    speculating = slow.get("speculative_algorithm", "None").lower() not in _OFF
    mode = slow.get("speculative_attention_mode")
    if engine == "sglang" and speculating and (mode or "prefill") != "decode" \
            and _has(flags, "--speculative-attention-mode"):
        return Proposal(reason.rank, "verify in decode mode, under CUDA graphs: --speculative-attention-mode decode",
                        _compare_call("--speculative-attention-mode", "prefill", "decode", reason.rank),
                        "--speculative-attention-mode", (mode or "prefill", "decode"))
    if engine == "sglang" and slow.get("disable_cuda_graph", "").lower() == "true" and _has(flags, "--disable-cuda-graph"):
        return Proposal(reason.rank, "turn CUDA graphs back on: launch without --disable-cuda-graph",
                        _compare_call("--disable-cuda-graph", True, None, reason.rank), "--disable-cuda-graph",
                        (True, None))
    if engine == "vllm" and slow.get("enforce_eager", "").lower() == "true" and _has(flags, "--enforce-eager"):
        return Proposal(reason.rank, "turn CUDA graphs back on: launch without --enforce-eager",
                        _compare_call("--enforce-eager", True, None, reason.rank), "--enforce-eager", (True, None))
    return None


def _from_differences(reason: Reason, flags: ReleaseFlags | None) -> Proposal | None:
    """The slow side with the fast side's value of the first differing setting or variable the release has."""
    for difference in reason.differences:
        if difference.same:
            continue
        if difference.kind == "env":
            flag = f"env:{difference.name}"
            slow_value, fast_value = _env_value(difference.slow), _env_value(difference.fast)
            return Proposal(reason.rank, f"give the slow side the fast side's {difference.name}: {fast_value!r}",
                            _compare_call(flag, slow_value, fast_value, reason.rank), flag, (slow_value, fast_value))
        if difference.kind == "config" and _has(flags, _flag(difference.name)) \
                and difference.fast.lower() not in _OFF:  # "turn the change off" is the fast side, not an experiment
            flag = _flag(difference.name)
            slow_value, fast_value = _value(difference.slow), _value(difference.fast)
            return Proposal(reason.rank, f"give the slow side the fast side's {flag} {difference.fast}",
                            _compare_call(flag, slow_value, fast_value, reason.rank), flag, (slow_value, fast_value))
    return None


def _env_value(shown: str) -> object:
    value = shown.split(" on ", 1)[0]
    return None if value in ("(unset)", "(not read)") else value


def propose(reason: Reason, *, engine: str, flags: ReleaseFlags | None, slow_config: Mapping[str, str],
            commits: tuple[str | None, str | None] = (None, None), repo: str | None = None) -> Proposal | None:
    """The next experiment for ``reason`` in the detected release's ``flags``; None if there is none.

    ``commits`` (fast, slow) and ``repo`` let a code difference propose a bisection of the range.
    """
    if reason.ruled_out:
        return None
    if reason.topic == "code" and commits[0] and commits[1]:
        where = repr(repo) if repo else "repo_dir"
        return Proposal(reason.rank, f"bisect the commits between {commits[0][:12]} (fast) and {commits[1][:12]} (slow)",
                        f"tk.perf_bisect(host, {where}, good={commits[0]!r}, bad={commits[1]!r}, "
                        "spec=slow, plan=tk.Plan(journal=journal))")
    if reason.topic == "cuda_graphs" and (found := _cuda_graphs(reason, engine, flags, slow_config)) is not None:
        return found
    found = _from_differences(reason, flags)
    if found is not None:
        return found
    if flags is None and any(d.kind == "config" and not d.same for d in reason.differences):
        return Proposal(reason.rank, f"the {engine} release is unknown, so no flag is proposed: pass its version "
                                     "or launch where `--version` answers", "")
    return None
