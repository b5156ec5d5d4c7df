"""Which engine wrote a log, and so which packs classify it.

Markers are read line by line until one is decisive. A vLLM marker is only tentative for the first lines:
other engines mention vLLM too (Ray Serve LLM runs it; older SGLang prints vLLM-formatted lines).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from toolkit.logs.other_packs import LLAMACPP, LMDEPLOY, RAY_SERVE, TGI, TRTLLM
from toolkit.logs.packs import COMMON, GENERIC, SGLANG, VLLM
from toolkit.logs.rules import RulePack, Verdict

__all__ = ["ENGINES", "PACKS", "detect_engine", "packs_for", "engine_of_line", "log_engine"]

PACKS: Mapping[str, RulePack] = MappingProxyType({
    "common": COMMON, "sglang": SGLANG, "vllm": VLLM, "tgi": TGI, "trtllm": TRTLLM, "lmdeploy": LMDEPLOY,
    "ray": RAY_SERVE, "llamacpp": LLAMACPP, "generic": GENERIC,
})
ENGINES = ("auto", "sglang", "vllm", "tgi", "trtllm", "lmdeploy", "ray", "llamacpp", "generic")

def log_engine(name: str | None) -> str:
    """The packs' name for a server's engine: itself when it has packs, else "auto" (the log decides).

    >>> log_engine("sglang"), log_engine("transformers"), log_engine(None)
    ('sglang', 'auto', 'auto')
    """
    return name if name in ENGINES else "auto"


# Until a marker says which engine wrote the log, every engine's failure and noise rules apply (they are
# specific enough not to collide), while readiness waits for the engine: "Application startup complete." is
# vLLM's ready line but only SGLang's HTTP server coming up.
_ENGINE_PACKS = (SGLANG, VLLM, TGI, TRTLLM, LMDEPLOY, RAY_SERVE, LLAMACPP)
UNKNOWN = RulePack("unknown-engine", tuple(
    [r for pack in _ENGINE_PACKS for r in pack.rules if r.verdict in (Verdict.BENIGN, Verdict.WARNING)]
    + [r for pack in _ENGINE_PACKS for r in pack.rules if r.verdict is Verdict.FATAL]
))

# The packs each engine's log is read with, in order, between COMMON and GENERIC.
_STACKS: Mapping[str, tuple[RulePack, ...]] = MappingProxyType({
    "sglang": (SGLANG,), "vllm": (VLLM,), "tgi": (TGI,), "trtllm": (TRTLLM,), "lmdeploy": (LMDEPLOY,),
    "ray": (RAY_SERVE, VLLM), "llamacpp": (LLAMACPP,), "generic": (), "unknown": (UNKNOWN,),
})

# A marker: (engine, decisive, literals, pattern); the pattern is searched only in a line that holds one of
# the literals (most lines hold none: detection costs a few substring tests per line, not a regex per engine).
_Marker = tuple[str, bool, tuple[str, ...], "re.Pattern[str]"]


def _marker(engine: str, literals: tuple[str, ...], pattern: str, *, decisive: bool = True) -> _Marker:
    return engine, decisive, literals, re.compile(pattern)


_SGLANG_HEADER = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"
_MARKERS: tuple[_Marker, ...] = (
    # SGLang first: older SGLang imports vLLM and prints vLLM-formatted lines
    _marker("sglang", ("server_args=ServerArgs(", "The server is fired up", "Capture cuda graph", "Ignore import error when",
                       " init state: "),
            r"server_args=ServerArgs\(|The server is fired up|Capture cuda graph (?:begin|end)"
            r"|Ignore import error when loading sglang|^(?:router|detoken) init state: "),  # init state: SGLang 0.1.x
    _marker("sglang", ("sglang",), r"\bsglang[./:]"),
    _marker("sglang", (" TP", " DP", " PP", " EP", " ATTN_CP", " MOE_DP"),
            _SGLANG_HEADER + r"(?: (?:TP|DP|PP|EP|ATTN_CP|MOE_DP)\d+)+\]"),
    # SGLang's own start-up and scheduler messages after its header, when no rank tag shows (TP1, DP1)
    _marker("sglang", ("Load weight ", "KV Cache is allocated", "Init torch distributed", "Memory pool end",
                       "Scheduler hit an exception"),
            "^" + _SGLANG_HEADER + r"\] (?:Load weight (?:begin|end)\. |KV Cache is allocated\. "
            r"|Init torch distributed (?:begin|ends)\.|Memory pool end\. |Scheduler hit an exception)"),
    _marker("sglang", ("load weight ",), r"^Rank \d+: load weight (?:begin|end)\."),  # SGLang 0.1.x (rpyc workers)
    # the other engines' own program or logger names: decisive at once
    _marker("tgi", ("text_generation_", "text-generation-"),
            r"text_generation_(?:launcher|router|server)|text-generation-(?:launcher|server|inference)"),
    # Triton's backend API names in its backends' own messages ("TRITONBACKEND_ModelInstanceFinalize: delete instance
    # state", any backend: onnxruntime, pytorch, python, LMDeploy's fastertransformer) name Triton before a TM line does
    _marker("trtllm", ("[TensorRT-LLM]", "[TRT-LLM]", "tensorrt_llm", "tritonserver", "Triton Inference Server", ".cc:",
                       "TRITONBACKEND_"),
            r"\[TensorRT-LLM\]|\[TRT-LLM\]|tensorrt_llm|tritonserver|Triton Inference Server"
            r"|\b(?:model_lifecycle|model_repository_manager|grpc_server|http_server|server|backend_model(?:_instance)?)\.cc:\d+\]"
            r"|\bTRITONBACKEND_\w+"),
    _marker("lmdeploy", ("lmdeploy", "[TM][", "turbomind"), r"\blmdeploy\b|\[TM\]\[|\bturbomind\b"),
    _marker("llamacpp", ("llama_model_load", "llm_load_", "llama_new_context", "ggml_", "srv ", "llama-server", "slot ",
                         "main: ", "[main] ", '"tid":"', 'tid="'),
            r"\bllama_model_load|\bllm_load_|\bllama_new_context|\bggml_\w+:|\bsrv +\w+: |\bllama-server\b"
            r"|\bslot +\w+: id +\d+ \| task |\bmain: (?:HTTP server|loading model|server is listening)|\[main\] "
            r'|^\{(?=.*"tid":"\d+")(?=.*"function":"\w+")'  # the 2024 server's JSON lines, in any key order
            r'|^[A-Z]+ \[\w+\] .* \| .*\btid="\d+" timestamp=\d+'),  # ... and its text lines: `DEBUG [update_slots] msg | k=v`
    _marker("ray", ("(ServeController", "(ServeReplica:", "(ProxyActor", "(HTTPProxyActor", "ray.serve", "ApplicationStatus.",
                    "SERVE_CONTROLLER_ACTOR", "Started a local Ray instance", "Connecting to existing Ray cluster"),
            r"\((?:ServeController|ServeReplica:[^ )]*|ProxyActor|HTTPProxyActor) pid=|\bray\.serve\b"
            r"|ApplicationStatus\.|SERVE_CONTROLLER_ACTOR|Started a local Ray instance|Connecting to existing Ray cluster"),
    # vLLM's own process tags, its name, its logger's header `INFO 05-21 11:59:44 [core.py:493] ` (anywhere: a CI
    # stamp or a pytest node id may come first) and the older header `INFO 08-09 08:48:57 x.py:199] `: tentative
    _marker("vllm", (" pid=", "vLLM", "vllm", "INFO ", "WARNING ", "ERROR ", "DEBUG "),
            r"\((?:APIServer|EngineCore\w*|VllmWorker[^)]*|Worker(?:_\w+)?|RayWorkerWrapper|LLMRayActor) pid=|\bvLLM\b|\bvllm\b"
            r"|\b(?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+\.py:\d+\]", decisive=False),
)


def engine_of_line(line: str) -> tuple[str, bool] | None:
    """``(engine, decisive)`` when ``line`` carries an engine's marker, else None.

    >>> engine_of_line("2024-03-06T17:53:31Z ERROR text_generation_launcher: Shard 0 failed to start")
    ('tgi', True)
    """
    for engine, decisive, literals, pattern in _MARKERS:
        if any(literal in line for literal in literals) and pattern.search(line) is not None:
            return engine, decisive
    return None


def packs_for(engine: str | None) -> tuple[RulePack, ...]:
    """The packs a log of ``engine`` is read with: COMMON, the engine's own, GENERIC. None (no marker seen
    yet): every engine's failure and noise rules, no engine's readiness."""
    return (COMMON, *_STACKS.get(engine or "unknown", ()), GENERIC)


def detect_engine(lines: Iterable[str]) -> str | None:
    """Guess the engine from a log's first lines (one of ENGINES but "auto" and "generic"), None when unsure.

    >>> detect_engine(["[2026-03-27 09:31:17] server_args=ServerArgs(model_path='x')"])
    'sglang'
    """
    tentative: str | None = None
    for engine, decisive in filter(None, map(engine_of_line, lines)):
        if decisive:
            return engine
        tentative = tentative or engine
    return tentative
