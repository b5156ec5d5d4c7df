"""Fatal messages of the injected faults, in the engines' real traceback formats.

Pure: each function returns one traceback's lines; the process that prints them adds the prefix
(SGLang logs `Scheduler hit an exception: <traceback>` as one record; vLLM prefixes every line).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "CUDA_ILLEGAL_ACCESS", "SITE", "bind_error", "cuda_oom", "import_error_traceback",
    "kernel_version_traceback", "transformers_cb_traceback", "SCHEDULER_WAIT_FRAMES", "nccl_error",
    "sglang_crash_traceback", "sglang_graph_capture_traceback", "sglang_init_traceback", "traceback_lines",
    "vllm_api_server_traceback", "vllm_engine_dead_traceback", "vllm_engine_traceback",
    "vllm_worker_traceback",
]

SITE = "/usr/local/lib/python3.12/site-packages"
Frame = tuple[str, int, str, str]  # (path relative to SITE or absolute, line, function, source line)

CUDA_ILLEGAL_ACCESS = (
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
)


def _caret(code: str) -> str | None:
    """Python 3.12 underlines the failing expression unless it would cover the whole line."""
    for lead in (" = ", "return "):
        at = code.find(lead)
        if at >= 0:
            start = at + len(lead)
            return " " * (start + 4) + "^" * (len(code) - start)
    return None


def traceback_lines(frames: Sequence[Frame], exception: Sequence[str], site: str = SITE) -> list[str]:
    """`Traceback (most recent call last):`, the frames, then the exception lines."""
    lines = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        full = path if path.startswith(("/", "<")) else f"{site}/{path}"
        lines.append(f'  File "{full}", line {line}, in {func}')
        if code:
            lines.append(f"    {code}")
            caret = _caret(code)
            if caret is not None:
                lines.append(caret)
    return lines + list(exception)


def cuda_oom(gpu: int, pid: int) -> str:
    """torch's CUDA OOM message, with a realistic H200 budget."""
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU {gpu} has a total "
            f"capacity of 139.81 GiB of which 1.12 GiB is free. Process {pid} has 138.68 GiB memory in use. Of "
            "the allocated memory 135.91 GiB is allocated by PyTorch, and 1.02 GiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
            "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


def nccl_error() -> list[str]:
    return ["torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:3353, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL "
            "version 2.27.5", "ncclUnhandledCudaError: Call to CUDA function failed.", "Last error:",
            "Cuda failure 'out of memory'"]


def bind_error(host: str, port: int) -> str:
    """asyncio's bind failure exactly as uvicorn logs it."""
    return f"[Errno 98] error while attempting to bind on address ('{host}', {port}): address already in use"


_SCHED = "sglang/srt/managers/scheduler.py"
_RUNNER = "sglang/srt/model_executor/model_runner.py"
_KVC = "sglang/srt/mem_cache/kv_cache_configurator.py"
_POOL = "sglang/srt/model_executor/pool_configurator.py"
_SCHED_INIT: list[Frame] = [
    (_SCHED, 2962, "run_scheduler_process", "scheduler = Scheduler("),
    (_SCHED, 344, "__init__", "self.tp_worker = TpModelWorker("),
    ("sglang/srt/managers/tp_worker.py", 96, "__init__", "self.model_runner = ModelRunner("),
]


def sglang_init_traceback(kind: str, rank: int, pid: int) -> list[str]:
    """Scheduler start-up failures: `oom` or `weights` while loading weights, `nccl` in torch.distributed init."""
    if kind == "nccl":
        return traceback_lines(_SCHED_INIT + [
            (_RUNNER, 302, "__init__", "min_per_gpu_memory = self.init_torch_distributed()"),
            (_RUNNER, 731, "init_torch_distributed", "initialize_model_parallel("),
            ("sglang/srt/distributed/parallel_state.py", 1502, "initialize_model_parallel",
             "_TP = init_model_parallel_group("),
            ("sglang/srt/distributed/parallel_state.py", 268, "__init__",
             "torch.distributed.barrier(group=self.cpu_group)"),
            ("torch/distributed/c10d_logger.py", 81, "wrapper", "return func(*args, **kwargs)"),
            ("torch/distributed/distributed_c10d.py", 4798, "barrier", "work = group.barrier(opts=opts)"),
        ], nccl_error())
    loader = [
        (_RUNNER, 312, "__init__", "self.initialize(min_per_gpu_memory)"),
        (_RUNNER, 390, "initialize", "self.load_model()"),
        (_RUNNER, 862, "load_model", "self.model = get_model("),
        ("sglang/srt/model_loader/__init__.py", 28, "get_model", "return loader.load_model("),
    ]
    if kind == "weights":
        return traceback_lines(_SCHED_INIT + loader + [
            ("sglang/srt/model_loader/loader.py", 588, "load_model", "self.load_weights_and_postprocess("),
            ("sglang/srt/models/deepseek_v2.py", 3321, "load_weights", "param = params_dict[name]"),
        ], ["KeyError: 'model.layers.60.mlp.experts.w2_weight_scale_inv'"])
    return traceback_lines(_SCHED_INIT + loader + [
        ("sglang/srt/model_loader/loader.py", 594, "load_model", "self.load_weights_and_postprocess("),
        ("sglang/srt/model_loader/loader.py", 627, "load_weights_and_postprocess",
         "quant_method.process_weights_after_loading(module)"),
        ("sglang/srt/layers/quantization/fp8.py", 1023, "process_weights_after_loading",
         "w13_weight = torch.empty_like(layer.w13_weight.data, dtype=torch.float8_e4m3fn)"),
    ], [cuda_oom(rank, pid)])


def sglang_kv_budget_traceback(mem_fraction_static: float, avail_gb: float, pre_load_gb: float,
                               weights_fit: bool) -> list[str]:
    """A scheduler traceback when ``--mem-fraction-static`` leaves the KV cache no room (SGLang 0.5.23).

    Weights over the budget: ValueError with the smallest fraction, 1 - available/pre-load
    (mem_cache/kv_cache_configurator.py:3049-3058); they fit but no KV token does: "Not enough memory.
    Please try to increase --mem-fraction-static." (model_executor/pool_configurator.py:96-99).
    """
    head: list[Frame] = [
        (_SCHED, 1090, "init_model_worker", "self.tp_worker.alloc_memory_pool("),
        (_RUNNER, 982, "alloc_memory_pool", "result = self.kv_cache_configurator.configure("),
        (_KVC, 476, "configure", "config = self._resolve_memory_pool_config(pre_model_load_memory)"),
    ]
    if not weights_fit:
        minimum = 1 - avail_gb / pre_load_gb
        return traceback_lines(head + [
            (_KVC, 3182, "_resolve_memory_pool_config",
             "available_bytes = self._profile_available_bytes(pre_model_load_memory)"),
            (_KVC, 3049, "_profile_available_bytes", "raise ValueError("),
        ], [f"ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static="
            f"{mem_fraction_static}. Raise --mem-fraction-static above {math.ceil(minimum * 1000) / 1000:.3f} "
            f"(minimum viable = 1 - available/pre = {minimum:.4f}). If using speculative decoding, draft weights "
            "are now counted."])
    return traceback_lines(head + [
        (_KVC, 3183, "_resolve_memory_pool_config", "config = self.config_from_budget(available_bytes)"),
        (_KVC, 3204, "config_from_budget", "config = configurator.calculate_pool_sizes("),
        (_POOL, 647, "calculate_pool_sizes", "return MemoryPoolConfig(max_total_num_tokens=max_total_num_tokens)"),
        ("<string>", 17, "__init__", ""),
        (_POOL, 99, "__post_init__", "raise RuntimeError(msg)"),
    ], ["RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
        f"mem_fraction_static={mem_fraction_static}"])


def sglang_graph_capture_traceback(advice: Sequence[str] = ()) -> list[str]:
    """A scheduler traceback from CUDA graph capture, with SGLang's "Possible solutions" text."""
    runner = "sglang/srt/model_executor/cuda_graph_runner.py"
    inner = traceback_lines([
        (runner, 376, "__init__", "self.capture()"),
        (runner, 495, "capture", ") = self.capture_one_batch_size(bs, forward, stream_idx)"),
        (runner, 640, "capture_one_batch_size", "run_once()"),
        (runner, 627, "run_once", "logits_output_or_pp_proxy_tensors = forward("),
    ], CUDA_ILLEGAL_ACCESS)
    outer = traceback_lines(_SCHED_INIT + [
        (_RUNNER, 312, "__init__", "self.initialize(min_per_gpu_memory)"),
        (_RUNNER, 468, "initialize", "self.init_device_graphs()"),
        (_RUNNER, 2011, "init_device_graphs", "self.graph_runner = graph_runners[self.device](self)"),
        (runner, 378, "__init__", "raise Exception("),
    ], ["Exception: Capture cuda graph failed: " + CUDA_ILLEGAL_ACCESS[0].split(": ", 1)[1],
        *CUDA_ILLEGAL_ACCESS[1:], "", *advice])
    return inner + ["", "During handling of the above exception, another exception occurred:", ""] + outer


def sglang_crash_traceback(speculative: bool) -> list[str]:
    """A scheduler traceback in the middle of serving: an illegal memory access in a forward pass."""
    worker = ("sglang/srt/speculative/eagle_worker.py", 312, "forward_batch_generation",
              "logits_output, verify_output, model_worker_batch, _ = self.verify(") if speculative else \
        ("sglang/srt/managers/tp_worker.py", 301, "forward_batch_generation",
         "logits_output, can_run_cuda_graph = self.model_runner.forward(")
    return traceback_lines([
        (_SCHED, 2975, "run_scheduler_process", "scheduler.event_loop_overlap()"),
        ("torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
        (_SCHED, 1012, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
        (_SCHED, 2011, "run_batch", "batch_result = self.model_worker.forward_batch_generation("),
        worker,
        (_RUNNER, 2100, "forward", "output = self._forward_raw("),
        (_RUNNER, 2164, "_forward_raw", "ret = self.forward_decode("),
    ], CUDA_ILLEGAL_ACCESS)


_CORE = "vllm/v1/engine/core.py"
_MPX = "vllm/v1/executor/multiproc_executor.py"


def vllm_worker_traceback(kind: str, rank: int, pid: int) -> list[str]:
    """What a vLLM worker (or a TP=1 EngineCore) logs when loading fails: `oom` or `nccl`."""
    head: list[Frame] = [(_MPX, 673, "worker_main", "worker = WorkerProc(*args, **kwargs)")]
    if kind == "nccl":
        return traceback_lines(head + [
            (_MPX, 498, "__init__", "self.worker.init_device()"),
            ("vllm/v1/worker/gpu_worker.py", 231, "init_device", "init_worker_distributed_environment("),
            ("vllm/v1/worker/gpu_worker.py", 951, "init_worker_distributed_environment",
             "ensure_model_parallel_initialized("),
            ("vllm/distributed/parallel_state.py", 1512, "initialize_model_parallel",
             "_TP = init_model_parallel_group("),
            ("torch/distributed/distributed_c10d.py", 4798, "barrier", "work = group.barrier(opts=opts)"),
        ], nccl_error())
    return traceback_lines(head + [
        (_MPX, 503, "__init__", "self.worker.load_model()"),
        ("vllm/v1/worker/gpu_worker.py", 273, "load_model", "self.model_runner.load_model(eep_scale_up=eep_scale_up)"),
        ("vllm/v1/worker/gpu_model_runner.py", 5209, "load_model", "self.model = model_loader.load_model("),
        ("vllm/model_executor/model_loader/base_loader.py", 49, "load_model", "model = initialize_model("),
        ("vllm/model_executor/layers/fused_moe/layer.py", 612, "__init__", "self.quant_method.create_weights("),
    ], [cuda_oom(rank, pid)])


def vllm_engine_traceback(cause: str) -> list[str]:
    """EngineCore start-up failure: `workers` (a worker failed) or `kv-cache` (log 059's ValueError)."""
    head: list[Frame] = [
        (_CORE, 1200, "run_engine_core", "engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)"),
        (_CORE, 966, "__init__", "super().__init__("),
    ]
    if cause == "kv-cache":
        return traceback_lines(head + [
            (_CORE, 133, "__init__", "kv_cache_config = self._initialize_kv_caches(vllm_config)"),
            ("vllm/v1/core/kv_cache_utils.py", 760, "_check_enough_kv_cache_memory", "raise ValueError("),
        ], ["ValueError: To serve at least one request with the model's max seq len (262144), (18.35 GiB KV "
            "cache is needed, which is larger than the available KV cache memory (8.72 GiB). Based on the "
            "available memory, the estimated maximum model length is 121840. Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."])
    return traceback_lines(head + [
        (_CORE, 110, "__init__", "self.model_executor = executor_class(vllm_config)"),
        ("vllm/v1/executor/abstract.py", 101, "__init__", "self._init_executor()"),
        (_MPX, 172, "_init_executor", "self.workers = WorkerProc.wait_for_ready(unready_workers)"),
        (_MPX, 611, "wait_for_ready", "raise e from None"),
    ], ["Exception: WorkerProc initialization failed due to an exception in a background process. See stack "
        "trace for root cause."])


def vllm_api_server_traceback(cause: str) -> list[str]:
    """The API server's own traceback: `engine` (core init failed) or `bind` (port in use)."""
    head: list[Frame] = [
        ("/usr/local/bin/vllm", 10, "<module>", "sys.exit(main())"),
        ("vllm/entrypoints/cli/main.py", 95, "main", "args.dispatch_function(args)"),
        ("vllm/entrypoints/cli/serve.py", 148, "cmd", "uvloop.run(run_server(args))"),
        ("uvloop/__init__.py", 48, "wrapper", "return await main"),
    ]
    if cause == "bind":
        return traceback_lines(head + [
            ("vllm/entrypoints/openai/api_server.py", 690, "run_server", "listen_address, sock = setup_server(args)"),
            ("vllm/entrypoints/openai/api_server.py", 655, "setup_server", "sock = create_server_socket(sock_addr)"),
            ("vllm/entrypoints/openai/api_server.py", 621, "create_server_socket", "sock.bind(addr)"),
        ], ["OSError: [Errno 98] Address already in use"])
    return traceback_lines(head + [
        ("vllm/entrypoints/openai/api_server.py", 712, "run_server_worker", "async with build_async_engine_client("),
        ("vllm/v1/engine/core_client.py", 573, "__init__", "with launch_core_engines("),
        ("vllm/v1/engine/utils.py", 1272, "wait_for_engine_startup", "raise RuntimeError("),
    ], ["RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"])


def vllm_engine_dead_traceback() -> tuple[list[str], list[str]]:
    """(EngineCore's fatal error, the API server's EngineDeadError) for a crash while serving."""
    core = traceback_lines([
        (_CORE, 935, "run_engine_core", "engine_core.run_busy_loop()"),
        (_CORE, 962, "run_busy_loop", "self._process_engine_step()"),
        (_CORE, 991, "_process_engine_step", "outputs, model_executed = self.step_fn()"),
        ("vllm/v1/worker/gpu_model_runner.py", 3105, "execute_model", "model_output = self._model_forward("),
    ], CUDA_ILLEGAL_ACCESS)
    api = traceback_lines([
        ("vllm/v1/engine/async_llm.py", 520, "output_handler", "outputs = await engine_core.get_output_async()"),
        ("vllm/v1/engine/core_client.py", 874, "get_output_async", "raise self._format_exception(outputs) from None"),
    ], ["vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) "
        "for the root cause."])
    return core, api


def import_error_traceback(engine: str, root: str, module: str, name: str) -> list[str]:
    """A broken checkout: the entry point dies importing `name` from `module` (plain Python traceback)."""
    module_file = f"{root}/{module.replace('.', '/')}.py"
    if engine == "vllm":
        frames: list[Frame] = [
            ("/usr/local/bin/vllm", 5, "<module>", "from vllm.entrypoints.cli.main import main"),
            (f"{root}/vllm/entrypoints/cli/__init__.py", 3, "<module>",
             "from vllm.entrypoints.cli.benchmark.latency import BenchmarkLatencySubcommand"),
            (f"{root}/vllm/v1/engine/core.py", 41, "<module>", f"from {module} import {name}"),
        ]
    else:
        frames = [
            ("<frozen runpy>", 198, "_run_module_as_main", ""),
            ("<frozen runpy>", 88, "_run_code", ""),
            (f"{root}/sglang/launch_server.py", 7, "<module>",
             "from sglang.srt.entrypoints.http_server import launch_server"),
            (f"{root}/sglang/srt/entrypoints/http_server.py", 47, "<module>",
             "from sglang.srt.entrypoints.engine import _launch_subprocesses"),
            (f"{root}/sglang/srt/managers/scheduler.py", 88, "<module>", f"from {module} import ("),
        ]
    return traceback_lines(frames, [f"ImportError: cannot import name '{name}' from '{module}' ({module_file})"])


# The launcher waiting for its schedulers (sglang 0.5.23 python/sglang/srt/entrypoints/engine.py:994-1031, 2023-2029).
SCHEDULER_WAIT_FRAMES: list[Frame] = [
    ("sglang/launch_server.py", 31, "<module>", "run_server(server_args)"),
    ("sglang/srt/entrypoints/http_server.py", 3154, "launch_server", "_launch_subprocesses("),
    ("sglang/srt/entrypoints/engine.py", 995, "wait_for_ready", "infos = _wait_for_scheduler_ready(scheduler_pipe_readers, "
                                                                 "scheduler_procs)"),
    ("sglang/srt/entrypoints/engine.py", 2029, "_wait_for_scheduler_ready", "raise _scheduler_died_error(i, scheduler_procs[i])"),
]


def kernel_version_traceback(package_root: str, package: str, installed: str | None, required: str) -> list[str]:
    """SGLang's launcher refusing an old kernel wheel (0.5.23 engine.py:1962-1966, utils/common.py:2428-2431)."""
    root = f"{package_root}/sglang" if package_root else "sglang"
    frames: list[Frame] = [
        ("<frozen runpy>", 198, "_run_module_as_main", ""),
        ("<frozen runpy>", 88, "_run_code", ""),
        (f"{root}/launch_server.py", 31, "<module>", "run_server(server_args)"),
        (f"{root}/srt/entrypoints/engine.py", 1155, "_launch_subprocesses", "_set_envs_and_config()"),
        (f"{root}/srt/entrypoints/engine.py", 1962, "_set_envs_and_config", "assert_pkg_version("),
        (f"{root}/srt/utils/common.py", 2428, "assert_pkg_version", "raise Exception("),
    ]
    advice = f"Please reinstall the latest version with `pip install {package} --force-reinstall`"
    problem = (f"with minimum required version {required} is not installed" if installed is None else
               f"is installed with version {installed}, which is less than the minimum required "
               f"version {required}")
    return traceback_lines(frames, [f"Exception: {package} {problem}. {advice}"])


def transformers_cb_traceback() -> list[str]:
    """The batching thread's exception, as ``logger.error(..., exc_info=True)`` prints it
    (transformers 5.24.0 transformers/generation/continuous_batching/continuous_api.py:1150)."""
    api = "transformers/generation/continuous_batching/continuous_api.py"
    return traceback_lines([
        (api, 1122, "_run_generation_loop", "self._inner_generation_loop(batch_processor)"),
        (api, 1180, "_inner_generation_loop", "self._generation_step()"),
        (api, 1162, "_generation_step", "self.batch_processor._generation_step(self.model)"),
    ], CUDA_ILLEGAL_ACCESS)
