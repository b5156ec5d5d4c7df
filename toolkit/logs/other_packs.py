"""Packs for the other serving engines: Hugging Face TGI, Triton + TensorRT-LLM, LMDeploy,
Ray Serve LLM and the llama.cpp server: at least their ready lines and their fatal lines.

Each is chosen automatically when the log shows its markers (:mod:`toolkit.logs.detect`).
The comments name the source of each line (the engine's own format string, or the real log
in ``tests/data/logs`` it was read from); every rule has a positive case and a near miss in
``tests/test_logs_rules.py``.
"""

from __future__ import annotations

from toolkit.logs.packs import Hints
from toolkit.logs.rules import Phase, Rule, RulePack, Verdict

__all__ = ["TGI", "TRTLLM"]

B, F, W, P, R = Verdict.BENIGN, Verdict.FATAL, Verdict.WARNING, Verdict.PROGRESS, Verdict.READY

# Hugging Face text-generation-inference: a Rust launcher (tracing: `2024-03-06T17:53:22.335714Z  INFO
# shard-manager: text_generation_launcher: ...`) starts Python shards and the Rust router.
TGI = RulePack("tgi", (
    # router/src/server.rs `tracing::info!("Connected")`: the router reached the warmed-up shards and serves
    Rule("tgi_connected", r"text_generation_router\S*: (?:[\w/.-]+:\d+: )?Connected\s*$", R, phase=Phase.READY,
         literal="Connected"),
    Rule("tgi_shard_ready", r"Shard ready in |Shard \d+ ready in ", P, phase=Phase.WEIGHTS_LOADED, literal="ready in "),
    Rule("tgi_waiting_for_shard", r"Waiting for shard(?: \d+)? to be ready", P, phase=Phase.WEIGHTS_LOADING,
         literal="Waiting for shard"),
    Rule("tgi_warmup", r"Warming up model|Setting max batch total tokens to", P, phase=Phase.WARMUP,
         literal=("Warming up model", "Setting max batch total tokens")),
    # launcher/src/main.rs: "We're not using custom kernels." and flash-attention import warnings on older GPUs
    Rule("tgi_no_custom_kernels", r"We're not using custom kernels|Could not import Flash Attention enabled models", B,
         literal=("custom kernels", "Could not import Flash Attention")),
    # server/text_generation_server/cli.py: logger.exception("Error when initializing model"), its traceback follows
    Rule.text("tgi_init_error", "Error when initializing model", F, header=True, notice=True),
    # launcher/src/main.rs shard_manager: "Shard complete standard error output:\n{err}" then, when killed,
    # "Shard process was signaled to shutdown with signal {signal}"; spawn_shards: "Shard {rank} failed to start";
    # main returns LauncherError, printed "Error: ShardCannotStart"
    Rule.text("tgi_shard_stderr", "Shard complete standard error output", F, notice=True),
    Rule("tgi_shard_signaled", r"Shard process was signaled to shutdown with signal \d+|Download process was signaled",
         F, literal=("was signaled to shutdown",), hint=Hints.KILLED),
    Rule("tgi_shard_failed", r"Shard \d+ failed to start|Shard \d+ crashed|Webserver Crashed|Method Warmup encountered an error"
         r"|Download encountered an error",
         F, literal=("failed to start", "crashed", "Crashed", "Warmup encountered", "Download encountered"), notice=True),
    Rule("tgi_launcher_error", r"^Error: (?:ShardCannotStart|ShardFailed|ShardDisconnected|DownloadError|WebserverFailed"
         r"|WebserverCannotStart|NotEnoughCUDADevices|ArgumentValidation|Warmup)", F, literal="Error: ", notice=True),
))

# NVIDIA Triton Inference Server (glog: `I0120 08:28:13.508038 2049 server.cc:305] "msg"`, quoted since 24.x)
# with the TensorRT-LLM backend, and trtllm-serve (uvicorn: its `Application startup complete.` is GENERIC's).
TRTLLM = RulePack("trtllm", (
    # main.cc once the repository is loaded: "Started GRPCInferenceService at 0.0.0.0:8001", "Started HTTPService at
    # 0.0.0.0:8000", "Started Metrics Service at 0.0.0.0:8002"; 20.03 said "Started GRPCService" (server#2312)
    Rule("triton_started", r"Started (?:GRPCInferenceService|GRPCService|HTTPService) at", R, phase=Phase.READY,
         literal="Started "),
    Rule("triton_starting_http", r"Starting (?:HTTPService|Metrics Service) at", P, phase=Phase.HTTP_UP, literal="Starting "),
    Rule("triton_model_loaded", r"successfully loaded '[^']+'", P, phase=Phase.WEIGHTS_LOADED, literal="successfully loaded"),
    # the model table after loading: "| tensorrt_llm | 1 | UNAVAILABLE: Internal: unexpected error ..." (backend#33)
    Rule("triton_model_unavailable", r"\|\s*UNAVAILABLE: ", F, literal="UNAVAILABLE: "),
    # model_lifecycle.cc: E-level "failed to load 'tensorrt_llm' version 1: ..."; main.cc "error: creating server: ..."
    Rule("triton_load_failed", r"failed to load '[^']+' version|^error: creating server: |failed to load all models",
         F, literal=("failed to load",  "error: creating server")),
    # tensorrt_llm/common/logger: "[TensorRT-LLM][ERROR] tensorrt_llm::common::TllmException: ... Assertion failed: ..."
    # (backend#191); the PyTorch flow's Python logger: "[TRT-LLM] [E] ..."
    Rule("trtllm_error", r"\[TensorRT-LLM\]\[ERROR\]|\[TRT-LLM\] \[E\]", F, literal=("[TensorRT-LLM][ERROR]", "[TRT-LLM] [E]"),
         after_ready=W),
))
