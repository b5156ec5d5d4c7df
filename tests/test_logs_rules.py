"""Every rule has a positive case and a near miss (a line that looks alike and must not match it)."""

from __future__ import annotations

import pytest

from toolkit.logs import PACKS, LogClassifier, Rule, Verdict

# (rule, engine, a real-looking line it decides, a near miss it must not decide)
CASES: list[tuple[str, str, str, str]] = [
    # common
    (
        "sglang_metric",
        "sglang",
        "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 108, gen throughput (token/s): 0.39, #queue-req: 0",
        "[2025-10-22 10:27:57 TP0] Capture cuda graph bs [1, 2, 4] batch sizes",
    ),
    (
        "vllm_throughput_metric",
        "vllm",
        "INFO 05-12 02:47:33 [loggers.py:111] Engine 000: Avg prompt throughput: 2.1 tokens/s, Avg generation throughput: 12.8 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%",
        "INFO 05-12 02:47:33 [loggers.py:111] Avg throughput will be logged every 10 s",
    ),
    (
        "vllm_specdecode_metric",
        "vllm",
        "INFO 09-09 11:51:35 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 5.44, Accepted: 262 tokens, Drafted: 295 tokens",
        "INFO 09-09 11:51:35 [metrics.py:96] Speculative decoding metrics are disabled",
    ),
    (
        "http_ok",
        "vllm",
        'INFO:     127.0.0.1:56160 - "GET /v1/models HTTP/1.1" 200 OK',
        'INFO:     127.0.0.1:56148 - "POST /v1/chat/completions HTTP/1.1" 404 Not Found',
    ),
    (
        "progress_bar",
        "sglang",
        "\rLoading safetensors checkpoint shards:  50% Completed | 4/8 [00:03<00:03,  1.18it/s]",
        "Loading safetensors checkpoint shards is about to begin",
    ),
    # issue 24, batches 9 and 10: kubectl describe's container state (380), torch's CUDA help line (422), ggml's and
    # the ROCm runtime's words on ROCm (441), the resource tracker at interpreter exit (436), a named request (414, 463)
    (
        "kubernetes_container_failed",
        "generic",
        "        Reason:    CrashLoopBackOff",
        "        Reason:    Completed",
    ),
    (
        "cuda_error_report",
        "generic",
        "Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.",
        "INFO 01-12 10:00:00 [env.py:12] Search for `cuda' in the docs at https://docs.vllm.ai/ for more information.",
    ),
    (
        "cuda_error",
        "llamacpp",
        " ROCm error: unspecified launch failure",
        "llama_model_load: ROCm error reporting is verbose in this build",
    ),
    (
        "rocm_queue_abort",
        "llamacpp",
        ":0:rocdevice.cpp            :3587: 1012355198 us:  Callback: Queue 0x7cb113a00000 aborting with error : "
        "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016",
        ":0:rocdevice.cpp            :3587: 1012355198 us:  Callback: Queue 0x7cb113a00000 aborting with error : none",
    ),
    (
        "interpreter_shutdown_leaks",
        "sglang",
        "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There appear to be 1 "
        "leaked semaphore objects to clean up at shutdown",
        "/usr/lib/python3.12/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: process died unexpectedly, "
        "relaunching.  Some resources might leak.",
    ),
    (
        "request_named",
        "vllm",
        "INFO 03-05 14:52:07 [logger.py:39] Received request chatcmpl-e589148985214a9e9c979bfca7c6ae87: prompt: '', params: "
        "SamplingParams(n=1)",
        "INFO 03-05 14:52:07 [serving.py:39] Using the chat template of deepseek-chat-0123abcd",
    ),
    # issue 24: crash words in their bare forms, native frames, and the engines' missing phrasings
    (
        "slurm_job_ended",
        "generic",
        "slurmstepd: error: *** JOB 494583 ON node12 CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME LIMIT ***",
        "srun: job 494583 queued and waiting for resources",
    ),
    (
        "sglang_pyspy_dump",
        "sglang",
        "[2025-11-05 10:18:51] Pyspy dump for PID 499:",
        "[2025-11-05 10:18:51] Pyspy failed to dump PID 499. Error: py-spy not found",
    ),
    (
        "tgi_request_success",
        "tgi",
        '2023-12-22T00:21:24.202169Z  INFO generate{total_time="2.4s"}: text_generation_router::server: router/src/server.rs:289: Success',
        "2023-12-22T00:21:24.202169Z  INFO text_generation_router: router/src/main.rs:210: Success rate of the warm-up: 100%",
    ),
    (
        "sglang_rust_warmup_failed",
        "sglang",
        "2026-10-30T01:12:44.120311Z ERROR sglang_server::api_server::http::app: startup warmup timed out",
        "2026-10-30T01:12:44.120311Z  INFO sglang_server::api_server::http::app: startup warmup begins",
    ),
    (
        "sglang_rust_server_listen",
        "sglang",
        "[2026-10-30 01:10:02 TP0] SGLANG_RUST_SERVER enabled, Rust server listen on 0.0.0.0:30000",
        "[2026-10-30 01:10:02 TP0] SGLANG_RUST_SERVER is not supported with the offline Engine",
    ),
    (
        "signal_report",
        "generic",
        "Aborted",
        "Aborted request chatcmpl-5a74 because the client went away",
    ),
    (
        "native_backtrace",
        "vllm",
        "(EngineCore pid=2210) ERROR 03-06 11:02:17 [core.py:1167] --- VLLM::EngineCore(_PyEval_EvalFrameDefault+0x5b1) [0x55d7c3a0e1b1]",
        "(EngineCore pid=2210) INFO 03-06 11:02:17 [core.py:1167] --- VLLM::EngineCore(ready) [0x55d7c3a0e1b1]",
    ),
    (
        "vllm_engine_core_exited",
        "vllm",
        "(APIServer pid=1) WARNING 03-06 11:02:18 [core_client.py:840] [shutdown] MPClient: engine core exited unexpectedly; starting cleanup",
        "(APIServer pid=1) INFO 03-06 11:02:18 [core_client.py:840] [shutdown] MPClient: engine core exited; cleanup done",
    ),
    (
        "vllm_process_died",
        "vllm",
        "(APIServer pid=1) RuntimeError: Process ApiServer_1 (PID: 2213) died with exit code 1",
        "(APIServer pid=1) INFO 03-06 11:02:18 [utils.py:580] Process ApiServer_1 (PID: 2213) started",
    ),
    (
        "triton_instance_failed",
        "trtllm",
        "E0306 10:21:33.451280 1 backend_model.cc:691] ERROR: Failed to create instance: unexpected error when creating modelInstanceState",
        "I0306 10:21:33.451280 1 backend_model.cc:680] Creating instance llama_0_0 on GPU 0 (8.0) using artifact 'model.py'",
    ),
    (
        "ray_deployment_exception",
        "ray",
        "(ServeController pid=4522) Exception in deployment 'llm_deployment', the replica will be restarted.",
        "(ServeController pid=4522) Deploying new version of deployment 'llm_deployment'.",
    ),
    (
        "ray_task_error",
        "ray",
        "ray.exceptions.RayTaskError(AttributeError): ray::ServeReplica:llm_deployment.__init__() (pid=4601, ip=10.0.0.3)",
        "ray.exceptions.RayTaskError is raised when a task fails (see the docs)",
    ),
    (
        "tgi_shard_unreachable",
        "tgi",
        "2024-05-02T09:14:11.230145Z ERROR batch{batch_size=1}:prefill:prefill{id=0 size=1}:prefill{id=0 size=1}: "
        "text_generation_client: router/client/src/lib.rs:33: Server error: error trying to connect: No such file or directory (os error 2)",
        "2024-05-02T09:14:11.230145Z  WARN text_generation_router: router/src/main.rs:210: error trying to connect to the hub: retrying",
    ),
    # sglang
    (
        "sglang_fired_up",
        "sglang",
        "[2026-08-01 23:43:47] The server is fired up and ready to roll!",
        "[2026-08-01 23:43:47] The server is firing up, please wait",
    ),
    (
        "sglang_uvicorn_up",
        "sglang",
        "[2026-08-01 23:43:43] INFO:     Application startup complete.",
        "[2026-08-01 23:43:43] INFO:     Waiting for application startup.",
    ),
    (
        "sglang_uvicorn_running",
        "sglang",
        "[2025-03-12 08:52:40] INFO:     Uvicorn running on http://0.0.0.0:32300 (Press CTRL+C to quit)",
        "[2025-03-12 08:52:40] INFO:     Started server process [1029]",
    ),
    (
        "sglang_server_args",
        "sglang",
        "[2026-03-27 09:31:17] server_args=ServerArgs(model_path='Qwen/Qwen3-14B', tp_size=2)",
        "[2026-03-27 09:31:17] server_args were overridden by the environment",
    ),
    (
        "sglang_load_weight_begin",
        "sglang",
        "[2026-03-27 09:31:25 TP0] Load weight begin. avail mem=18.73 GB",
        "[2026-03-27 09:31:25 TP0] Loading weights lazily",
    ),
    (
        "sglang_load_weight_end",
        "sglang",
        "[2026-03-27 09:31:49 TP0] Load weight end. elapsed=24.17 s, type=Qwen3ForCausalLM",
        "[2026-03-27 09:31:49 TP0] Load weights ended early for the draft",
    ),
    (
        "sglang_kv_cache_allocated",
        "sglang",
        "[2026-03-27 09:31:49 TP0] KV Cache is allocated. #tokens: 139814, K size: 5.33 GB, V size: 5.33 GB",
        "[2026-03-27 09:31:49 TP0] Using KV cache dtype: torch.float16",
    ),
    (
        "sglang_cuda_graph_begin",
        "sglang",
        "[2026-03-27 09:31:49 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=5.89 GB",
        "[2026-03-27 09:31:49 TP0] Capture cuda graph bs [1]",
    ),
    (
        "sglang_cuda_graph_end",
        "sglang",
        "[2026-08-01 23:43:38] Capture target prefill CUDA graph end. elapsed=216.19 s, mem usage=5.24 GB",
        "[2026-08-01 23:43:38] Capture target verify CUDA graph begin. backend=full",
    ),
    (
        "sglang_warmup_request",
        "sglang",
        '[2026-02-09 14:38:46] INFO:     127.0.0.1:16622 - "GET /model_info HTTP/1.1" 200 OK',
        '[2026-02-09 14:38:46] INFO:     127.0.0.1:16624 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    ),
    (
        "sglang_ignore_import_error",
        "sglang",
        "[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: cannot import name 'GlmAsrConfig' from 'transformers' (/root/ml-env/lib/python3.12/site-packages/transformers/__init__.py)",
        "ImportError: cannot import name 'GlmAsrConfig' from 'transformers'",
    ),
    (
        "sglang_gpu_memory_capacity",
        "sglang",
        "[2026-08-01 23:37:38] Failed to get GPU memory capacity from nvidia-smi. Falling back to torch.cuda.mem_get_info().",
        "[2026-08-01 23:37:38] Failed to allocate GPU memory for the KV cache",
    ),
    (
        "sglang_generation_config",
        "sglang",
        "[2026-08-01 23:37:49] Failed to load generation config for poolside/Laguna: does not appear to have a file named generation_config.json.",
        "[2026-08-01 23:37:49] Failed to load model config for poolside/Laguna",
    ),
    (
        "sglang_pyspy_missing",
        "sglang",
        "[2025-08-02 06:06:21 TP2] Pyspy failed to dump PID 171. Error: /bin/dash: 1: py-spy: not found",
        "[2025-08-02 06:06:21 TP2] Pyspy dump for PID 309:",
    ),
    (
        "sglang_sigquit",
        "sglang",
        "[2025-01-20 19:10:07] Received sigquit from a child proces. It usually means the child failed.",
        "[2025-01-20 19:10:07] Received signal from the launcher, shutting down",
    ),
    (
        "sglang_child_failed",
        "sglang",
        "[2025-06-01 10:00:00] Child process unexpectedly failed with exitcode=-9. pid=1234",
        "[2025-06-01 10:00:00] Child process started. pid=1234",
    ),
    (
        "sglang_watchdog_timeout",
        "sglang",
        "[2025-08-02 19:24:30 TP3] Watchdog timeout (self.watchdog_timeout=300)",
        "[2026-03-27 09:31:17] server_args=... watchdog_timeout=300, dist_timeout=None",
    ),
    (
        "sglang_not_enough_memory",
        "sglang",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        "[2025-03-12 10:00:00] Not enough memory for the hierarchical cache, disabling it",
    ),
    (
        "sglang_weights_leave_no_kv_memory",
        "sglang",
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.3. "
        "Raise --mem-fraction-static above 0.523 (minimum viable = 1 - available/pre = 0.5228).",
        "[2026-03-12 10:00:00 TP0] KV Cache is allocated. #tokens: 1200000, K size: 20.60 GB, V size: 20.60 GB",
    ),
    (
        "sglang_cuda_graph_failed",
        "sglang",
        "Exception: Capture cuda graph failed: CUDA error: out of memory",
        "[2025-03-12 10:00:00 TP0] Capture cuda graph end. Time elapsed: 1.57 s.",
    ),
    (
        "sglang_warmup_failed",
        "sglang",
        "[2025-03-12 10:00:00] Initialization failed. warmup error: Traceback (most recent call last):",
        "[2025-03-12 10:00:00] Warmup request sent",
    ),
    (
        "sglang_rank_dead",
        "sglang",
        "[2025-09-01 10:00:00] Rank 0 scheduler is dead. Please check if there are relevant logs.",
        "[2025-09-01 10:00:00] Rank 0 scheduler is ready",
    ),
    (
        "sglang_soft_watchdog",
        "sglang",
        "[2026-03-01 10:00:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=60, self.soft=True)",
        "[2026-03-01 10:00:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
    ),
    (
        "sglang_router_init_failed",
        "sglang",
        "router init state: Traceback (most recent call last):",
        "router init state: init ok",
    ),
    (
        "sglang_process_exception",
        "sglang",
        "[2025-03-10 14:17:52 TP1] Scheduler hit an exception: RuntimeError: boom",
        "[2025-03-10 14:17:52 TP1] Scheduler exception handler installed",
    ),
    (
        "sglang_request_error",
        "sglang",
        "[2025-09-01 10:00:00] Abort request 8fe07d727051441bb48b84b89060a797",
        "[2025-09-01 10:00:00] Receive request 8fe07d727051441bb48b84b89060a797",
    ),
    (
        "sglang_retract",
        "sglang",
        "[2025-09-01 10:00:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1",
        "[2025-09-01 10:00:00 TP0] KV cache pool is ready",
    ),
    # vllm
    (
        "vllm_server_args",
        "vllm",
        "(APIServer pid=29938) INFO 08-01 23:19:54 [api_utils.py:273] non-default args: {'model_tag': 'x'}",
        "(APIServer pid=29938) INFO 08-01 23:19:54 [api_utils.py:273] default args loaded",
    ),
    (
        "vllm_load_begin",
        "vllm",
        "(EngineCore pid=30070) INFO 08-01 23:20:03 [gpu_model_runner.py:5209] Starting to load model poolside/Laguna-S-2.1-INT4...",
        "(EngineCore pid=30070) INFO 08-01 23:20:03 [gpu_model_runner.py:5209] Starting to profile the model",
    ),
    (
        "vllm_load_end",
        "vllm",
        "(EngineCore pid=30070) INFO 08-01 23:21:39 [default_loader.py:430] Loading weights took 92.65 seconds",
        "(EngineCore pid=30070) INFO 08-01 23:21:39 [default_loader.py:430] Loading weights from the local cache",
    ),
    (
        "vllm_kv_cache",
        "vllm",
        "(EngineCore pid=30070) INFO 08-01 23:22:41 [kv_cache_utils.py:2146] GPU KV cache size: 950,420 tokens",
        "(EngineCore pid=30070) INFO 08-01 23:22:41 [gpu_worker.py:538] Available KV cache memory: 35.2 GiB",
    ),
    (
        "vllm_cuda_graph_begin",
        "vllm",
        "\x1b[1;36m(EngineCore_DP0 pid=995968)\x1b[0;0m \rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67 [00:00<?, ?it/s]",
        "(EngineCore pid=30070) INFO 08-01 23:22:39 [gpu_model_runner.py:6534] Profiling CUDA graph memory: PIECEWISE=51",
    ),
    (
        "vllm_cuda_graph_end",
        "vllm",
        "(EngineCore pid=30070) INFO 08-01 23:25:15 [gpu_model_runner.py:6707] Graph capturing finished in 8 secs, took 1.02 GiB",
        "(EngineCore pid=30070) INFO 08-01 23:25:15 [gpu_worker.py:771] CUDA graph pool memory: 1.02 GiB (actual)",
    ),
    (
        "vllm_warmup",
        "vllm",
        "(EngineCore pid=30070) INFO 08-01 23:25:15 [core.py:337] init engine (profile, create kv cache, warmup model) took 198.31 s",
        "(EngineCore pid=30070) INFO 08-01 23:22:44 [kernel_warmup.py:118] Warming up FlashInfer attention.",
    ),
    (
        "vllm_api_server_starting",
        "vllm",
        "(APIServer pid=29938) INFO 08-01 23:25:19 [api_server.py:616] Starting vLLM server on http://0.0.0.0:8000",
        "(APIServer pid=29938) INFO 08-01 23:25:19 [api_server.py:616] Stopping the vLLM API server",
    ),
    (
        "vllm_fa_unsupported",
        "vllm",
        "\x1b[1;36m(EngineCore_DP0 pid=417364)\x1b[0;0m ERROR 08-03 15:21:53 [fa_utils.py:57] Cannot use FA version 2 is not supported due to FA2 is only supported on devices with compute capability >= 8",
        "(EngineCore_DP0 pid=417364) INFO 08-03 15:21:53 [fa_utils.py:57] Using FA version 2",
    ),
    (
        "vllm_reasoning_token_ids",
        "vllm",
        "(APIServer pid=29938) WARNING 08-01 23:19:58 [vllm.py:1486] Auto-initialization of reasoning token IDs failed. Please check whether your reasoning parser has implemented the `reasoning_start_str` and `reasoning_end_str`.",
        "(APIServer pid=29938) INFO 08-01 23:19:58 [vllm.py:1486] Auto-initialization of reasoning token IDs succeeded",
    ),
    (
        "vllm_multimodal_profiling",
        "vllm",
        "(EngineCore_DP0 pid=995968) WARNING 09-26 22:38:29 [profiling.py:280] The sequence length (4096) is smaller than the pre-defined worst-case total number of multimodal tokens (32768). This may cause certain multi-modal inputs to fail during inference.",
        "(EngineCore_DP0 pid=995968) ERROR 09-26 22:38:29 [core.py:280] multi-modal encoder failed to initialize",
    ),
    (
        "vllm_request_fields_ignored",
        "vllm",
        "(APIServer pid=9880) WARNING 02-21 11:34:27 [protocol.py:53] The following fields were present in the request "
        "but ignored: {'voice'}",
        "(APIServer pid=9880) WARNING 02-21 11:34:27 [protocol.py:53] The following fields were present in the config: {'voice'}",
    ),
    (
        "vllm_engine_step_failed",
        "vllm",
        "(EngineCore_DP4 pid=3824136) ERROR 05-01 20:57:41 [dump_input.py:72] Dumping input data for V1 LLM engine (v0.20.0) "
        "with config: model='deepseek-ai/DeepSeek-V4-Pro', ",
        "(EngineCore_DP0 pid=1) INFO 05-01 20:57:41 [core.py:72] Dumping input data is disabled for the V1 LLM engine",
    ),
    (
        "vllm_request_error",
        "vllm",
        "ERROR 05-12 02:47:14 [serving_chat.py:136] Error with model object='error' message='The model `deepseek-r1-14b` does not exist.' type='NotFoundError' param=None code=404",
        "ERROR 05-12 02:47:14 [core.py:136] Error while loading the model weights",
    ),
    (  # Python's ModuleNotFoundError / FileNotFoundError at start-up are no request's 404 (batch 8)
        "vllm_request_error",
        "vllm",
        "ERROR 05-12 02:47:14 [serving_chat.py:136] Error with model object='error' message='The model `deepseek-r1-14b` does not exist.' type='NotFoundError' param=None code=404",
        "ModuleNotFoundError: No module named 'vllm._C'",
    ),
    (
        "vllm_engine_failed_to_start",
        "vllm",
        "(EngineCore pid=6890) ERROR 08-03 21:49:23 [core.py:1231] EngineCore failed to start.\r",
        "(EngineCore pid=6890) INFO 08-03 21:49:23 [core.py:1231] EngineCore started.",
    ),
    (
        "vllm_engine_init_failed",
        "vllm",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        "(EngineCore pid=6890) INFO 08-03 21:49:23 [core.py:1231] Engine core initialization finished",
    ),
    (
        "vllm_engine_fatal",
        "vllm",
        "(APIServer pid=1) ERROR 05-12 01:48:42 [api_router.py:72] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
        "(APIServer pid=1) INFO 05-12 01:48:42 [core.py:72] EngineCore is alive",
    ),
    (
        "vllm_worker_died",
        "vllm",
        "ERROR 07-28 23:02:40 [multiproc_executor.py:140] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.",
        "INFO 07-28 23:02:40 [multiproc_executor.py:140] Worker proc VllmWorker-1 started",
    ),
    (
        "vllm_engine_start_timeout",
        "vllm",
        "RuntimeError: Timed out waiting for engine core processes to start. This is often caused by slow weight loading.",
        "INFO 07-28 23:02:40 [utils.py:800] Waiting for 1 local, 0 remote core engine proc(s) to start.",
    ),
    # generic
    (
        "exception_ignored",
        "generic",
        "Exception ignored in: <function Pool.__del__ at 0x7f3b2c1d8e50>",
        "Exception raised in: worker 3",
    ),
    (
        "rlimit_nofile",
        "generic",
        "[2025-01-01 00:00:00] Fail to set RLIMIT_NOFILE: current limit exceeds maximum limit",
        "[2025-01-01 00:00:00] Set RLIMIT_NOFILE to 65535",
    ),
    (
        "cpuinfo_error",
        "generic",
        "Error in cpuinfo: prctl(PR_SVE_GET_VL) failed",
        "Error in cuinfo: device query failed",
    ),
    (
        "flash_attn_fallback",
        "generic",
        "WARNING 10-10 10:22:05 [cuda.py:100] Cannot use FlashAttention-2 backend because the flash_attn package is not found. Make sure that flash_attn was built and installed.",
        "INFO 10-10 10:22:05 [cuda.py:100] Using FlashAttention-2 backend.",
    ),
    (
        "xformers_fallback",
        "generic",
        "WARNING: xFormers not available, falling back to torch SDPA",
        "INFO: Using XFormers backend.",
    ),
    (
        "triton_unavailable",
        "generic",
        "WARNING 10-10 10:22:05 [importing.py:28] Triton not installed or not compatible; certain GPU-related functions will not be available.",
        "INFO 10-10 10:22:05 [importing.py:28] Triton is installed (3.1.0)",
    ),
    (
        "vllm_c_import",
        "generic",
        "WARNING 10-10 10:22:58 _custom_ops.py:18] Failed to import from vllm._C with ImportError('libcuda.so.1: cannot open shared object file')",
        "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
    ),
    (
        "hf_weights_not_initialized",
        "generic",
        "Some weights of LlamaForCausalLM were not initialized from the model checkpoint at x and are newly initialized: ['score.weight']",
        "All weights of LlamaForCausalLM were initialized from the model checkpoint",
    ),
    (
        "hf_hub_probe_404",
        "generic",
        '[2026-02-09 14:38:13] https://huggingface.co:443 "HEAD /meta-llama/Llama-3.2-3B/resolve/main/hf_quant_config.json HTTP/1.1" 404 0',
        '[2026-02-09 14:38:13] https://huggingface.co:443 "HEAD /meta-llama/Llama-3.2-3B/resolve/main/config.json HTTP/1.1" 200 0',
    ),
    (
        "nccl_info",
        "generic",
        "babel-12-29:256515:256515 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
        "babel-12-29:256515:256515 [0] NCCL WARN NET/IB : No device found.",
    ),
    (
        "torch_cpp_warning",
        "generic",
        "[rank0]:[W803 21:49:24.248813923 ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources.",
        "[rank0]:[E803 21:49:24.248813923 ProcessGroupNCCL.cpp:1575] [Rank 0] ProcessGroupNCCL's watchdog got stuck",
    ),
    (
        "deprecation_warning",
        "generic",
        "`torch_dtype` is deprecated! Use `dtype` instead!",
        "`torch_dtype` is set to bfloat16",
    ),
    (
        "torch_distributed_warning",
        "generic",
        "UserWarning: barrier(): using the device under current context. You can specify `device_id` in `init_process_group` to mute this warning.",
        "INFO torch.distributed initialized with backend nccl",
    ),
    (
        "python_warning",
        "generic",
        "/usr/lib/python3/site-packages/torch/cuda/__init__.py:61: FutureWarning: The pynvml package is unmaintained",
        "/usr/lib/python3/site-packages/torch/cuda/__init__.py:61: pynvml is unmaintained",
    ),
    (
        "http_client_error",
        "generic",
        'INFO:     127.0.0.1:56148 - "POST /v1/chat/completions HTTP/1.1" 404 Not Found',
        'INFO:     127.0.0.1:56148 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    ),
    (
        "http_server_error",
        "generic",
        '(APIServer pid=1) INFO:     10.1.6.81:16983 - "POST /v1/messages?beta=true HTTP/1.1" 500 Internal Server Error',
        '(APIServer pid=1) INFO:     10.1.6.81:16983 - "POST /v1/messages?beta=true HTTP/1.1" 200 OK',
    ),
    (
        "client_disconnect",
        "generic",
        "INFO 06-11 02:08:01 [async_llm.py:420] Aborted request chatcmpl-5a7407c45c434cb19736bd2776fce860.",
        "INFO 06-11 02:08:01 [async_llm.py:420] Added request chatcmpl-5a7407c45c434cb19736bd2776fce860.",
    ),
    (
        "request_validation_error",
        "generic",
        "ERROR 02-10 15:10:51 serving_chat.py:193] ValueError: This model's maximum context length is 16384 tokens. However, you requested 122946 tokens.",
        "INFO 02-10 15:10:51 serving_chat.py:193] The model's context length is 16384 tokens.",
    ),
    (
        "asgi_exception",
        "generic",
        "ERROR:    Exception in ASGI application",
        "INFO:     ASGI 'lifespan' protocol appears unsupported.",
    ),
    (
        "address_in_use",
        "generic",
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
        "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
    ),
    (
        "cuda_oom",
        "generic",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 786.00 MiB. GPU 0 has a total capacity of 79.11 GiB",
        "RayWorkerWrapper pid=1) INFO 03-27 10:29:03 [model_runner.py:1442] If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization`",
    ),
    (
        "kv_cache_too_small",
        "generic",
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (7344). Try increasing `gpu_memory_utilization`",
        "INFO 08-01 23:22:41 [kv_cache_utils.py:2147] Maximum concurrency for 65,536 tokens per request: 14.50x",
    ),
    (
        "nccl_watchdog_timeout",
        "generic",
        "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600437 milliseconds before timing out.",
        "[I ProcessGroupNCCL.cpp:475] [Rank 1] ProcessGroupNCCL initialized with NCCL_ASYNC_ERROR_HANDLING: 1",
    ),
    (
        "nccl_error",
        "generic",
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "INFO 05-13 11:32:54 [pynccl.py:69] vLLM is using nccl==2.21.5",
    ),
    (
        "segfault",
        "generic",
        "(RayWorkerWrapper pid=2191173, ip=10.52.51.232) *** SIGSEGV received at time=1746566409 on cpu 131 ***",
        "(RayWorkerWrapper pid=2191173, ip=10.52.51.232) SIGTERM handler installed",
    ),
    (
        "killed",
        "generic",
        "./entrypoint.sh: line 48: 27 Killed python3 -m sglang.launch_server --host 0.0.0.0 --port 30000",
        "Killed 3 zombie processes left by the previous run",
    ),
    (
        "exit_code_killed",
        "generic",
        "Engine core proc EngineCore_DP0 exited with exit code -9",
        "Engine core proc EngineCore_DP0 exited with exit code 0",
    ),
    (
        "exit_code_nonzero",
        "generic",
        "E1129 09:41:05.423000 601 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: 1) local_rank: 0 (pid: 628) of binary: /opt/torch/.venv/bin/python3",
        "Engine core proc EngineCore_DP0 exited with exit code 0",
    ),
    (
        "cuda_error",
        "generic",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "INFO 12-11 22:03:15 [cuda.py:221] CUDA graphs are enabled",
    ),
    (
        "config_value_error",
        "generic",
        "Value error, User-specified max_model_len (131072) is greater than the derived max_model_len "
        "(max_position_embeddings=32768.0 or model_max_length=None in model's config.json). [type=value_error, "
        "input_value=ArgsKwargs((), {'model': 'x'}), input_type=ArgsKwargs]",
        "INFO 05-01 10:00:00 [config.py:1] Value error handling is enabled for the [type=value_error] tests",
    ),
    (
        "cuda_error_report",
        "generic",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "INFO 01-12 10:00:00 [env.py:12] CUDA_LAUNCH_BLOCKING=1 is set: kernels run synchronously",
    ),
    (
        "triton_error",
        "generic",
        "RuntimeError: Triton Error [CUDA]: device kernel image is invalid",
        "INFO Triton kernels compiled in 3.2 s",
    ),
    (
        "unsupported_arch",
        "generic",
        "ValueError: Model architectures ['DeciLMForCausalLM'] are not supported for now. Supported architectures: dict_keys(['LlamaForCausalLM'])",
        "INFO 08-01 23:19:55 [model.py:619] Resolved architecture: LagunaForCausalLM",
    ),
    (
        "model_not_found",
        "generic",
        "OSError: meta-llama/Llama-9-70B is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'",
        "INFO Found local HF snapshot for meta-llama/Llama-3.2-3B; skipping download.",
    ),
    (
        "python_import_error",
        "generic",
        "ModuleNotFoundError: No module named 'sgl_kernel'",
        "[2026-03-27 09:31:24 TP1] Ignore import error when loading sglang.srt.models.glm_ocr: No module named 'transformers.models.glm_ocr'",
    ),
    (
        "argparse_error",
        "generic",
        "vllm: error: unrecognized arguments: --omni",
        "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...",
    ),
    (
        "cb_generation_loop_error",
        "generic",
        "2026-11-30 10:00:01 - ContinuousBatchingLogger - ERROR - Error in generation loop: Memory footprint "
        "159161450496 is more than available memory 132635020492",
        "2026-11-30 10:00:01 - ContinuousBatchingLogger - INFO - Generation loop started",
    ),
    (
        "python_exception_line",
        "generic",
        "KeyError: 'model.layers.55.mlp.gate_up_proj.input_scale'",
        "WARNING 08-01 23:19:58 [x.py:1] retrying after KeyError in the tokenizer cache",
    ),
    (
        "uvicorn_startup_complete",
        "vllm",
        "(APIServer pid=29938) INFO:     Application startup complete.",
        "(APIServer pid=29938) INFO:     Application shutdown complete.",
    ),
    (
        "uvicorn_running",
        "generic",
        "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
        "INFO:     Uvicorn stopped",
    ),
    # -- added with the corpus batches (issue 12); positive cases are lines of tests/data/logs -----------------
    (
        "http_generate_ok",
        "sglang",
        '[2025-09-03 18:33:31] INFO:     192.168.30.81:35262 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        '[2025-09-03 18:33:31] INFO:     192.168.30.81:35262 - "GET /v1/models HTTP/1.1" 200 OK',
    ),
    (
        "vllm_worker_exception",
        "vllm",
        "(VllmWorkerProcess pid=1270) ERROR 09-12 10:11:12 multiproc_worker_utils.py:226] Exception in worker "
        "VllmWorkerProcess while processing method init_device.",
        "(VllmWorkerProcess pid=1270) INFO 09-12 10:11:12 multiproc_worker_utils.py:215] Worker ready; awaiting tasks",
    ),
    (
        "process_exception_header",
        "generic",
        "Exception in ControllerSingle:",
        "Exception in thread Thread-3 (_watchdog):",
    ),
    (
        "python_process_died",
        "vllm",
        "Process EngineCore_0:",
        "Process EngineCore_0 started with pid 123",
    ),
    (
        "mpirun_rank_failed",
        "trtllm",
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "mpirun launched 4 processes on 1 node",
    ),
    (
        "tgi_connected",
        "tgi",
        "2024-06-28T11:31:02.112340Z  INFO text_generation_router::server: router/src/server.rs:2311: Connected",
        "2024-06-28T11:31:02.112340Z  INFO text_generation_router::server: router/src/server.rs:2301: Connecting to shards",
    ),
    (
        "tgi_shard_ready",
        "tgi",
        "2024-06-28T11:30:38.027759Z  INFO shard-manager: text_generation_launcher: Shard ready in 62.4s rank=0",
        "2024-06-28T11:30:38.027759Z  INFO shard-manager: text_generation_launcher: Starting shard rank=0",
    ),
    (
        "tgi_waiting_for_shard",
        "tgi",
        "2024-06-28T11:28:38.027759Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be ready... rank=0",
        "2024-06-28T11:28:38.027759Z  INFO text_generation_launcher: Waiting for the download to finish",
    ),
    (
        "tgi_warmup",
        "tgi",
        "2024-06-28T11:30:50.112340Z  INFO text_generation_router: router/src/main.rs:327: Warming up model",
        "2024-06-28T11:30:50.112340Z  INFO text_generation_router: router/src/main.rs:327: Warm start enabled",
    ),
    (
        "tgi_no_custom_kernels",
        "tgi",
        "2023-07-13T13:36:35.775510Z  WARN shard-manager: text_generation_launcher: We're not using custom kernels.",
        "2023-07-13T13:36:35.775510Z  WARN shard-manager: text_generation_launcher: We're using flash attention",
    ),
    (
        "tgi_init_error",
        "tgi",
        "2023-07-13T13:36:36.063775Z ERROR shard-manager: text_generation_launcher: Error when initializing model",
        "2023-07-13T13:36:36.063775Z  INFO shard-manager: text_generation_launcher: Initializing model",
    ),
    (
        "tgi_shard_stderr",
        "tgi",
        "2024-03-06T17:53:31.052367Z ERROR shard-manager: text_generation_launcher: Shard complete standard error output:",
        "2024-03-06T17:53:31.052367Z  INFO shard-manager: text_generation_launcher: Shard standard output follows",
    ),
    (
        "tgi_shard_signaled",
        "tgi",
        "2024-03-06T17:53:31.052444Z ERROR shard-manager: text_generation_launcher: Shard process was signaled to "
        "shutdown with signal 4 rank=0",
        "2024-03-06T17:53:31.052444Z  INFO shard-manager: text_generation_launcher: Shard terminated rank=0",
    ),
    (
        "tgi_shard_failed",
        "tgi",
        "2024-03-06T17:53:31.149443Z ERROR text_generation_launcher: Shard 0 failed to start",
        "2024-03-06T17:53:31.149443Z  INFO text_generation_launcher: Shard 0 started",
    ),
    (
        "tgi_launcher_error",
        "tgi",
        "Error: ShardCannotStart",
        "Errors: none",
    ),
    (
        "triton_started",
        "trtllm",
        "I1204 08:17:45.082233 1 grpc_server.cc:1939] Started GRPCService at 0.0.0.0:8001",
        "I1204 08:17:45.082251 1 http_server.cc:1411] Starting HTTPService at 0.0.0.0:8000 is deprecated",
    ),
    (
        "triton_starting_http",
        "trtllm",
        "I1204 08:17:45.082251 1 http_server.cc:1411] Starting HTTPService at 0.0.0.0:8000",
        "I1204 08:17:45.130062 1 server.cc:224] Polling model repository",
    ),
    (
        "triton_model_loaded",
        "trtllm",
        "I0120 08:27:55.120311 2049 model_lifecycle.cc:849] \"successfully loaded 'preprocessing'\"",
        "I0120 08:28:15.120311 2049 model_lifecycle.cc:636] \"successfully unloaded 'tensorrt_llm_bls' version 1\"",
    ),
    (
        "triton_model_unavailable",
        "trtllm",
        "| tensorrt_llm   | 1       | UNAVAILABLE: Internal: unexpected error when creating modelInstanceState: x |",
        "| tensorrt_llm   | 1       | READY  |",
    ),
    (
        "triton_load_failed",
        "trtllm",
        "error: creating server: Internal - failed to load all models",
        "I0120 08:28:13.508600 2049 server.cc:336] \"All models are stopped, unloading models\"",
    ),
    (
        "trtllm_error",
        "trtllm",
        "[TensorRT-LLM][ERROR] tensorrt_llm::common::TllmException: [TensorRT-LLM][ERROR] Assertion failed: d == a + length",
        "[TensorRT-LLM][INFO] Loaded engine size: 15448 MiB",
    ),
    (
        "sglang_watchdog_debug_info",
        "sglang",
        "[2026-01-29 13:12:36 PP1 TP0] Scheduler debug info:",
        "[2026-01-29 13:12:36 PP1 TP0] Scheduler debug info will be printed when the watchdog fires",
    ),
    (
        "lmdeploy_hint_open",
        "lmdeploy",
        "HINT:    Please open \x1b[93m\x1b[1mhttp://0.0.0.0:23333\x1b[0m in a browser for detailed api usage!!!",
        "HINT:    Please set --server-port to change the port",
    ),
    (
        "lmdeploy_gemm_config",
        "lmdeploy",
        "[WARNING] gemm_config.in is not found; using default GEMM algo",
        "[WARNING] gemm tuning is disabled",
    ),
    (
        "turbomind_fatal",
        "lmdeploy",
        "[TM][FATAL][0805 05:41:11.482000] Check failed: (ptr) 'weight' Must be non NULL",
        "[TM][INFO] [Gemm2] 6144",
    ),
    (
        "turbomind_error",
        "lmdeploy",
        "[TM][ERROR] CUDA runtime error: out of memory /lmdeploy/src/turbomind/utils/allocator.h:231",
        "[TM][WARNING] [LlamaTritonModel] max_context_token_num = 16384.",
    ),
    (
        "ray_app_ready",
        "ray",
        "INFO 2025-08-29 18:02:42,869 serve 519120 -- Application 'default' is ready at http://127.0.0.1:8000/.",
        "DEBUG 2025-04-21 15:16:45,548 serve 19439 -- Waiting for default to be RUNNING, current status: "
        "ApplicationStatus.DEPLOYING.",
    ),
    (
        "ray_deploying",
        "ray",
        "(ServeController pid=19963) INFO 2025-04-21 15:16:45,616 controller 19963 -- Deploying new version of "
        "Deployment(name='VLLMDeployment', app='default') (initial target replicas: 1).",
        "(ServeController pid=521647) INFO 2025-08-29 18:02:42,949 controller 521647 -- Removing 1 replica from "
        "Deployment(name='LLMRouter', app='default').",
    ),
    (
        "ray_replica_failed",
        "ray",
        "(pid=43093) 2021-06-25 16:24:01,207\tERROR worker.py:414 -- Exception raised in creation task: The actor died "
        "because of an error raised in its creation task",
        "(pid=43093) 2021-06-25 16:24:01,207\tINFO worker.py:414 -- Creation task finished for the replica",
    ),
    (
        "ray_replica_exception",
        "ray",
        "(ServeController pid=45327) ERROR 2025-06-11 13:15:51,444 controller 45327 -- Exception in "
        "Replica(id='03l9rrsq', deployment='LLMDeploymentdeepseek', app='default'), the replica will be stopped.",
        "(ServeController pid=521647) INFO 2025-08-29 18:02:44,981 controller 521647 -- Stopping Replica(id='aw9v81k4', "
        "deployment='LLMServer', app='llms') (currently RUNNING).",
    ),
    (
        "ray_replica_init_failed",
        "ray",
        "ray::ServeReplica:llms:LLMDeployment:qwen2_5-7b-instruct.initialize_and_get_metadata() (pid=40568, "
        "ip=10.233.118.22, actor_id=f390da608347097abede6fbe01000000)",
        "(ServeReplica:llms:LLMServer:qwen pid=316) INFO 2025-10-01 10:00:00,000 llms_LLMServer abc -- "
        "initialize_and_get_metadata OK 1502.3ms",
    ),
    (
        "ray_actor_died",
        "ray",
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        "(ServeController pid=521647) INFO 2025-08-29 18:02:44,981 controller 521647 -- Replica(id='aw9v81k4') is stopped.",
    ),
    (
        "llamacpp_ready",
        "llamacpp",
        "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
        "main: HTTP server is listening, hostname: 127.0.0.1, port: 8080, http threads: 11",
    ),
    (
        "llamacpp_http_listening",
        "llamacpp",
        "main: HTTP server is listening, hostname: 127.0.0.1, port: 8080, http threads: 11",
        "main: binding port with default address family",
    ),
    (
        "llamacpp_load_failed",
        "llamacpp",
        "llama_model_load: error loading model: error loading model vocabulary: unknown pre-tokenizer type: 'deepseek-r1-qwen'",
        "llama_model_loader: loaded meta data with 25 key-value pairs and 579 tensors",
    ),
    (
        "lmdeploy_engine_failed",
        "lmdeploy",
        "2024-07-17 13:52:34,618 - lmdeploy - ERROR - Rank[2] failed.",
        "2024-07-17 13:52:34,618 - lmdeploy - INFO - Rank[2] ready.",
    ),
    (
        "triton_python_backend_failed",
        "trtllm",
        'E1216 02:12:49.624646 179 model.py:248] "[vllm] Failed to start engine: NoneType: None\\n"',
        'I1216 02:12:42.654863 179 python_be.cc:2289] "TRITONBACKEND_ModelInstanceInitialize: vllm_0_0 (MODEL device 0)"',
    ),
    (
        "llamacpp_serving",
        "llamacpp",
        "slot launch_slot_: id  0 | task 562 | processing task",
        "slot launch_slot_: id  0 | task -1 | sampler params: ",
    ),
    (
        "vllm_worker_method_failed",
        "vllm",
        "(RayWorkerWrapper pid=880) ERROR 04-16 01:01:44 [worker_base.py:620] Error executing method 'init_device'. "
        "This might cause deadlock in distributed execution.",
        "(RayWorkerWrapper pid=880) INFO 04-16 01:01:44 [worker_base.py:600] Executing method 'init_device' on 8 workers",
    ),
    (
        "usage_line",
        "generic",
        "usage: api_server.py [-h] [--host HOST] [--port PORT]",
        "INFO model usage: 3.2 GB",
    ),
]


def _decide(engine: str, line: str) -> str | None:
    classifier = LogClassifier(engine=engine)
    events = classifier.feed(line) + classifier.finish()  # a traceback header waits for its end
    assert len(events) == 1, events
    return events[0].rule


@pytest.mark.parametrize(("rule", "engine", "line", "near"), CASES, ids=[c[0] for c in CASES])
def test_rule_matches_its_positive_case(rule: str, engine: str, line: str, near: str) -> None:
    assert _decide(engine, line) == rule


@pytest.mark.parametrize(("rule", "engine", "line", "near"), CASES, ids=[c[0] for c in CASES])
def test_rule_does_not_match_its_near_miss(rule: str, engine: str, line: str, near: str) -> None:
    assert _decide(engine, near) != rule


def test_every_rule_of_every_pack_has_a_case() -> None:
    named = {c[0] for c in CASES}
    missing = sorted(r.name for pack in PACKS.values() for r in pack.rules if r.name not in named)
    assert missing == []


def test_rule_names_are_unique_across_packs() -> None:
    names = [r.name for pack in PACKS.values() for r in pack.rules]
    assert len(names) == len(set(names))


def test_the_incident_line_is_benign_and_the_seed_grep_would_have_aborted() -> None:
    line = (
        "[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: cannot import name "
        "'GlmAsrConfig' from 'transformers' (/root/ml-env/lib/python3.12/site-packages/transformers/__init__.py)"
    )
    event = LogClassifier(engine="auto").feed("[2026-02-26 20:25:00] server_args=ServerArgs(model_path='x')")[
        0
    ]
    assert event.rule == "sglang_server_args"
    classifier = LogClassifier(engine="sglang")
    (event,) = classifier.feed(line)
    assert (event.verdict, event.rule, event.rank) == (Verdict.BENIGN, "sglang_ignore_import_error", "TP5")


def test_invalid_rules_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="not a valid regex"):
        Rule("bad", "(unclosed", Verdict.FATAL)
    with pytest.raises(ValueError, match="is not one of"):
        Rule("bad", "x", "deadly")  # type: ignore[arg-type]
