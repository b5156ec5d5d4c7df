"""Packs for TGI, Triton + TensorRT-LLM, LMDeploy, Ray Serve LLM and llama.cpp: their ready and fatal lines.

The comments name the source of each line (the engine's format string, or a real log in tests/data/logs);
every rule has a positive case and a near miss in ``tests/test_logs_rules.py``.
"""

from __future__ import annotations

from toolkit.logs.packs import Hints
from toolkit.logs.rules import Phase, Rule, RulePack, Verdict

__all__ = ["TGI", "TRTLLM", "LMDEPLOY", "RAY_SERVE", "LLAMACPP"]

B, F, W, P, R, INFO = Verdict.BENIGN, Verdict.FATAL, Verdict.WARNING, Verdict.PROGRESS, Verdict.READY, Verdict.INFO

# Hugging Face text-generation-inference: a Rust launcher (tracing: `2024-03-06T17:53:22.335714Z  INFO
# shard-manager: text_generation_launcher: ...`) starts Python shards and the Rust router.
TGI = RulePack("tgi", (
    # router/src/server.rs `tracing::info!("Connected")`: the router reached the warmed-up shards and serves
    Rule("tgi_connected", r"text_generation_router\S*: (?:[\w/.-]+:\d+: )?Connected\s*$", R, phase=Phase.READY,
         literal="Connected"),
    # router/src/server.rs: a generate request answered, `tracing::info!("Success")` inside its span (server.rs:289 in
    # TGI 1.3): serving
    Rule("tgi_request_success", r"text_generation_router::server: (?:[\w/.-]+:\d+: )?Success\s*$", INFO, literal="Success"),
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
    # the router's gRPC client cannot reach a shard's unix socket (router/client: "Server error: error trying to connect:
    # No such file or directory (os error 2)" on every prefill, issue 24's public log): the shard is gone though the
    # router said `Connected`; ECONNREFUSED (os error 111) the same
    Rule("tgi_shard_unreachable", r"Server error: error trying to connect: .*\(os error (?:2|111)\)", F,
         literal="error trying to connect"),
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
    # the backend's model instance could not be created: glog `E0306 ... backend_model.cc:691] ERROR: Failed to create
    # instance: ...` (issue 24's public Triton log; the file:line is the server's own, printed in the glog header)
    Rule.text("triton_instance_failed", "Failed to create instance: ", F),
    # a Python backend model that cannot start (server#8578, Triton's vLLM backend): "[vllm] Failed to start engine",
    # pb_stub.cc "Failed to initialize Python stub: TypeError: ..."
    Rule("triton_python_backend_failed", r"Failed to start engine|Failed to initialize Python stub", F,
         literal=("Failed to start engine", "Failed to initialize Python stub")),
    # tensorrt_llm/common/logger: "[TensorRT-LLM][ERROR] tensorrt_llm::common::TllmException: ... Assertion failed: ..."
    # (backend#191); the PyTorch flow's Python logger: "[TRT-LLM] [E] ..."
    Rule("trtllm_error", r"\[TensorRT-LLM\]\[ERROR\]|\[TRT-LLM\] \[E\]", F, literal=("[TensorRT-LLM][ERROR]", "[TRT-LLM] [E]"),
         after_ready=W),
))

# LMDeploy: Python logger `2024-08-05 05:40:52,191 - lmdeploy - WARNING - [file.py:N - ]msg` (lmdeploy/utils.py
# _FORMAT), TurboMind's C++ logger `[TM][ERROR] msg` (newer `[TM][ERROR][time] msg`, src/turbomind/core/logger.cc),
# and uvicorn, whose `Application startup complete.` is GENERIC's ready line.
LMDEPLOY = RulePack("lmdeploy", (
    # serve/openai/api_server.py prints this three times right before uvicorn.run
    Rule("lmdeploy_hint_open", r"HINT: +Please open .* in a browser for detailed api usage", P, phase=Phase.HTTP_UP,
         literal="Please open"),
    Rule("lmdeploy_gemm_config", r"gemm_config\.in is not found; using default GEMM algo", B, literal="gemm_config.in"),
    # the PyTorch engine's TP workers and loop (lmdeploy#2055): "lmdeploy - ERROR - Rank[2] failed.",
    # "Engine loop failed with error: map::at"
    Rule("lmdeploy_engine_failed", r"\bRank\[\d+\] failed|Engine loop failed", F, literal=("] failed", "Engine loop failed")),
    # TurboMind's fatal level aborts the process (Logger::LogFatalImpl -> std::abort)
    Rule("turbomind_fatal", r"\[TM\]\[FATAL\]", F, literal="[TM][FATAL]"),
    Rule("turbomind_error", r"\[TM\]\[ERROR\]", F, literal="[TM][ERROR]", after_ready=W),
))

# Ray Serve (Ray Serve LLM runs vLLM: its logs are read with this pack and vLLM's). Replica and controller lines
# carry Ray's tags (`(ServeReplica:default:LLMServer pid=N)`, `(ServeController pid=N)`), stripped before matching.
RAY_SERVE = RulePack("ray", (
    # `serve run`: "Application 'default' is ready at http://127.0.0.1:8000/." (ray#55754); "Deployed app 'x' successfully."
    Rule("ray_app_ready", r"Application '[^']*' is ready at |Deployed app '[^']*' successfully|Deployed Serve app successfully",
         R, phase=Phase.READY, literal=("is ready at", "Deployed ")),
    Rule("ray_deploying", r"Deploying new version of Deployment|Adding \d+ replicas? to (?:Deployment|backend)"
         r"|Waiting for \S+ to be RUNNING|Started detached Serve instance",
         P, phase=Phase.WEIGHTS_LOADING, literal=("Deploying new version", "Adding ", "Waiting for ", "Started detached")),
    # a replica's constructor raised (ray#16597: "Exception raised in creation task: The actor died because of an
    # error raised in its creation task"); an application that cannot deploy
    Rule("ray_replica_failed", r"Exception raised in creation task|The actor died because of an error raised in its creation task"
         r"|Deploying app '[^']*' failed|DEPLOY_FAILED|Failed to (?:start|initialize) replica",
         F, literal=("creation task", "Deploying app", "DEPLOY_FAILED", "Failed to ")),
    # serve/_private/deployment_state.py ActorReplicaWrapper.check_ready: logger.exception(f"Exception in {replica_id},
    # the replica will be stopped.") (ReplicaID prints "Replica(id='..', deployment='..', app='..')"; before 2.10
    # f"Exception in replica '{replica_tag}', ..."): the replica's constructor raised, its traceback follows
    Rule("ray_replica_exception", r"Exception in (?:replica '[^']*'|Replica\(id=[^)]*\)), the replica will be stopped",
         F, literal="the replica will be stopped", header=True),
    # the RayTaskError rendering of that failure: "ray::ServeReplica:<app>:<deployment>.initialize_and_get_metadata()
    # (pid=.., ip=.., actor_id=.., repr=...)" heading the replica's own traceback (kuberay#4366, ray#53407)
    Rule("ray_replica_init_failed", r"\bray::ServeReplica:\S+\.initialize_and_get_metadata\(\) \(pid=",
         F, literal="initialize_and_get_metadata() (pid="),
    # older Ray Serve (1.x backend/deployment wording, issue 24's public log): "Exception in deployment 'x'" heading the
    # replica's traceback; the task error itself is named after its cause: "RayTaskError(AttributeError): ..."
    Rule("ray_deployment_exception", r"Exception in deployment '[^']*'", F, literal="Exception in deployment", header=True),
    Rule("ray_task_error", r"\bRayTaskError\(\w+\)", F, literal="RayTaskError(", after_ready=W),
    Rule("ray_actor_died", r"\b(?:ActorDiedError|RayActorError)\b|The actor died unexpectedly before finishing this task",
         F, literal=("ActorDiedError", "RayActorError", "actor died unexpectedly"), after_ready=W),
))

# llama.cpp's server (llama-server): `srv    load_model: ...`, `main: ...` (older), `INFO [main] ... |` (2024 JSON-ish).
# tools/server/server.cpp: the HTTP server starts BEFORE the model loads (to answer /health with 503), so
# "HTTP server is listening" is not readiness; "model loaded" and "server is listening on" are.
LLAMACPP = RulePack("llamacpp", (
    # the 2024 server's JSON log format (examples/server/utils.hpp server_log: {"tid":"..","timestamp":N,"level":"INFO",
    # "function":"main","line":N,"msg":"model loaded",...}; read in any key order) says the same words
    Rule("llamacpp_ready", r"\b(?:main|llama_server): (?:model loaded|server is listening on)|\[main\] model loaded"
         r"|router server is listening on|update_slots: all slots are idle|^llama server listening at"
         r'|"msg":"(?:model loaded|all slots are idle)"|(?:^|\b(?:INFO|DEBUG) )\[update_slots\] all slots are idle',
         R, phase=Phase.READY, literal=("model loaded", "is listening on", "all slots are idle", "listening at")),
    # serving: a slot working on a task (task -1 is an idle slot), a completion request answered, the router proxying
    # or a request's parameters read and a slot chosen for it (params_from_, "selected slot by")
    Rule("llamacpp_serving", r"\| task \d+ \| |log_server_r: request: POST \S+ \S+ 200|^request: POST /\S*completions \S+ 200"
         r'|proxying request to model|\bparams_from_: |\| selected slot by |"msg":"slot is processing task"|"function":"print_timings"',
         INFO, literal=("| task ", "request: POST", "proxying request", "params_from_: ", "selected slot by",
                        '"msg":"slot is processing task"', '"function":"print_timings"')),
    Rule("llamacpp_http_listening", r"HTTP server (?:is )?listening|\b(?:main|llama_server): loading model",
         P, phase=Phase.HTTP_UP, literal=("HTTP server", "loading model")),
    Rule("llamacpp_load_failed", r"exiting due to (?:model loading|HTTP server) error|error loading model|failed to load model"
         r"|unable to load model|failed to initialize HTTP server|GGML_ASSERT|ggml_abort|cudaMalloc failed"
         r"|failed to allocate \S+ buffer",
         F, literal=("exiting due to", "error loading model", "failed to load model", "unable to load model",
                     "failed to initialize HTTP", "GGML_ASSERT", "ggml_abort", "cudaMalloc failed", "failed to allocate")),
))
