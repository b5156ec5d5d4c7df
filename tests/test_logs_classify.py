"""The streaming classifier: line parsing, traceback grouping, readiness semantics, extension."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.cli.logs import main as cli_main
from toolkit.logs import (
    GENERIC,
    SGLANG,
    LogClassifier,
    Phase,
    Rule,
    Verdict,
    add_rule,
    classify_lines,
    detect_engine,
    parse_line,
    parse_metric,
    summarize,
)
from toolkit.server.hints import release_hint
from toolkit.sim.faults import sglang_kv_budget_traceback

# -- parsing -------------------------------------------------------------------

PARSE_CASES = [
    # raw, rank, level, text
    ("[2026-02-26 20:26:06 TP5] Ignore import error", "TP5", None, "Ignore import error"),
    ("[2025-07-02 07:41:58 DP0 TP0] Load weight end.", "DP0 TP0", None, "Load weight end."),
    (
        "[TP5 EP5] Scheduler hit an exception: Traceback",
        "TP5 EP5",
        None,
        "Scheduler hit an exception: Traceback",
    ),
    (
        "\x1b[1;36m(EngineCore_DP0 pid=417364)\x1b[0;0m ERROR 08-03 15:21:53 [fa_utils.py:57] Cannot use FA",
        "EngineCore_DP0 pid=417364",
        "ERROR",
        "Cannot use FA",
    ),
    (
        "(VllmWorker rank=1 pid=281) ERROR 07-15 08:54:44 [multiproc_executor.py:522] RuntimeError: x",
        "VllmWorker rank=1 pid=281",
        "ERROR",
        "RuntimeError: x",
    ),
    (
        "(Worker_TP1 pid=205) ERROR 01-02 09:41:22 [multiproc_executor.py:751] WorkerProc failed to start.",
        "Worker_TP1 pid=205",
        "ERROR",
        "WorkerProc failed to start.",
    ),
    (
        "(APIServer pid=29938) INFO:     Application startup complete.",
        "APIServer pid=29938",
        "INFO",
        "Application startup complete.",
    ),
    (
        "(RayWorkerWrapper pid=1463574, ip=192.168.10.60) INFO 03-27 10:29:01 [worker.py:267] x",
        "RayWorkerWrapper pid=1463574, ip=192.168.10.60",
        "INFO",
        "x",
    ),
    ("(pid=123) hello", "pid=123", None, "hello"),
    (
        "sglang-1  | [2025-10-29 11:25:58 TP3] Watchdog timeout (self.watchdog_timeout=300)",
        "TP3",
        None,
        "Watchdog timeout (self.watchdog_timeout=300)",
    ),
    (
        "2024-05-01T12:00:00.123Z INFO:     Application startup complete.",
        None,
        "INFO",
        "Application startup complete.",
    ),
    (
        "Feb 22 06:35:27 host env[2827]: (EngineCore_DP0 pid=2827) ERROR 02-22 06:35:27 [core.py:946] EngineCore failed to start.",
        "EngineCore_DP0 pid=2827",
        "ERROR",
        "EngineCore failed to start.",
    ),
    (
        "[rank0]:[W803 21:49:24.248813923 ProcessGroupNCCL.cpp:1575] Warning: x",
        "rank0",
        "WARNING",
        "Warning: x",
    ),
    (
        "I0209 14:38:38.388363 24482 client_metric.cpp:80] Client metrics enabled",
        None,
        "INFO",
        "Client metrics enabled",
    ),
    ("[2026-02-09 14:38:13] WARNING server_args.py:1929: Mooncake", None, "WARNING", "Mooncake"),
    (
        "[2026-02-09 14:38:44] INFO:     Application startup complete.",
        None,
        "INFO",
        "Application startup complete.",
    ),
    (
        "2025-03-07 23:50:27,531 - __main__ - INFO - [2025-03-07 23:50:27 TP0] Init torch distributed begin.",
        "TP0",
        "INFO",
        "Init torch distributed begin.",
    ),
    (
        "(EngineCore pid=6890) ERROR 08-03 21:49:23 [core.py:1231] EngineCore failed to start.\r",
        "EngineCore pid=6890",
        "ERROR",
        "EngineCore failed to start.",
    ),
    (
        "\rMulti-thread loading shards:   7% Completed | 1/15 [00:29<06:47, 29.12s/it][2026-08-01 23:38:33] Parameter x not found",
        None,
        None,
        "Parameter x not found",
    ),
    (
        "\r  0%|          | 0/1 [00:00<?, ?it/s]\rCapturing batches (bs=1 avail_mem=5.89 GB):   0%|",
        None,
        None,
        "Capturing batches (bs=1 avail_mem=5.89 GB):   0%|",
    ),
    ('  File "x.py", line 3, in f', None, None, '  File "x.py", line 3, in f'),
    # prefixes added by what runs the engine (issue 12): none hides the record's own header
    (
        "[pod/vllm-7d9f/vllm] (APIServer pid=1) INFO 05-12 08:01:39 [loggers.py:271] Engine 000: x",
        "APIServer pid=1",
        "INFO",
        "Engine 000: x",
    ),
    ("[2025-05-20T05:24:31Z] RuntimeError: Engine core initialization failed.", None, None,
     "RuntimeError: Engine core initialization failed."),
    (
        "[2025-05-21T18:59:44Z] ERROR 05-21 11:59:44 [core.py:493] EngineCore failed to start.",
        None,
        "ERROR",
        "EngineCore failed to start.",
    ),
    ("  | [2026-01-21 19:49:14 DP0 TP0] Capture cuda graph end.", "DP0 TP0", None, "Capture cuda graph end."),
    ("│ INFO 03-21 20:19:24 [launcher.py:34] Route: /v1/models, Methods: GET      │", None, "INFO",
     "Route: /v1/models, Methods: GET      │"),
    (
        "\x1b[36mvllm-1    \x1b[0m | \x1b[32mINFO\x1b[0m 05-12 08:01:39 [api_server.py:1] Starting vLLM API server",
        None,
        "INFO",
        "Starting vLLM API server",
    ),
    (
        "2023-08-28T02:59:16.348667054-07:00 2023-08-28T09:59:16.348639Z  INFO download: text_generation_launcher: x",
        None,
        "INFO",
        "download: text_generation_launcher: x",
    ),
    ("2024-03-06T17:53:31.052444Z ERROR shard-manager: text_generation_launcher: Shard 0 failed", None, "ERROR",
     "shard-manager: text_generation_launcher: Shard 0 failed"),
    ("[2025-11-01 16:50:36.123 DP0 ATTN_CP1 MOE_DP0 TP3 EP3] Load weight end.", "DP0 ATTN_CP1 MOE_DP0 TP3 EP3", None,
     "Load weight end."),
    ("[2025-11-01 16:50:36 encode_dp_worker[2]] Encoder ready", "encode_dp_worker[2]", None, "Encoder ready"),
    (
        "(ServeReplica:default:meta-llama/Llama-2-7b-hf pid=522791) INFO 2025-08-29 18:02:41,815 x -- CALL OK",
        "ServeReplica:default:meta-llama/Llama-2-7b-hf pid=522791",
        None,
        "INFO 2025-08-29 18:02:41,815 x -- CALL OK",
    ),
    (
        "Loading: 100%|##| 4/4 [00:01<00:00,  2.1it/s](APIServer pid=7) ERROR 05-12 08:01:39 [core.py:1] EngineCore failed",
        "APIServer pid=7",
        "ERROR",
        "EngineCore failed",
    ),
    (
        "Loading: 100%|##| 4/4 [00:01<00:00,  2.1it/s]sglang-1  | [2025-01-01 00:00:00 TP0] Load weight end.",
        "TP0",
        None,
        "Load weight end.",
    ),
    (
        "2024-08-05 05:41:11,482 - lmdeploy - WARNING - turbomind.py:120 - get 723 model params",
        None,
        "WARNING",
        "get 723 model params",
    ),
    # Docker Desktop's log view: local time, no zone (sglang#3321); Python's asctime without milliseconds stays _PYLOG's
    ("2025-02-06 07:14:10 ModuleNotFoundError: No module named 'uvicorn'", None, None,
     "ModuleNotFoundError: No module named 'uvicorn'"),
    ("2025-03-07 23:50:27 - __main__ - INFO - Attempt 13", None, "INFO", "Attempt 13"),
]


def test_prefixes_keep_the_file_line_numbers_and_never_hide_a_rule() -> None:
    bare = [
        "[2025-03-09 00:57:15 TP4] Watchdog timeout (self.watchdog_timeout=300)",
        "(EngineCore_DP0 pid=1) ERROR 10-15 08:32:29 [core.py:708] EngineCore failed to start.",
    ]
    wrappers = [
        lambda line: f"sglang-1  | {line}",
        lambda line: f"\x1b[36msvc_a-1\x1b[0m   \x1b[36m|\x1b[0m {line}",
        lambda line: f"[pod/server-0/engine] {line}",
        lambda line: f"[2025-05-20T05:24:31Z] {line}",
        lambda line: f"2024-05-01T12:00:00.1234567Z {line}",
        lambda line: f"Mar 05 10:00:00 gpu-a sglang[4242]: {line}",
        lambda line: f"2025-02-06 07:14:10 {line}",
        lambda line: f"  | {line}",
        lambda line: f"Loading: 100%|##| 4/4 [00:01<00:00,  2.1it/s]{line}",
    ]
    rules = ["sglang_watchdog_timeout", "vllm_engine_failed_to_start"]
    for wrap in wrappers:
        for line, rule in zip(bare, rules, strict=True):
            events = classify_lines(["starting", wrap(line)])
            fatal = [(e.line_no, e.rule) for e in events if e.verdict is Verdict.FATAL]
            assert fatal == [(2, rule)], wrap(line)


@pytest.mark.parametrize(("raw", "rank", "level", "text"), PARSE_CASES)
def test_parse_line(raw: str, rank: str | None, level: str | None, text: str) -> None:
    parsed = parse_line(raw)
    assert (parsed.rank, parsed.level, parsed.text) == (rank, level, text)
    assert parsed.raw == raw


def test_timestamps() -> None:
    assert parse_line("[2026-02-26 20:26:06 TP5] x").timestamp == datetime(2026, 2, 26, 20, 26, 6)
    # vLLM prints no year: year 1900 stands for "not printed"
    assert parse_line("INFO 08-01 23:19:54 [api_utils.py:339] x").timestamp == datetime(
        1900, 8, 1, 23, 19, 54
    )
    assert parse_line("plain text").timestamp is None


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_parse_and_classify_never_raise(text: str) -> None:
    parse_line(text)
    classifier = LogClassifier()
    for line in text.split("\n"):
        classifier.feed(line)
    classifier.finish()


@given(
    st.lists(
        st.sampled_from(
            [
                "[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: x",
                "[2026-02-26 20:26:07 TP0] Scheduler hit an exception: Traceback (most recent call last):",
                '  File "/x/scheduler.py", line 1, in run',
                "    raise ValueError('boom')",
                "ValueError: boom",
                "",
                "[2026-02-26 20:26:08] Received sigquit from a child proces. It usually means the child failed.",
                "[2026-02-26 20:26:09] The server is fired up and ready to roll!",
                "[2026-02-26 20:26:10 TP0] Decode batch. #running-req: 1, gen throughput (token/s): 3.0, #queue-req: 0",
            ]
        ),
        max_size=40,
    )
)
@settings(max_examples=200, deadline=None)
def test_every_line_is_accounted_for_once(lines: list[str]) -> None:
    """Each line is its own event or inside exactly one traceback event's context."""
    events = classify_lines(lines, engine="sglang")
    assert sum(1 + len(e.context) for e in events) == len(lines)
    assert len({e.line_no for e in events}) == len(events)


# -- metrics -------------------------------------------------------------------


def test_metric_styles() -> None:
    comma = parse_metric(
        "Decode batch, #running-req: 2, #token: 464, gen throughput (token/s): 25.84, #queue-req: 0"
    )
    dot = parse_metric(
        "Decode batch. #running-req: 1, #token: 20, token usage: 0.00, gen throughput (token/s): 6.42, #queue-req: 0, "
    )
    old_prefill = parse_metric(
        "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, cache hit rate: 0.00%, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0"
    )
    v0 = parse_metric(
        "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, "
        "Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%."
    )
    assert comma is not None and dot is not None and old_prefill is not None and v0 is not None
    assert (comma.kind, comma.values["running_req"], comma.values["gen_throughput"]) == (
        "sglang_decode",
        2,
        25.84,
    )
    assert (dot.values["queue_req"], dot.values["token_usage"]) == (0, 0.0)
    assert old_prefill.values["cache_hit_rate_pct"] == 0.0 and old_prefill.values["new_token"] == 7
    assert v0.values["running_reqs"] == 0 and v0.values["cpu_kv_cache_usage_pct"] == 0.0
    assert parse_metric("Decode batch sizes are [1, 2, 4]") is None
    # a paste that lost the trailing space keeps the last field (OpenClaw-RL#44), line after line (the compiled shape)
    for gen in ("1374.02", "1374.07"):
        pasted = parse_metric(f"Decode batch, #running-req: 6, gen throughput (token/s): {gen}, #queue-req: 0,")
        assert pasted is not None and pasted.values["queue_req"] == 0 and pasted.values["gen_throughput"] == float(gen)


def test_metric_events_carry_rank_time_and_line() -> None:
    events = classify_lines(
        [
            "[2025-10-22 10:27:50] server_args=ServerArgs(model_path='x')",
            "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, accept len: 2.17, "
            "gen throughput (token/s): 0.39, #queue-req: 0, ",
        ]
    )
    metric = events[1].metric
    assert metric is not None and events[1].verdict is Verdict.METRIC  # start-up seen: a warm-up batch, not proof
    assert (metric.line_no, metric.rank, metric.timestamp) == (2, "TP0", datetime(2025, 10, 22, 10, 27, 57))
    assert metric.values["accept_len"] == 2.17


# -- tracebacks and notices -----------------------------------------------------

SIGQUIT_THEN_RANK = [
    "[2025-01-20 19:10:05] server_args=ServerArgs(model_path='x', tp_size=2)",
    "[2025-01-20 19:10:07] Received sigquit from a child proces. It usually means the child failed.",
    "[2025-01-20 19:10:07 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sglang/srt/managers/scheduler.py", line 1652, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
    "KeyError: 'layers.0.self_attn.qkv_proj.weight'",
    "",
]


def test_rank_exception_after_sigquit_is_the_decisive_line() -> None:
    events = classify_lines(SIGQUIT_THEN_RANK)
    fatal = [e for e in events if e.verdict is Verdict.FATAL]
    assert [(e.line_no, e.notice) for e in fatal] == [(2, True), (6, False)]
    summary = summarize(events)
    assert summary.fatal_line == 6 and summary.fatal_rank == "TP0"
    assert summary.fatal_reason == "[TP0] KeyError: 'layers.0.self_attn.qkv_proj.weight'"
    assert summary.fatal_context[0].startswith("Scheduler hit an exception")


def test_traceback_ending_in_a_benign_exception_is_not_fatal() -> None:
    lines = [
        "Exception ignored in: <function Pool.__del__ at 0x7f3b2c1d8e50>",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.10/multiprocessing/pool.py", line 268, in __del__',
        "AttributeError: 'NoneType' object has no attribute 'util'",
    ]
    events = classify_lines(lines, engine="vllm")
    assert [e.verdict for e in events] == [Verdict.BENIGN, Verdict.BENIGN]
    benign_exc = classify_lines(
        [
            "Traceback (most recent call last):",
            '  File "x", line 1, in y',
            "ImportError: Failed to import from vllm._C with ImportError('libcuda.so.1')",
        ]
    )
    assert benign_exc[-1].verdict is Verdict.BENIGN


def test_unhandled_traceback_is_fatal_before_ready_and_a_warning_after() -> None:
    tb = ["Traceback (most recent call last):", '  File "x.py", line 1, in __call__', "ValueError: bad"]
    assert classify_lines(tb, engine="vllm")[-1].verdict is Verdict.FATAL
    after = classify_lines(["INFO:     Application startup complete.", *tb], engine="vllm")  # a request's
    assert after[-1].verdict is Verdict.WARNING
    assert summarize(after).state == "ready"


def test_vllm_prefixed_tracebacks_of_two_processes_interleave() -> None:
    lines = [
        "(EngineCore_DP0 pid=7) ERROR 08-03 21:49:23 [core.py:1231] Traceback (most recent call last):",
        "(APIServer pid=6) INFO 08-03 21:49:23 [api_server.py:1] still here",
        '(EngineCore_DP0 pid=7) ERROR 08-03 21:49:23 [core.py:1231]   File "core.py", line 1, in run',
        "(EngineCore_DP0 pid=7) ERROR 08-03 21:49:23 [core.py:1231] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]
    events = classify_lines(lines, engine="vllm")
    assert [(e.line_no, e.verdict, e.rule) for e in events] == [
        (2, Verdict.INFO, None),
        (4, Verdict.FATAL, "cuda_oom"),
    ]
    assert events[1].first_line_no == 1 and events[1].rank == "EngineCore_DP0 pid=7"
    assert "--mem-fraction-static" in (events[1].hint or "")


def test_failures_without_an_error_keyword() -> None:
    for line, rule in [
        ("Killed", "killed"),
        ("[2025-08-02 19:24:30 TP3] Watchdog timeout (self.watchdog_timeout=300)", "sglang_watchdog_timeout"),
        ("Segmentation fault (core dumped)", "segfault"),
        ("Engine core proc EngineCore_DP0 died unexpectedly, exit code -9", "vllm_engine_start_timeout"),
    ]:
        (event,) = classify_lines([line], engine="sglang" if "TP3" in line else "vllm")
        assert (event.verdict, event.rule) == (Verdict.FATAL, rule), line


# -- readiness semantics in the log -------------------------------------------


def test_uvicorn_up_is_not_ready_for_sglang_but_is_for_vllm() -> None:
    up = "INFO:     Application startup complete."
    sglang = classify_lines(
        ["[2026-01-01 00:00:00] server_args=ServerArgs(x=1)", f"[2026-01-01 00:00:01] {up}"]
    )
    assert sglang[-1].verdict is Verdict.PROGRESS and sglang[-1].phase is Phase.HTTP_UP
    assert summarize(sglang).state == "starting"
    vllm = classify_lines(["INFO 05-12 02:45:15 [api_server.py:1043] vLLM API server version 0.8.5", up])
    assert vllm[-1].verdict is Verdict.READY
    # uvicorn prints "Uvicorn running on" after the lifespan startup: the same readiness, the same SGLang exception
    running = "INFO:     Uvicorn running on http://0.0.0.0:40666 (Press CTRL+C to quit)"
    assert classify_lines([running])[0].verdict is Verdict.READY
    sglang = classify_lines(["[2026-01-01 00:00:00] server_args=ServerArgs(x=1)", f"[2026-01-01 00:00:01] {running}"])
    assert sglang[-1].verdict is Verdict.PROGRESS and sglang[-1].phase is Phase.HTTP_UP


def test_errors_after_ready() -> None:
    ready = "INFO:     Application startup complete."
    request_404 = 'INFO:     127.0.0.1:56148 - "POST /v1/x HTTP/1.1" 404 Not Found'
    in_use = "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use"
    dead = "(APIServer pid=1) ERROR 05-12 01:48:42 [core.py:1] EngineCore encountered a fatal error."
    assert summarize(classify_lines([ready, request_404], engine="vllm")).state == "ready"
    assert summarize(classify_lines([ready, in_use], engine="vllm")).fatal_line == 2
    assert summarize(classify_lines([ready, dead], engine="vllm")).state == "failed"


def test_phases_in_order_for_a_real_sglang_start() -> None:
    path = (
        Path(__file__).resolve().parents[1].parent
        / "shared"
        / "real-logs"
        / "031_sglang-hicache-debug-startup-fired-up.log"
    )
    if not path.exists():
        pytest.skip(f"{path} is missing")
    summary = summarize(classify_lines(path.read_bytes().decode("utf-8", "replace").split("\n")))
    assert [p for p, _ in summary.phases] == [
        "server_args",
        "weights_loading",
        "weights_loaded",
        "kv_cache_allocated",
        "cuda_graph_capture_begin",
        "cuda_graph_captured",
        "http_up",
        "warmup",
        "ready",
    ]


# -- engine detection and extension ---------------------------------------------


def test_detect_engine() -> None:
    assert detect_engine(["[2026-03-27 09:31:17] server_args=ServerArgs(model_path='x')"]) == "sglang"
    assert detect_engine(["(APIServer pid=1) INFO 08-01 23:19:54 [api_utils.py:339] x"]) == "vllm"
    # older SGLang prints a vLLM-formatted line first
    assert (
        detect_engine(
            [
                "INFO 05-14 13:49:25 [__init__.py:239] Automatically detected platform cuda.",
                "[2025-05-14 13:49:28] server_args=ServerArgs(model_path='x')",
            ]
        )
        == "sglang"
    )
    assert detect_engine(["hello"]) is None
    # SGLang with one rank prints no rank tag: its own start-up messages after its header decide (sglang#7547)
    assert detect_engine(["[2025-06-27 19:02:04] Load weight end. type=GPT2LMHeadModel, dtype=torch.float16"]) == "sglang"
    assert detect_engine(["[2025-06-27 19:02:04] Load weight end is near"]) is None


def test_streaming_detection_switches_from_a_tentative_vllm_guess() -> None:
    c = LogClassifier()
    c.feed("INFO 05-14 13:49:25 [__init__.py:239] Automatically detected platform cuda.")
    assert c.engine == "vllm"
    c.feed("[2025-05-14 13:49:28] Setting Triton cache manager to: sglang.srt.utils:CustomCacheManager")
    assert c.engine == "sglang"
    assert (
        c.feed("[2025-05-14 13:50:00] INFO:     Application startup complete.")[0].verdict is Verdict.PROGRESS
    )


def test_extra_rule_in_one_line_wins_without_mutating_the_packs() -> None:
    before = SGLANG.rules
    mine = LogClassifier(
        engine="sglang",
        extra_rules=[Rule("my_benign", r"flaky NIC \d+", Verdict.BENIGN, literal="flaky NIC")],
    )
    (event,) = mine.feed("[2026-01-01 00:00:00 TP1] ERROR flaky NIC 3 reset")
    assert (event.rule, event.verdict) == ("my_benign", Verdict.BENIGN)
    assert SGLANG.rules is before
    pack = add_rule(GENERIC, Rule.text("my_fatal", "GPU fell off the bus", Verdict.FATAL))
    assert pack.rules[0].name == "my_fatal" and GENERIC.rules[0].name != "my_fatal"
    (event,) = LogClassifier(packs=[pack]).feed("NVRM: GPU fell off the bus")
    assert event.verdict is Verdict.FATAL
    with pytest.raises(KeyError, match="no rule named"):
        GENERIC.without("no_such_rule")
    assert "killed" not in {r.name for r in GENERIC.without("killed").rules}


def test_streaming_equals_batch() -> None:
    lines = SIGQUIT_THEN_RANK + ["[2025-01-20 19:10:09] The server is fired up and ready to roll!"]
    c = LogClassifier()
    streamed = [e for line in lines for e in c.feed(line)] + c.finish()
    assert sorted(streamed, key=lambda e: e.line_no) == classify_lines(lines)


def test_unknown_engine_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="sglang"):
        LogClassifier(engine="tensorrt")


# -- CLI -------------------------------------------------------------------------


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(
        b"[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: x\r\n"
        b"[2026-02-26 20:26:07] The server is fired up and ready to roll!\n"
        b"\xff\xfe not utf-8\n"
        b"[2026-02-26 20:26:09] Decode batch. #running-req: 1, gen throughput (token/s): 3.5, #queue-req: 0\n"
    )
    assert cli_main(["classify", str(log), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["state"] == "ready" and out["ready_line"] == 2 and out["fatal_line"] is None
    assert out["ready_evidence"] == "ready line"
    assert out["benign_lines"] == [1]
    assert out["metrics"] == [
        {
            "line": 4,
            "kind": "sglang_decode",
            "values": {"running_req": 1, "gen_throughput": 3.5, "queue_req": 0},
        }
    ]


def test_cli_failed_exit_status_and_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "server.log"
    log.write_text("\n".join(SIGQUIT_THEN_RANK) + "\n")
    assert cli_main(["classify", str(log), "--engine", "sglang", "--color", "never"]) == 1
    text = capsys.readouterr().out
    assert "FAILED" in text and "fatal at line 6" in text and "KeyError" in text


def test_cli_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["classify", str(tmp_path / "missing.log")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert cli_main(["classify", "x", "--engine", "tgi"]) == 2


# -- attach mid-run, cut-off tracebacks, the decisive line (issue 12) --------------------------------------

def test_serving_lines_prove_readiness_when_the_log_was_joined_mid_run() -> None:
    tail = [
        '[2025-09-03 18:33:31] INFO:     192.168.30.81:35262 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        "[2025-09-03 18:33:31 TP0] Prefill batch. #new-seq: 1, #new-token: 18, #cached-token: 184, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, ",
    ]
    events = classify_lines(tail)
    summary = summarize(events)
    assert (summary.state, summary.ready_line, summary.ready_evidence) == ("ready", 1, "serving lines")
    assert events[0].phase is Phase.READY  # the `ready` phase, as a ready line marks it
    vllm = "(APIServer pid=1) INFO 05-12 08:01:39 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, " \
           "Avg generation throughput: 7.2 tokens/s, Running: 9 reqs, Waiting: 1 reqs, GPU KV cache usage: 68.8%"
    summary = summarize(classify_lines([vllm]))
    assert (summary.state, summary.ready_evidence, summary.metrics[0].values["running_reqs"]) == ("ready", "serving lines", 9)


def test_a_requests_own_error_proves_serving_and_stays_a_request_error() -> None:
    """Only a serving server reads requests: joined mid-run, a request rejected or failing in preprocessing is the
    serving evidence (MinerU#4868, orpheus-streaming#7), and its traceback never fails the server."""
    rejected = "(APIServer pid=1) ERROR 04-28 14:17:50 [serving_chat.py:257] ValueError: 'max_tokens' or " \
               "'max_completion_tokens' is too large: 8192. This model's maximum context length is 8192 tokens"
    summary = summarize(classify_lines([rejected]))
    assert (summary.state, summary.ready_line, summary.ready_evidence) == ("ready", 1, "serving lines")
    failing = [
        "(APIServer pid=9880) ERROR 02-21 11:34:27 [serving.py:120] Error in preprocessing prompt inputs",
        "(APIServer pid=9880) ERROR 02-21 11:34:27 [serving.py:120] Traceback (most recent call last):",
        '(APIServer pid=9880) ERROR 02-21 11:34:27 [serving.py:120]   File "/v/serving.py", line 114, in render',
    ]
    summary = summarize(classify_lines(failing))
    assert (summary.state, summary.ready_line, summary.fatal_line) == ("ready", 1, None)
    # the same error after a start-up phase is a request's error during warm-up, not proof
    started = ["(APIServer pid=1) INFO 02-21 11:30:00 [api_server.py:1] non-default args: {'model': 'x'}", *failing]
    assert summarize(classify_lines(started)).ready_line is None


def test_serving_lines_after_a_start_up_phase_are_the_warm_up_not_proof() -> None:
    log = [
        "[2026-01-21 19:49:14 DP0 TP0] Capture cuda graph end. Time elapsed: 595.60 s. mem usage=2.69 GB.",
        '[2026-01-21 19:49:16] INFO:     127.0.0.1:45016 - "POST /generate HTTP/1.1" 200 OK',
        "[2026-01-21 19:49:16 DP0 TP0] Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, ",
    ]
    summary = summarize(classify_lines(log))
    assert (summary.state, summary.ready_line) == ("starting", None)
    summary = summarize(classify_lines([*log, "[2026-01-21 19:49:20] The server is fired up and ready to roll!"]))
    assert (summary.ready_line, summary.ready_evidence) == (4, "ready line")


def test_an_engine_traceback_cut_during_start_up_is_fatal_on_its_header() -> None:
    cut = [
        "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='x')",
        "[2026-01-01 00:00:05 TP1] Traceback (most recent call last):",
        '[2026-01-01 00:00:05 TP1]   File "/sglang/srt/managers/scheduler.py", line 1, in run_scheduler_process',
    ]
    summary = summarize(classify_lines(cut))
    assert (summary.state, summary.fatal_line, summary.fatal_rule) == ("failed", 2, "engine_traceback_incomplete")
    # the main process raising from its <module>: nothing above catches it
    main = ["Traceback (most recent call last):", '  File "/opt/venv/bin/vllm", line 8, in <module>', "    sys.exit(main())"]
    assert summarize(classify_lines(main, engine="vllm")).fatal_line == 1
    # near misses: a bare traceback from no engine process stays a warning; after readiness a rank's cut traceback
    # too, while the rank writes on (issue 24: one that ends the log is the rank's death)
    other = ["Traceback (most recent call last):", '  File "/x/helper.py", line 3, in load', "    open(p)"]
    assert summarize(classify_lines(other, engine="vllm")).state == "starting"
    after = ["[2026-01-01 00:00:00] The server is fired up and ready to roll!", *cut[1:]]
    assert summarize(classify_lines(after)).fatal_rule == "traceback_ends_log"
    lives = [*after, "[2026-01-01 00:00:09 TP1] Decode batch. #running-req: 1, #token: 9, gen throughput (token/s): 1.0"]
    assert summarize(classify_lines(lives)).state == "ready"


def test_a_v0_engine_process_traceback_cut_is_fatal_on_the_message_logged_above_it() -> None:
    """vLLM V0's MQLLMEngine process logs `logger.exception(e)` (engine/multiprocessing/engine.py 0.7.3 :400): the
    exception's message, then its traceback through `run_mp_engine` under the same header (vllm#14954)."""
    v0 = [
        "INFO 03-17 06:04:32 custom_cache_manager.py:19] Setting Triton cache manager to: CustomCacheManager",
        "ERROR 03-17 06:04:32 engine.py:400] not enough values to unpack (expected 2, got 1)",
        "ERROR 03-17 06:04:32 engine.py:400] Traceback (most recent call last):",
        'ERROR 03-17 06:04:32 engine.py:400]   File "/x/vllm/engine/multiprocessing/engine.py", line 391, in run_mp_engine',
        "ERROR 03-17 06:04:32 engine.py:400]     engine = MQLLMEngine.from_engine_args(engine_args=engine_args,",
    ]
    events = classify_lines(v0)
    summary = summarize(events)
    assert (summary.state, summary.fatal_line, summary.fatal_rule) == ("failed", 2, "engine_traceback_incomplete")
    assert sum(1 + len(e.context) for e in events) == len(v0) and len({e.line_no for e in events}) == len(events)
    # the ERROR line waits one line for its traceback; followed by anything else it is its own warning, in order
    live = LogClassifier()
    assert live.feed(v0[1]) == []
    assert [(e.line_no, e.rule) for e in live.feed(v0[0])] == [(1, "error_level_unmatched"), (2, None)]
    assert live.feed(v0[1]) == [] and [e.line_no for e in live.finish()] == [3]
    # without a message line above, the header stands for it
    assert summarize(classify_lines([v0[0], *v0[2:]])).fatal_line == 2
    # near misses: a cut traceback through no engine entry stays a warning; after readiness an engine's too
    helper = [*v0[:3], 'ERROR 03-17 06:04:32 engine.py:400]   File "/x/helper.py", line 3, in load']
    assert summarize(classify_lines(helper)).state == "starting"
    after = ["INFO:     Application startup complete.", *v0[1:], "INFO 03-17 06:04:40 engine.py:1] still serving"]
    assert summarize(classify_lines(after, engine="vllm")).state == "ready"


def test_std_terminate_what_line_states_the_failure_though_indented() -> None:
    """libstdc++'s terminate handler indents its message ("  what():  ...", libsupc++/vterminate.cc); sglang#8296."""
    log = [
        "  what():  [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated with exception: "
        "CUDA error: an illegal memory access was encountered",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    ]
    assert summarize(classify_lines(log)).fatal_line == 1
    # near miss: an indented source line quoting the same words is still no statement
    quoted = ['    raise RuntimeError("CUDA error: an illegal memory access was encountered")']
    assert summarize(classify_lines(quoted)).state == "starting"


def test_the_decisive_line_among_many_failing_ranks_is_the_earliest_statement() -> None:
    log = [
        "(VllmWorker rank=6 pid=409) ERROR 07-23 19:34:51 [multiproc_executor.py:487]     raise RuntimeError(f\"NCCL error\")",
        "(VllmWorker rank=6 pid=409) ERROR 07-23 19:34:51 [multiproc_executor.py:487] RuntimeError: NCCL error: unhandled cuda error",
        "(VllmWorker rank=3 pid=406) ERROR 07-23 19:34:51 [multiproc_executor.py:487] WorkerProc failed to start.",
        "(VllmWorker rank=3 pid=406) ERROR 07-23 19:34:51 [multiproc_executor.py:487] Traceback (most recent call last):",
        "(VllmWorker rank=3 pid=406) ERROR 07-23 19:34:51 [multiproc_executor.py:487] RuntimeError: NCCL error: unhandled cuda error",
    ]
    summary = summarize(classify_lines(log))
    assert (summary.fatal_line, summary.fatal_rule) == (2, "nccl_error")


def test_an_engine_is_chosen_from_its_markers() -> None:
    assert detect_engine(["2024-03-06T17:53:31Z ERROR text_generation_launcher: Shard 0 failed to start"]) == "tgi"
    assert detect_engine(["I0120 08:28:13.508038 2049 server.cc:305] \"Waiting for in-flight requests\""]) == "trtllm"
    assert detect_engine(["2024-08-05 05:40:52,191 - lmdeploy - WARNING - model_source: hf_model"]) == "lmdeploy"
    assert detect_engine(["srv    load_model: loading model 'm.gguf'"]) == "llamacpp"
    assert detect_engine(["(ServeController pid=5) INFO 2025-04-21 15:16:45,616 controller 5 -- Deploying"]) == "ray"
    assert detect_engine(["[2025-05-21T18:59:44Z] ERROR 05-21 11:59:44 [core.py:493] EngineCore failed to start."]) == "vllm"
    # a Triton backend's own message names Triton before a TurboMind line (Triton with LMDeploy's backend, lmdeploy#979)
    finalize = "I0118 01:31:40.954385 1 libfastertransformer.cc:1862] TRITONBACKEND_ModelInstanceFinalize: delete instance state"
    assert detect_engine([finalize, "[TM][INFO] ~LlamaBatch()"]) == "trtllm"
    assert detect_engine(["[TM][INFO] ~LlamaBatch()", finalize]) == "lmdeploy"
    assert detect_engine(["I0118 01:31:40.954385 1 libfastertransformer.cc:1862] TRITONBACKEND is a word"]) is None
    assert detect_engine(["nothing to see"]) is None


def test_a_start_up_import_or_file_error_is_not_a_requests_not_found_error() -> None:
    # vLLM's request error type 'NotFoundError' (a model that does not exist) proves serving; Python's
    # ModuleNotFoundError and FileNotFoundError end a start-up
    head = "(APIServer pid=1) INFO 05-21 11:59:44 [api_server.py:1] vLLM API server version 0.9.0"
    for line, rule in (("ModuleNotFoundError: No module named 'vllm._C'", "python_import_error"),
                       ("FileNotFoundError: [Errno 2] No such file or directory: '/models/m/config.json'", "model_not_found")):
        summary = summarize(classify_lines([head, line]))
        assert (summary.state, summary.fatal_line, summary.fatal_rule) == ("failed", 2, rule)


# -- issue 24, batches 9 and 10 ------------------------------------------------

_RECEIVED = ("INFO 03-05 14:52:07 [logger.py:39] Received request chatcmpl-e589148985214a9e9c979bfca7c6ae87: "
             "prompt: '', params: SamplingParams(n=1)")


def test_a_named_request_proves_serving_only_before_start_up_and_failure() -> None:
    attached = classify_lines([_RECEIVED])
    assert [(e.verdict, e.rule, e.ready_evidence) for e in attached] == [(Verdict.READY, "request_named", "serving lines")]
    starting = classify_lines(["INFO 03-05 14:50:00 [loader.py:1] Loading weights took 3.1 seconds", _RECEIVED],
                              engine="vllm")
    assert summarize(starting).ready_line is None  # after a start-up phase: the warm-up, no proof
    dead = classify_lines(["ERROR 03-05 14:52:07 [async_llm.py:1] EngineDeadError: EngineCore encountered an issue.",
                           "ERROR 03-05 14:52:07 [serving.py:1] Failed on request chatcmpl-869f7757a6a736c7: dead"],
                          engine="vllm")
    assert summarize(dead).ready_line is None  # a request failing because the server died proves nothing


def test_an_error_line_naming_a_request_after_readiness_stays_a_warning() -> None:
    events = classify_lines(["INFO:     Application startup complete.",
                             "ERROR 11-19 10:12:21 [nixl_connector.py:1068] Potentially invalid KV blocks for "
                             "unrecognized request chatcmpl-129a69c8-cd1a-40e0 were retrieved by a decode worker."],
                            engine="vllm")
    assert events[-1].verdict is Verdict.WARNING


def test_an_indented_line_is_fatal_only_for_a_rule_that_asks_for_the_indent() -> None:
    described = classify_lines(["      State:       Waiting", "        Reason:    CrashLoopBackOff"])
    assert [e.rule for e in described if e.verdict is Verdict.FATAL] == ["kubernetes_container_failed"]
    quoted = classify_lines(['  File "/x/core.py", line 9, in run', "    raise RuntimeError(\"CUDA error: bad\")"])
    assert [e.line_no for e in quoted if e.verdict is Verdict.FATAL and e.rule == "cuda_error"] == []


@pytest.mark.parametrize("weights_fit", [False, True])
def test_a_too_small_memory_fraction_says_raise_it_never_lower_it(weights_fit: bool) -> None:
    """SGLang's KV-budget failure (as the simulator writes it) points the fraction up, as SGLang itself does."""
    tb = sglang_kv_budget_traceback(0.3, 77.4, 138.5, weights_fit)
    lines = ["[2026-12-02 03:10:57 TP0] Scheduler hit an exception: " + tb[0], *tb[1:]]
    events = [e for e in classify_lines(lines, engine="sglang") if e.verdict is Verdict.FATAL]
    assert [e.rule for e in events] == [
        "sglang_not_enough_memory" if weights_fit else "sglang_weights_leave_no_kv_memory"
    ]
    for hint in (events[0].hint, release_hint(events[0].hint, "sglang", "0.5.23")):
        assert "raise --mem-fraction-static" in (hint or "") and "lower --mem-fraction-static" not in (hint or "")
