"""The rule packs: what SGLang, vLLM and the common Python/CUDA/NCCL stack print.

First match wins, so benign rules come before the fatal rules they resemble. The comments name the real log
or issue behind a rule; each has a positive case and a near miss in ``tests/test_logs_rules.py``.
"""

from __future__ import annotations

from toolkit.logs.rules import Phase, Rule, RulePack, Verdict

__all__ = ["COMMON", "GENERIC", "SGLANG", "VLLM", "SERVING_RULES", "REQUEST_NAMED", "add_rule", "Hints"]

B, F, W, P, R, M, INFO = (Verdict.BENIGN, Verdict.FATAL, Verdict.WARNING, Verdict.PROGRESS, Verdict.READY,
                       Verdict.METRIC, Verdict.INFO)


class Hints:
    """What to try, per failure family (quoted in Failure.hint and in errors)."""

    OOM = ("GPU memory ran out: lower --mem-fraction-static (SGLang) or --gpu-memory-utilization (vLLM), "
           "or lower --cuda-graph-max-bs, --max-running-requests, --max-model-len / --context-length; "
           "check that no other process holds GPU memory (nvidia-smi)")
    KV_TOO_SMALL = ("the KV cache cannot hold one request of the configured length: lower --max-model-len "
                    "(vLLM) / --context-length (SGLang), or give the cache more memory "
                    "(--gpu-memory-utilization / --mem-fraction-static), or use more GPUs (--tp)")
    # SGLang 0.5.23 says "Not enough memory. Please try to increase --mem-fraction-static." when the static
    # budget leaves the KV cache no token: the OOM hint ("lower --mem-fraction-static") pointed the wrong way.
    STATIC_TOO_SMALL = ("the memory fraction leaves the KV cache no room once the weights are loaded: raise "
                        "--mem-fraction-static (SGLang) / --gpu-memory-utilization (vLLM), or use more GPUs (--tp), "
                        "and check that no other process holds GPU memory (nvidia-smi)")
    PORT = ("the port is already held: find the holder (ss -ltnp | grep :PORT, or Host.port_holder(port)) "
            "and stop it, or launch on another --port")
    NCCL = ("NCCL failed between ranks: rerun with NCCL_DEBUG=INFO and check the NCCL_* and *_SOCKET_IFNAME "
            "environment on every rank (NCCL_IB_DISABLE, NCCL_P2P_DISABLE), and that all GPUs are visible")
    IMPORT = ("a module failed to import: check the server's Python environment (which python; "
              "pip list | grep -i NAME) and that sglang/vllm, torch and their kernels come from matching builds")
    CUDA = ("a CUDA error: check the driver/toolkit versions against the wheel's CUDA build, and rerun with "
            "CUDA_LAUNCH_BLOCKING=1 to locate the kernel")
    ARCH = ("this GPU or model is not supported by this build: check the engine's supported models and "
            "compute capability, or try another --attention-backend / a newer release")
    MODEL = ("the model could not be found or read: check --model-path / --model, HF_TOKEN for gated repos, "
             "and that the host can reach the hub or has the files locally")
    EXITED = ("a process exited with an error: its cause is usually logged just above it (a rank's "
              "traceback); read the quoted lines, or rerun the command by hand")
    KILLED = ("the process was killed (SIGKILL): most often the kernel OOM killer ran out of host RAM "
              "(dmesg | grep -i oom); lower host memory use (fewer loader threads, smaller swap space)")
    CRASH = "a native crash: note the library in the stack, try --disable-cuda-graph, and check driver versions"
    WATCHDOG = ("a rank stopped making progress: dump its stacks (py-spy dump --pid PID), check NCCL "
                "(NCCL_DEBUG=INFO) and raise --watchdog-timeout only once the cause is known")
    CUDA_GRAPH = ("CUDA graph capture failed: retry with --disable-cuda-graph to confirm, then lower "
                  "--cuda-graph-max-bs or raise memory headroom")
    TRITON = "a Triton kernel failed to compile or load: check the triton version against torch's, and clear ~/.triton/cache"
    ARGS = "the command line was rejected: compare the flags with `--help` of this engine version"


# Lines that look alarming on every engine and are not.
_GENERIC_BENIGN: tuple[Rule, ...] = (
    Rule("exception_ignored", r"^Exception ignored in", B, literal="Exception ignored in", header=True),  # interpreter shutdown
    Rule.text("rlimit_nofile", "Fail to set RLIMIT_NOFILE", B),
    Rule.text("cpuinfo_error", "Error in cpuinfo", B),  # cpuinfo on ARM/VMs: "prctl(PR_SVE_GET_VL) failed"
    Rule("flash_attn_fallback",
         r"(?i)(flash[-_ ]?att(?:n|ention)|\bFA ?(?:version )?\d).*(not (?:available|installed|supported|found)|fall(?:ing)? ?back|cannot use|can't use)"
         r"|cannot use (?:flash|FA)",
         B, literal=("flash", "fa ", "fa2", "fa3"), ignore_case=True),
    Rule("xformers_fallback", r"(?i)xformers.*(not (?:available|installed|found)|fall(?:ing)? ?back|can't load|cannot load|failed to load)",
         B, literal="xformers", ignore_case=True),
    Rule("triton_unavailable", r"(?i)triton (?:is )?not (?:available|installed|found)", B, literal="triton", ignore_case=True),
    Rule.text("vllm_c_import", "Failed to import from vllm._C", B),  # CPU-only or import-order noise (vllm#7514)
    Rule("hf_weights_not_initialized", r"Some weights of .+ were not (?:initialized|used)", B, literal="Some weights of"),
    Rule("hf_hub_probe_404", r"huggingface\.co(?::443)? \"(?:HEAD|GET) [^\"]+\" 40[134]", B, literal="huggingface.co"),
    Rule("nccl_info", r"NCCL INFO", INFO, literal="NCCL INFO"),  # before the error rules: NCCL INFO lines mention errors freely
    Rule("torch_cpp_warning", r"^(?:Warning|WARNING): |^\[W\d{3,4} ", B, literal=("Warning", "WARNING", "[W")),
    Rule("deprecation_warning", r"(?i)\bdeprecat", B, literal="deprecat", ignore_case=True),
    # Case-sensitive "Warning": a real NCCL failure says "torch.distributed.DistBackendError: NCCL error ...
    # (run with NCCL_DEBUG=WARN for details)" and must not be dimmed (seen on an H200, NCCL 2.28.9).
    Rule("torch_distributed_warning", r"torch\.distributed\S*.*\b\w*Warning\b|UserWarning: .*(?:barrier|process group|TypedStorage)",
         B, literal=("distributed", "UserWarning"), ignore_case=False),
    # CPython's resource tracker when the processes it served have exited, leaving their semaphores
    # (Lib/multiprocessing/resource_tracker.py, 3.8-3.14: "resource_tracker: There appear to be %d leaked %s objects
    # to clean up at shutdown"): before readiness the server's interpreter is gone (issue 24: log 436, weights loading
    # at 47/49 then this line, killed without a Python error); after it, a stop's echo (a warning). Before
    # `python_warning`: the tracker says it as a UserWarning.
    Rule("interpreter_shutdown_leaks", r"resource_tracker: There appear to be \d+ leaked \w+ objects to clean up at shutdown",
         F, literal="resource_tracker: There appear", after_ready=W, hint=Hints.KILLED),
    Rule("python_warning", r"\b\w*Warning: ", W, literal="Warning: "),
)

_GENERIC_FATAL: tuple[Rule, ...] = (
    Rule("address_in_use", r"(?i)address already in use|EADDRINUSE|error while attempting to bind on address",
         F, literal=("address already in use", "eaddrinuse", "attempting to bind"), ignore_case=True, hint=Hints.PORT),
    # a pydantic validation error's detail line ("Value error, <message> [type=value_error, input_value=...]"): vLLM's
    # engine arguments are pydantic dataclasses, so a bad --max-model-len stops the server here (LongVT#9)
    Rule("config_value_error", r"^Value error, .*\[type=value_error\b", F, literal="[type=value_error", after_ready=W),
    Rule("cuda_oom", r"(?i)CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|\bOOM\b.*(?:GPU|CUDA)",
         F, literal=("out of memory", "outofmemoryerror", "oom"), ignore_case=True, hint=Hints.OOM),
    Rule("kv_cache_too_small",
         r"larger than the maximum number of tokens that can be stored in KV cache|No available memory for the cache blocks"
         r"|To serve at least one request with the model's max seq len|KV cache is needed, which is larger than the available",
         F, literal=("KV cache", "cache blocks", "max seq len"), hint=Hints.KV_TOO_SMALL),
    Rule("nccl_watchdog_timeout", r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*[Tt]imeout|NCCL (?:communicator|operation).*timed? ?out",
         F, literal=("Watchdog caught", "ProcessGroupNCCL", "NCCL"), hint=Hints.NCCL),
    Rule("nccl_error", r"NCCL error|nccl(?:Internal|System|UnhandledCuda|InvalidUsage|RemoteError)Error|DistBackendError|ncclCommInitRank failed",
         F, literal=("NCCL error", "ncclInternal", "ncclSystem", "ncclUnhandled", "ncclInvalid", "ncclRemote", "DistBackendError", "ncclCommInitRank failed"),
         hint=Hints.NCCL),
    # native crashes: the kernel's and libc's words, OpenMPI's signal handler ("*** Process received signal ***"),
    # and the C++ runtime's abort ("terminate called after throwing an instance of 'c10::Error'")
    # (libsupc++ vterminate.cc and eh_terminate.cc: "terminate called after throwing an instance of", "... without an
    # active exception", "... recursively")
    Rule("segfault", r"Segmentation fault|SIGSEGV|Fatal Python error|core dumped|SIGABRT|Aborted \(core"
         r"|\*\*\* Process received signal \*\*\*|\*\*\* End of error message \*\*\*"
         r"|terminate called (?:after throwing|without an active exception|recursively)",
         F, literal=("Segmentation fault", "SIGSEGV", "Fatal Python error", "core dumped", "SIGABRT", "Aborted (", "*** ",
                     "terminate called"), hint=Hints.CRASH),
    # mpirun (TensorRT-LLM, Triton's launch_triton_server.py) reporting a rank that exited non-zero
    Rule("mpirun_rank_failed", r"mpirun detected that one or more processes exited with non-zero status"
         r"|Primary job +terminated normally, but \d+ process returned|mpirun noticed that process rank \d+",
         F, literal=("mpirun detected", "Primary job", "mpirun noticed"), hint=Hints.EXITED),
    # the shell's report of a SIGKILL: "Killed", "[1]+  Killed   python ...", "./run.sh: line 48: 27 Killed python3 ..."
    Rule("killed", r"^(?:\[\d+\]\+?\s+)?Killed(?:\s*$|\s{2,}|\s+(?:python|vllm|sglang))|\bline \d+: +\d+ Killed\s",
         F, literal="Killed", hint=Hints.KILLED),
    # the shell's report of another fatal signal, bare (issue 24: a TP rank's frames, then "Aborted"): bash prints
    # strsignal()'s words, "Aborted", "Aborted (core dumped)", "[1]+  Aborted  python ...", "run.sh: line 5: 27 Aborted
    # (core dumped) python ..."; under a Chinese or German locale glibc's translations (po/zh_CN.po, po/de.po: 已放弃
    # Aborted, 段错误 Segmentation fault, 已杀死 Killed, "(核心已转储)" core dumped; Abgebrochen, Speicherzugriffsfehler, Getötet)
    Rule("signal_report", r"^(?:\[\d+\]\+?\s+)?(?:Aborted|Bus error|Illegal instruction|Floating point exception|已放弃|段错误"
         r"|已杀死|Abgebrochen|Speicherzugriffsfehler|Getötet)(?: ?[(（][^)）]*[)）])?(?:\s*$|\s{2,}|\s+(?:python|vllm|sglang))"
         r"|\bline \d+: +\d+ (?:Aborted|Bus error|Illegal instruction|Floating point exception)\b",
         F, literal=("Aborted", "Bus error", "Illegal instruction", "Floating point exception", "已放弃", "段错误", "已杀死",
                     "Abgebrochen", "Speicherzugriffsfehler", "Getötet"), hint=Hints.CRASH),
    # a native stack dump's frames, whatever wrote them (glibc backtrace_symbols(3): "NAME(SYMBOL+0xOFF) [0xADDR]", the
    # process named by setproctitle: "VLLM::EngineCore(_PyEval_EvalFrameDefault+0x5b1) [0x55d7c3a0e1b1]"; issue 24: vLLM
    # 0.22's EngineCore printed only these, "--- " in front, under its ERROR header)
    # c10's form (torch's c10::get_backtrace): "frame #19: <unknown function> + 0x19459c (0x55f78598859c in
    # sglang::scheduler_DP0_TP0)". After readiness a warning: a request's caught C++ error carries such frames too.
    Rule("native_backtrace", r"^(?:-{2,} ?|#\d+ +)?[\w:./<>-]+\([\w.:<>~]*\+0x[0-9a-fA-F]+\)(?: \[0x[0-9a-fA-F]+\])?"
         r"|^frame #\d+: .+ \+ 0x[0-9a-fA-F]+ \(0x[0-9a-fA-F]+ in \S+\)",
         F, literal=("+0x", "+ 0x"), hint=Hints.CRASH, after_ready=W, notice=True),
    # Kubernetes' reasons for a container that is not running, as `kubectl describe pod` lays them out under
    # "State:" / "Last State:" (kubectl describe.go describeContainerState: LEVEL_2 "Reason:\t%s"): kubelet's
    # CrashLoopBackOff (pkg/kubelet/container/sync_result.go ErrCrashLoopBackOff), the runtime's Error and OOMKilled
    # for a terminated one (containerd CRI container_status). Indented by kubectl itself, so the rule says so with
    # `^\s+` (a quoted source line is never read fatal; a rule that asks for the indent reads it: issue 24, log 380).
    Rule("kubernetes_container_failed", r"^\s+Reason:\s+(?:CrashLoopBackOff|Error|OOMKilled)\s*$", F,
         literal="Reason:", after_ready=W, hint=Hints.EXITED),
    # Slurm's words for a job or step it ended (slurmstepd: "*** JOB 4945 ON node CANCELLED AT ... DUE TO TIME LIMIT ***";
    # srun: "Job step aborted: Waiting up to 47 seconds for job step to finish.")
    Rule("slurm_job_ended", r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT |^srun: Job step aborted", F,
         literal=("CANCELLED AT", "Job step aborted"), hint=Hints.EXITED),
    Rule("exit_code_killed", r"(?i)exit(?:ed)?[ _]?(?:with )?(?:code|status)[ =:]*(?:-9|137)\b|exitcode[ =:]+(?:-9|137)\b",
         F, literal=("exit", "Exit"), hint=Hints.KILLED),
    Rule("exit_code_nonzero", r"(?i)exit(?:ed)?[ _]?(?:with )?(?:code|status)[ =:]*(?:-?[1-9]\d*)|exitcode[ =:]+-?[1-9]",
         F, literal=("exit", "Exit"), hint=Hints.EXITED),
    # ggml's CUDA backend names its runtime (ggml-cuda/common.cuh GGML_CUDA_NAME: "CUDA", "ROCm" under HIP, "MUSA"):
    # ggml_cuda_error prints "ROCm error: unspecified launch failure" before GGML_ABORT (issue 24: log 441)
    Rule("cuda_error", r"CUDA error: |^ ?(?:ROCm|MUSA) error: |CUDA driver error|cudaErrorIllegalAddress|device-side assert triggered"
         r"|no kernel image is available",
         F, literal=("CUDA error", "ROCm error: ", "MUSA error: ", "CUDA driver error", "cudaError", "device-side assert",
                     "no kernel image"), hint=Hints.CUDA),
    # the ROCm runtime aborting the process on a device exception (ROCclr device/rocm/rocdevice.cpp Device::callbackQueue:
    # "Callback: Queue %p aborting with error : %s code: 0x%x", then abort(); issue 24: log 441)
    Rule("rocm_queue_abort", r"aborting with error : HSA_STATUS_ERROR", F, literal="aborting with error : ", hint=Hints.CUDA),
    # the tail of torch's CUDA error report (c10/cuda/CUDAException.cpp), when the log cut its "CUDA error: ..." head:
    # the help line torch puts right under it (c10/cuda/CUDAMiscFunctions.cpp get_cuda_error_help: "Search for
    # `cudaErrorAssert' in https://docs.nvidia.com/cuda/..." torch 2.8+, `hipError...` under ROCm; issue 24: log 422),
    # "CUDA kernel errors might be asynchronously reported ...", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    # "Exception raised from c10_cuda_check_implementation at ..." (TGI#2593: the NCCL watchdog's CUDA error)
    Rule("cuda_error_report", r"^(?:Search for `(?:cuda|hip)Error\w*' in https://docs\.nvidia\.com/cuda/"
         r"|CUDA kernel errors might be asynchronously reported|For debugging consider passing "
         r"CUDA_LAUNCH_BLOCKING=1|Exception raised from c10_cuda_check_implementation )",
         F, literal=("' in https://docs.nvidia.com/cuda/", "CUDA kernel errors", "CUDA_LAUNCH_BLOCKING", "c10_cuda_check"),
         hint=Hints.CUDA),
    Rule("triton_error", r"Triton Error|triton\.compiler\.errors|CompilationError|PTXASError|error: .*\.ptx",
         F, literal=("Triton Error", "triton.compiler", "CompilationError", "PTXAS", ".ptx"), hint=Hints.TRITON),
    Rule("unsupported_arch", r"(?i)architectures? \[.*\] (?:is|are) not supported|only supports sm\d+|compute capability.*not supported|not supported on this (?:GPU|device)",
         F, literal=("not supported", "only supports"), ignore_case=True, hint=Hints.ARCH),
    Rule("model_not_found",
         r"is not a local folder and is not a valid model identifier|Repository Not Found|GatedRepoError|Cannot access gated repo|RepositoryNotFoundError|No such file or directory: '[^']*(?:config\.json|\.safetensors)",
         F, literal=("valid model identifier", "Repository Not Found", "GatedRepo", "gated repo", "RepositoryNotFound", "No such file"),
         hint=Hints.MODEL),
    Rule("python_import_error", r"^(?:ModuleNotFoundError|ImportError): ", F, literal="Error: ", hint=Hints.IMPORT),
    # `ambiguous option: --x could match --x-y, --x-z`: a removed flag whose name prefixes newer ones (argparse allow_abbrev)
    Rule("argparse_error", r"^(?:[\w.\-/ ]+): error: (?:unrecognized arguments|argument |the following arguments are required"
         r"|invalid choice|ambiguous option)",
         F, literal=": error: ", hint=Hints.ARGS),
    # an engine process announcing its own traceback, often the first line of an excerpt (before any engine marker):
    # SGLang 0.2/0.3 "Exception in ControllerSingle:", "Exception in ModelTpServer:" (sglang#1087)
    Rule("process_exception_header", r"^Exception in (?:Controller\w*|ModelTpServer|\w+Manager|\w+Worker\w*):$",
         F, literal="Exception in ", header=True, notice=True),
    # multiprocessing's words for a child whose target raised; its traceback follows (vLLM "Process EngineCore_0:")
    Rule("python_process_died", r"^Process [\w.:-]+:$", F, literal="Process ", header=True, notice=True),
    # transformers serve --continuous-batching: the batching thread logs its death and stops; the server keeps
    # answering, every request 503 (transformers 5.24.0 generation/continuous_batching/continuous_api.py:1150,
    # seen on an H200: docs/real-gpu/README.md)
    Rule("cb_generation_loop_error", r"Error in generation loop: ", F, literal="Error in generation loop: ",
         hint="the continuous-batching worker died and every request now fails (503): read its error; for "
              "'Memory footprint ... is more than available memory' lower --cb-num-blocks or --cb-max-batch-tokens"),
    # a bare exception line outside a grouped traceback (truncated or reversed logs)
    # (Ray names a task's error after its cause: "RayTaskError(AttributeError): ...", ray/exceptions.py as_instanceof_cause)
    Rule("python_exception_line", r"^(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Interrupt)|Exception)\b(?:\([\w.]+\))?(?::|$)", F,
         literal=("Error", "Exception", "Interrupt"), after_ready=W),
)

_GENERIC_REQUEST: tuple[Rule, ...] = (
    # request-level trouble: never a server failure
    Rule("http_client_error", r"\"(?:GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) [^\"]*HTTP/[\d.]+\" 4\d\d", B, literal="HTTP/"),
    Rule("http_server_error", r"\"(?:GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) [^\"]*HTTP/[\d.]+\" 5\d\d", W, literal="HTTP/"),
    Rule("client_disconnect", r"(?i)client disconnected|Aborted request|request .* (?:aborted|cancelled)|CancelledError",
         B, literal=("disconnected", "aborted", "cancelled", "cancellederror"), ignore_case=True),
    Rule("request_validation_error", r"BadRequestError|maximum context length is|RequestValidationError|Input validation error|code=4\d\d\b",
         B, literal=("BadRequest", "maximum context length", "ValidationError", "validation error", "code=4")),
    Rule.text("asgi_exception", "Exception in ASGI application", W),
)

_GENERIC_PROGRESS: tuple[Rule, ...] = (
    Rule.text("uvicorn_startup_complete", "Application startup complete.", R, phase=Phase.HTTP_UP),
    # uvicorn logs it after the lifespan startup ("Application startup complete."): the same readiness, and the
    # first line left when an excerpt starts there (uvicorn 0.30.6 server.py:95 lifespan startup, :179/:212)
    Rule.text("uvicorn_running", "Uvicorn running on", R, phase=Phase.HTTP_UP),
    Rule("progress_bar", r"\d+%\|| Completed \| \d+/\d+|\d+(?:\.\d+)?(?:it/s|s/it)\]", P, literal=("%|", "Completed |", "it/s]", "s/it]")),
    Rule("usage_line", r"^usage: ", INFO, literal="usage: "),
)

GENERIC = RulePack("generic", _GENERIC_BENIGN + _GENERIC_REQUEST + _GENERIC_FATAL + _GENERIC_PROGRESS)

# Tried first on every engine: the lines a busy server prints most, which are never anything else.
COMMON = RulePack("common", (
    Rule("sglang_metric", r"\b(?:Decode|Prefill) batch\b", M, literal="batch"),
    Rule.text("vllm_throughput_metric", "Avg prompt throughput:", M),
    Rule("vllm_specdecode_metric", r"SpecDecoding metrics:|Speculative metrics:", M, literal=("SpecDecoding metrics:", "Speculative metrics:")),
    # a generation request answered: proof of serving when the log was joined mid-run (see SERVING_RULES)
    Rule("http_generate_ok", r"\"POST /(?:v1/chat/completions|v1/completions|generate|v1/responses)\b[^\"]*HTTP/[\d.]+\" 200",
         INFO, literal="HTTP/"),
    Rule("http_ok", r"\"(?:GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) (?!/(?:model_info|get_model_info|encode) )[^\"]*HTTP/[\d.]+\" [23]\d\d", INFO, literal="HTTP/"),
))

# The lines that prove a server is serving, when a log joined mid-run shows them before any start-up phase: a
# request's own error proves it too (only a server that serves reads requests), and so does a record naming an
# OpenAI-API request by the id the server gave it (vLLM: "chatcmpl-" + X-Request-Id or random_uuid(),
# entrypoints/openai/serving_chat.py; "cmpl-" serving_completion.py; "chat-" before 0.6.4; issue 24:
# `Received request chatcmpl-...` alone, 463; a prefiller's request-level NIXL error, 414). REQUEST_NAMED is
# asked by the classifier, never as a pack rule: an ERROR line naming a request after readiness is a warning.
REQUEST_NAMED = Rule("request_named", r"(?<![\w-])(?:chatcmpl|cmpl|chat)-[0-9a-fA-F]{8}", INFO, literal="-")
SERVING_RULES = frozenset({"request_named", "sglang_metric", "vllm_throughput_metric", "vllm_specdecode_metric", "http_generate_ok",
                           "llamacpp_serving", "request_validation_error", "vllm_request_error", "tgi_request_success",
                           "vllm_request_fields_ignored"})

SGLANG = RulePack("sglang", (
    Rule.text("sglang_fired_up", "The server is fired up and ready to roll!", R, phase=Phase.READY),
    # uvicorn answers before SGLang's warm-up request has gone through the scheduler: not ready yet.
    Rule.text("sglang_uvicorn_up", "Application startup complete.", P, phase=Phase.HTTP_UP),
    Rule.text("sglang_uvicorn_running", "Uvicorn running on", P, phase=Phase.HTTP_UP),
    # SGLANG_RUST_SERVER=1 (0.5.23 srt/rust_server/server.py:248-252): a Rust HTTP server inside the rank-0 scheduler
    # replaces uvicorn; it answers /health 503 until its own warm-up ("server is still completing its startup warmup",
    # rust_extensions/_server.so), then serves: readiness is what it serves (a /health_generate 200, a completion)
    Rule.text("sglang_rust_server_listen", "SGLANG_RUST_SERVER enabled, Rust server listen on", P, phase=Phase.HTTP_UP),
    # ... whose warm-up ends in "The server is fired up and ready to roll!" or fails: "startup warmup failed",
    # "startup warmup timed out" (SGLANG_WARMUP_TIMEOUT), messages side by side in 0.5.23's rust_extensions/_server.so
    Rule("sglang_rust_warmup_failed", r"\bstartup warmup (?:failed|timed out)", F, literal="startup warmup "),
    # `server_args=ServerArgs(...)` (engine.py, 0.4.x-0.5.16); `server_args={'model_path': ...}` (resolved_dict(), 0.5.19+)
    Rule("sglang_server_args", r"server_args=(?:ServerArgs\(|\{)", P, phase=Phase.SERVER_ARGS, literal="server_args="),
    Rule.text("sglang_load_weight_begin", "Load weight begin", P, phase=Phase.WEIGHTS_LOADING),
    Rule.text("sglang_load_weight_end", "Load weight end", P, phase=Phase.WEIGHTS_LOADED),
    Rule("sglang_kv_cache_allocated", r"KV Cache is allocated|Memory pool end", P, phase=Phase.KV_CACHE_ALLOCATED,
         literal=("KV Cache is allocated", "Memory pool end")),
    Rule("sglang_cuda_graph_begin", r"Capture (?:[\w ]+ )?cuda graph begin", P, phase=Phase.CUDA_GRAPH_CAPTURE_BEGIN,
         literal="capture", ignore_case=True),
    Rule("sglang_cuda_graph_end", r"Capture (?:[\w ]+ )?cuda graph end", P, phase=Phase.CUDA_GRAPH_CAPTURED,
         literal="capture", ignore_case=True),
    Rule("sglang_warmup_request", r"\"(?:GET /model_info|GET /get_model_info|POST /encode) HTTP/1\.1\" 200",
         P, phase=Phase.WARMUP, literal="HTTP/1.1\" 200", after_ready=INFO),
    # benign (the incident: TP5 prints an ignored glmasr import error on every start)
    Rule.text("sglang_ignore_import_error", "Ignore import error when loading sglang.srt.models.", B),
    Rule.text("sglang_gpu_memory_capacity", "Failed to get GPU memory capacity from nvidia-smi", B),
    Rule("sglang_generation_config", r"Failed to load generation config|does not appear to have a file named generation_config\.json",
         B, literal=("generation config", "generation_config.json")),
    Rule("sglang_pyspy_missing", r"Pyspy failed to dump", W, literal="Pyspy failed to dump"),
    # fatal
    # "Received sigquit from a child proces." (engine.py 0.4.3; "process." from 0.4.6); "SIGQUIT received. signum=3, ...
    # It usually means one child failed." (tokenizer_manager.py, 0.5.4+); "Received SIGQUIT from scheduler process."
    # (grpc_request_manager.py, 0.5.4-0.5.9)
    Rule("sglang_sigquit", r"Received sigquit from a child proces|SIGQUIT received\. signum=|Received SIGQUIT from scheduler process",
         F, literal=("Received sigquit", "SIGQUIT received", "Received SIGQUIT"), notice=True),
    # "Child process unexpectedly failed with an exit code %d" (engine.py 0.4.6); "Subprocess scheduler_0 (pid=N) crashed
    # with exit code -6." (utils/watchdog.py, 0.5.12+); "Scheduler or DataParallelController N terminated with -9" (0.4.10+)
    Rule("sglang_child_failed", r"Child process unexpectedly failed with (?:an )?exit ?code|Subprocess \S+ \(pid=\d+\) crashed with exit code"
         r"|Scheduler or DataParallelController \d+ terminated with",
         F, literal=("Child process unexpectedly failed", "crashed with exit code", "terminated with"), notice=True),
    # "Watchdog timeout (self.watchdog_timeout=300)" (scheduler.py, 0.4.x-0.5.6); "Scheduler watchdog timeout
    # (self.watchdog_timeout=300, self.soft=False)" (utils/watchdog.py, 0.5.9+)
    # the soft watchdog (--soft-watchdog-timeout, off by default; 0.5.9+) only dumps and lets the server run
    Rule("sglang_soft_watchdog", r"watchdog timeout \(self\.watchdog_timeout=[^,)]*, self\.soft=True\)", W,
         literal="self.soft=True"),
    Rule("sglang_watchdog_timeout", r"[Ww]atchdog timeout \(self\.watchdog_timeout=", F, literal="atchdog timeout (", hint=Hints.WATCHDOG),
    # 0.5.23 model_executor/pool_configurator.py:96 (no KV token fits) and mem_cache/kv_cache_configurator.py:3049
    # (the weights alone exceed the budget): both say to raise the fraction
    Rule.text("sglang_not_enough_memory", "Not enough memory. Please try to increase --mem-fraction-static", F,
              hint=Hints.STATIC_TOO_SMALL),
    Rule.text("sglang_weights_leave_no_kv_memory", "Loaded weights leave no GPU memory for the KV cache", F,
              hint=Hints.STATIC_TOO_SMALL),
    Rule("sglang_cuda_graph_failed", r"Capture cuda graph failed|cuda graph capture failed", F, literal="graph", ignore_case=True, hint=Hints.CUDA_GRAPH),
    Rule("sglang_warmup_failed", r"Initialization failed\. warmup error|warmup error:", F, literal="warmup error"),
    Rule("sglang_rank_dead", r"Rank \d+ scheduler is dead|scheduler is dead|Health check failed.*(?:dead|exit)", F,
         literal=("scheduler is dead", "Health check failed")),
    # a rank's exception header (the traceback follows on the same line)
    # utils/watchdog.py (0.5.9+) prints "{debug_name} debug info:\n{dump}" only when the watchdog fires, right before
    # its "watchdog timeout" line (sglang#17941: a multi-line dump per rank, the timeout line later)
    # the watchdog's py-spy dump of the stuck ranks (0.5.23 utils/cudacore_pyspy_dump_utils.py:87, called by
    # utils/watchdog.py:152 on a timeout): the process is being killed
    Rule("sglang_pyspy_dump", r"^Pyspy dump for PID \d+", F, literal="Pyspy dump for PID", notice=True, hint=Hints.WATCHDOG),
    Rule("sglang_watchdog_debug_info", r"^(?:Scheduler|DataParallelController|DetokenizerManager|TokenizerManager) debug info:$",
         F, literal="debug info:", notice=True, hint=Hints.WATCHDOG),
    # "{Scheduler,TokenizerManager,DetokenizerManager,DataParallelController,TpModelWorkerClient,MultiTokenizerRouter,...}
    # hit an exception: {traceback}" (0.4.x-0.5.23)
    # server.py of SGLang 0.1.x (2024): print("router init state:", router_init_state) then sys.exit(1) when the
    # router process did not answer "init ok" (its traceback is the state)
    Rule("sglang_router_init_failed", r"^(?:router|detoken) init state: (?!init ok)", F, literal=" init state: "),
    Rule("sglang_process_exception", r"\b[A-Z]\w+ hit an exception", F, literal="hit an exception", header=True),
    Rule("sglang_request_error", r"^Error in request|Abort request|Request \w+ (?:aborted|failed)", B, literal=("request", "Request")),
    Rule.text("sglang_retract", "KV cache pool is full. Retract requests.", W),
))

VLLM = RulePack("vllm", (
    Rule("vllm_server_args", r"non-default args:|\bargs: Namespace\(", P, phase=Phase.SERVER_ARGS, literal=("non-default args", "args: Namespace(")),
    Rule("vllm_load_begin", r"Starting to load model|Loading model weights", P, phase=Phase.WEIGHTS_LOADING,
         literal=("Starting to load model", "Loading model weights")),
    Rule("vllm_load_end", r"Loading weights took|Model loading took", P, phase=Phase.WEIGHTS_LOADED, literal=("Loading weights took", "Model loading took")),
    Rule("vllm_kv_cache", r"GPU KV cache size:|# (?:GPU|cuda|CUDA) blocks:", P, phase=Phase.KV_CACHE_ALLOCATED, literal=("GPU KV cache size:", " blocks:")),
    Rule("vllm_cuda_graph_begin", r"Capturing (?:CUDA graphs?|cudagraphs?)|Capturing the model for CUDA graphs", P,
         phase=Phase.CUDA_GRAPH_CAPTURE_BEGIN, literal="Capturing"),
    Rule.text("vllm_cuda_graph_end", "Graph capturing finished", P, phase=Phase.CUDA_GRAPH_CAPTURED),
    Rule("vllm_warmup", r"init engine \(profile, create kv cache, warmup model\) took|Initial profiling/warmup run took", P,
         phase=Phase.WARMUP, literal=("warmup model", "warmup run")),
    Rule("vllm_api_server_starting", r"Starting vLLM (?:API )?server", P, literal="Starting vLLM"),
    # benign
    Rule.text("vllm_fa_unsupported", "Cannot use FA version", B),  # fa_utils on pre-Ampere GPUs (T4): vLLM falls back
    Rule.text("vllm_reasoning_token_ids", "Auto-initialization of reasoning token IDs failed", B),
    Rule.text("vllm_multimodal_profiling", "may cause certain multi-modal inputs to fail", B),
    # entrypoints/openai/protocol.py: logger.warning("The following fields were present in the request but ignored: %s")
    Rule.text("vllm_request_fields_ignored", "The following fields were present in the request but ignored", B),
    Rule("vllm_request_error", r"Error with model object=|Error in preprocessing prompt inputs|\bNotFoundError|type='(?:NotFound|BadRequest)Error'",
         B, literal=("Error with model", "preprocessing prompt", "NotFoundError", "BadRequestError")),
    # fatal
    Rule("vllm_engine_failed_to_start", r"EngineCore failed to start|WorkerProc failed to start|Engine process failed to start",
         F, literal="failed to start", notice=True, header=True),
    Rule.text("vllm_engine_init_failed", "Engine core initialization failed", F, notice=True),
    # logging_utils/dump_input.py (0.9-0.33): the engine core's step raised; it logs its inputs, then re-raises
    # (v1/engine/core.py log_error_detail): the traceback and the cause follow
    Rule.text("vllm_engine_step_failed", "Dumping input data for V1 LLM engine", F, notice=True),
    # V0 async engine (0.4-0.6): "Engine background task failed", "Engine iteration timed out. This should never happen!"
    Rule("vllm_engine_fatal", r"EngineCore encountered a fatal error|Engine loop has died|EngineDeadError|AsyncEngineDeadError|EngineCore hit an exception"
         r"|Engine background task failed|Engine iteration timed out",
         F, literal=("EngineCore encountered", "Engine loop has died", "EngineDeadError", "EngineCore hit", "Engine background task failed",
                     "Engine iteration timed out")),
    # V0/Ray workers (worker_base.py, 0.4-0.10): "Error executing method init_device. This might cause deadlock in
    # distributed execution." (0.9+ quotes the name: 'init_device'); its traceback follows
    Rule("vllm_worker_method_failed", r"Error executing method '?\w+'?\. This might cause deadlock", F,
         literal="Error executing method", notice=True, header=True),
    # V0 multiprocessing workers: "Exception in worker VllmWorkerProcess while processing method init_device."
    Rule("vllm_worker_exception", r"Exception in worker \S+ while processing method", F, literal="Exception in worker", header=True,
         notice=True),
    Rule("vllm_worker_died", r"Worker proc \S+ died unexpectedly|WorkerProc hit an exception|MultiprocExecutor got (?:SIGQUIT|fatal signal)|got SIGQUIT from worker",
         F, literal=("died unexpectedly", "WorkerProc hit", "MultiprocExecutor got", "SIGQUIT from worker")),
    # vLLM 0.33.0 v1/engine/core_client.py:840, the API server's monitor thread when an EngineCore process is gone
    # (killed by the OOM killer, a native crash): logger.warning_once, then shutdown; every request fails after it
    Rule.text("vllm_engine_core_exited", "MPClient: engine core exited unexpectedly", F, hint=Hints.KILLED),
    # vLLM 0.33.0 v1/utils.py:586-594 (wait_for_completion_or_failure, the API-server manager): RuntimeError(f"Process
    # {name} (PID: {pid}) died with exit code {code}"), RuntimeError(f"Engine core process {name} died unexpectedly.")
    Rule("vllm_process_died", r"\bProcess \S+ \(PID: \d+\) died with exit code -?\d+|Engine core process \S+ died unexpectedly",
         F, literal=("died with exit code", "died unexpectedly"), hint=Hints.EXITED),
    Rule("vllm_engine_start_timeout", r"Timed out waiting for engine core processes to start|Engine core proc \S+ died unexpectedly", F,
         literal=("Timed out waiting for engine", "died unexpectedly")),
    # request-level after ready: a failed request is not a dead server
))

def add_rule(pack: RulePack, *rules: Rule, first: bool = True) -> RulePack:
    """A new pack with ``rules`` added ahead of the pack's own (the notebook one-liner).

    >>> mine = add_rule(SGLANG, Rule("my_benign", "harmless glitch", Verdict.BENIGN))
    >>> mine.rules[0].name, SGLANG.rules[0].name != "my_benign"
    ('my_benign', True)
    """
    return pack.with_rules(*rules, first=first)
