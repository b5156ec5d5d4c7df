"""The pure cores of issue 15: Prometheus pages, nvidia-smi lines, torch traces, kernel tables, output equivalence.

Table-driven from the engines' own formats (each case names where the shape comes from);
every rule has a case that should match and a near miss.
"""

from __future__ import annotations

import gzip
import json
import math
from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkit.engines import profile_for
from toolkit.observe.cache import CacheRecord, cache_state
from toolkit.observe.equivalence import GreedyOutputs, compare_outputs
from toolkit.observe.gpu_samples import HostClock, dcgm_samples, nvidia_smi_command, parse_nvidia_smi_line
from toolkit.observe.kernels import compare_kernel_tables, kernel_table, phase_table, where_label
from toolkit.observe.prometheus import server_metric_values
from toolkit.observe.trace import KernelCall, kernel_calls, load_trace, short_kernel_name, stage_of_filename
from toolkit.prometheus_text import parse_prometheus
from toolkit.sim.outputs import DIVERGENCE_FAULT, add_logprobs, greedy_words
from toolkit.sim.telemetry import csv_lines
from toolkit.sim.trace import StepRecord, TraceShape, build_trace, dumps, trace_json_for_rank

# ---- Prometheus -----------------------------------------------------------------------------------------------

VLLM_PAGE = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 20.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 9.0
vllm:generation_tokens_total{engine="0",model_name="m"} 1234.0
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e9
"""


def test_vllm_page_maps_to_the_toolkit_names_summing_engines_and_averaging_usage() -> None:
    values = server_metric_values(parse_prometheus(VLLM_PAGE), profile_for("vllm", "0.33.0").metrics)
    assert values == {"running_requests": 5.0, "waiting_requests": 1.0, "kv_cache_usage": 0.5,
                      "spec_accepted_tokens_total": 9.0, "spec_draft_tokens_total": 20.0, "spec_drafts_total": 10.0,
                      "generation_tokens_total": 1234.0}


def test_an_old_vllm_names_kv_usage_differently_and_the_new_name_is_not_taken_for_it() -> None:
    page = 'vllm:gpu_cache_usage_perc{engine="0"} 0.4\nvllm:kv_cache_usage_perc{engine="0"} 0.9\n'
    assert server_metric_values(parse_prometheus(page), profile_for("vllm", "0.8.5").metrics) == {
        "kv_cache_usage": 0.4}
    assert server_metric_values(parse_prometheus(page), profile_for("vllm", "0.33.0").metrics) == {
        "kv_cache_usage": 0.9}


def test_sglang_page_with_labels_and_comments() -> None:
    page = ('# TYPE sglang:num_running_reqs gauge\n'
            'sglang:num_running_reqs{engine_type="unified",model_name="m",tp_rank="0"} 4.0\n'
            'sglang:num_queue_reqs{engine_type="unified",model_name="m",tp_rank="0"} 2.0\n'
            'sglang:token_usage{tp_rank="0"} 0.125\nsglang:spec_accept_length{tp_rank="0"} 1.9\n'
            'sglang:generation_tokens_total{tp_rank="0"} 77\n')
    values = server_metric_values(parse_prometheus(page), profile_for("sglang", "0.5.9").metrics)
    assert values == {"running_requests": 4.0, "waiting_requests": 2.0, "kv_cache_usage": 0.125,
                      "spec_accept_length": 1.9, "generation_tokens_total": 77.0}


@pytest.mark.parametrize(("line", "expected"), [
    ('a{b="c"} 1', [("a", {"b": "c"}, 1.0)]),
    ('a 2 1700000000000', [("a", {}, 2.0)]),  # an optional timestamp
    ('a{b="x,y",c="q\\"z"} NaN', [("a", {"b": "x,y", "c": 'q"z'}, math.nan)]),
    ('a{} +Inf', [("a", {}, math.inf)]),
    ("# HELP a something", []),
    ("a{b=\"c\"} not-a-number", []),  # near miss: a malformed value is skipped, not a crash
    ("", []),
])
def test_parse_prometheus_lines(line: str, expected: list[tuple[str, dict[str, str], float]]) -> None:
    got = [(s.name, dict(s.labels), s.value) for s in parse_prometheus(line)]
    assert len(got) == len(expected)
    for (name, labels, value), (want_name, want_labels, want_value) in zip(got, expected, strict=True):
        assert (name, labels) == (want_name, want_labels)
        assert value == want_value or (math.isnan(value) and math.isnan(want_value))


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=30))
def test_label_values_survive_the_exposition_escaping(value: str) -> None:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    [sample] = parse_prometheus(f'x{{k="{escaped}"}} 1')
    assert sample.labels["k"] == value


# ---- nvidia-smi and DCGM --------------------------------------------------------------------------------------


def test_nvidia_smi_lines_na_fields_and_a_name_with_commas() -> None:
    clock = HostClock(offset_s=-3600.0)  # a host one hour ahead of us
    s = parse_nvidia_smi_line("2026/12/01 11:00:00.250, 3, NVIDIA H200, 12, 3, 1024, 143771, 1980, [N/A], 40",
                              clock)
    assert s is not None and s.gpu == "GPU3" and s.power_w is None and s.util_pct == 12.0 and not s.simulated
    assert s.timestamp == pytest.approx(datetime(2026, 12, 1, 10, 0, 0, 250000).replace(
        tzinfo=__import__("datetime").UTC).timestamp())
    odd = parse_nvidia_smi_line("2026/12/01 11:00:00.250, 0, Odd, Name, GPU, 1, 2, 3, 4, 5, [Not Supported], 6",
                                clock)
    assert odd is not None and odd.name == "Odd, Name, GPU" and odd.power_w is None and odd.temperature_c == 6.0


@pytest.mark.parametrize("line", [
    "timestamp, index, name, utilization.gpu [%]",  # a header (csv without noheader)
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "garbage, x, y, 1, 2, 3, 4, 5, 6, 7",  # near miss: right field count, no stamp
])
def test_lines_that_are_not_samples_are_none(line: str) -> None:
    assert parse_nvidia_smi_line(line, HostClock(0.0)) is None


def test_host_clock_folds_zone_and_skew_into_one_offset() -> None:
    clock = HostClock.measure("2026/12/01 13:00:00.500000000", sent_at=1000.0, received_at=1001.0)
    assert clock.epoch("2026/12/01 13:00:00.500") == pytest.approx(1000.5)
    assert clock.epoch("2026/12/01 13:00:01.500") == pytest.approx(1001.5)


def test_nvidia_smi_command_quotes_nothing_it_does_not_need_and_rejects_a_zero_interval() -> None:
    assert nvidia_smi_command(200).endswith("--format=csv,noheader,nounits -lms 200")
    with pytest.raises(ValueError, match="interval_ms"):
        nvidia_smi_command(0)


def test_dcgm_exporter_page() -> None:
    page = ('DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",modelName="NVIDIA H200"} 55\n'
            'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="NVIDIA H200"} 80\n'
            'DCGM_FI_DEV_FB_USED{gpu="0"} 1000\nDCGM_FI_DEV_FB_FREE{gpu="0"} 3000\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 612.5\nDCGM_FI_DEV_SM_CLOCK{gpu="0"} 1980\n'
            'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0"} 0.9\n')
    samples = dcgm_samples(parse_prometheus(page), at=5.0)
    assert [s.gpu for s in samples] == ["GPU0", "GPU1"]
    assert (samples[0].util_pct, samples[0].mem_total_mib, samples[0].power_w) == (80.0, 4000.0, 612.5)
    assert samples[1].mem_total_mib is None and samples[1].source == "dcgm"


def test_simulated_telemetry_speaks_nvidia_smi_and_says_it_is_simulated() -> None:
    lines = csv_lines({"tp_size": 2, "mem_fraction_static": 0.85}, 90.0, 1_800_000_000.0)
    samples = [parse_nvidia_smi_line(line, HostClock(0.0)) for line in lines]
    assert all(s is not None and s.simulated for s in samples)
    row = samples[0].metric_row()  # type: ignore[union-attr]
    assert row.kind == "gpu" and row.rank == "GPU0" and row.values["simulated"] is True
    assert row.values["sm_clock_mhz"] == 1980 and row.values["gpu_util_pct"] == 90


# ---- traces ---------------------------------------------------------------------------------------------------


def _event(cat: str, name: str, ts: float, dur: float, **args: object) -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0 if cat == "kernel" else 7, "tid": 7, "ts": ts,
            "dur": dur, "args": args}


def test_graph_membership_by_correlation_and_by_graph_id_and_the_near_miss() -> None:
    trace = {"traceEvents": [
        _event("cuda_runtime", "cudaGraphLaunch", 0, 5, correlation=1),
        _event("kernel", "void a<1>()", 10, 10, correlation=1),  # the graph's launch: inside
        _event("cuda_runtime", "cudaLaunchKernel", 30, 5, correlation=2),
        _event("kernel", "void b()", 40, 10, correlation=2, **{"graph id": 0}),  # graph id 0: eager
        _event("kernel", "void c()", 60, 10, correlation=3, **{"graph id": 12}),  # newer Kineto: graph id set
    ]}
    assert [(k.short_name, k.in_graph) for k in kernel_calls(trace)] == [("a", True), ("b", False), ("c", True)]


def test_the_most_specific_frame_names_the_phase_and_a_touching_sibling_does_not() -> None:
    sg = "sglang/srt"
    trace = {"traceEvents": [
        _event("python_function", f"{sg}/speculative/eagle_worker.py(902): forward_draft_extend_after_decode",
               0, 100.0000001),  # ends a hair after the next frame starts, as Kineto's rounding leaves it
        _event("python_function", f"{sg}/speculative/eagle_worker.py(691): verify", 100, 100),
        _event("python_function", f"{sg}/model_executor/cuda_graph_runner.py(846): replay", 100, 100),
        _event("cuda_runtime", "cudaGraphLaunch", 100.001, 4, correlation=5),
        _event("kernel", "void attn()", 110, 50, correlation=5),
        _event("python_function", f"{sg}/model_executor/model_runner.py(2284): forward_decode", 300, 50),
        _event("cuda_runtime", "cudaLaunchKernel", 301, 4, correlation=6),
        _event("kernel", "void gemm()", 310, 20, correlation=6),
        _event("cuda_runtime", "cudaLaunchKernel", 400, 4, correlation=7),  # no frame around it
        _event("kernel", "void orphan()", 410, 5, correlation=7),
    ]}
    assert [(k.short_name, k.phase, k.in_graph) for k in kernel_calls(trace, default_phase="x")] == [
        ("attn", "verify", True), ("gemm", "decode", False), ("orphan", "x", False)]


def test_load_trace_accepts_gzip_and_the_bare_array_and_explains_a_cut_file() -> None:
    body = json.dumps([_event("kernel", "k", 0, 1, correlation=1)]).encode()
    assert len(load_trace(body)["traceEvents"]) == 1
    packed = gzip.compress(json.dumps({"traceEvents": []}).encode())
    assert load_trace(packed) == {"traceEvents": []}
    with pytest.raises(ValueError, match="truncated or corrupt gzip"):
        load_trace(packed[:-8])
    with pytest.raises(ValueError, match="not a Chrome trace"):
        load_trace(b'{"events": []}')


def test_load_trace_reads_an_unescaped_name_holding_backslashes_and_quotes() -> None:
    # a frame from a Windows-style path: Kineto writes its backslashes and quotes as they are
    raw = r'C:\x\y.py(1): "id"'
    body = '{\n  "traceEvents": [\n  {\n    "ph": "X",\n    "cat": "python_function",\n    "name": "' + raw + \
        '",\n    "ts": 1.0,\n    "dur": 1.0\n  }\n  ]\n}'
    assert [e["name"] for e in load_trace(body.encode())["traceEvents"]] == [raw]


def test_load_trace_reads_a_python_frame_name_kineto_left_unescaped() -> None:
    # as torch 2.13.0+cpu wrote it into a CPU server's trace: the frame's name holds quotes, unescaped
    body = ('{\n  "traceEvents": [\n  {\n    "ph": "X",\n    "cat": "python_function",\n'
            '    "name": "encodings/unicode_escape.py(0): "id"",\n    "pid": 1,\n    "tid": 1,\n'
            '    "ts": 5.0,\n    "dur": 1.0\n  },\n  {\n    "ph": "X",\n    "cat": "kernel",\n'
            '    "name": "void k<\\"x\\">()",\n    "ts": 6.0,\n    "dur": 1.0\n  }\n  ]\n}')
    with pytest.raises(ValueError):
        json.loads(body)
    events = load_trace(gzip.compress(body.encode()))["traceEvents"]
    assert [e["name"] for e in events] == ['encodings/unicode_escape.py(0): "id"', 'void k<"x">()']
    with pytest.raises(ValueError, match="not JSON"):  # a cut file is still refused, repaired names or not
        load_trace(body[:-20].encode())


@pytest.mark.parametrize(("name", "phase"), [
    ("1733.5-TP-0-EXTEND.trace.json.gz", "prefill"), ("p-1.2-TP-3-DECODE.trace.json.gz", "decode"),
    ("1733.5-TP-0.trace.json.gz", ""), ("DECODE-notes.json", ""),
])
def test_stage_suffix_of_sglang_profile_by_stage(name: str, phase: str) -> None:
    assert stage_of_filename(name) == phase


@pytest.mark.parametrize(("raw", "short"), [
    ("void flashinfer::BatchDecodeKernel<8u, (flashinfer::Mode)0>(flashinfer::Params<half>)",
     "flashinfer::BatchDecodeKernel"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
     "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"),
    ("fused_moe_kernel", "fused_moe_kernel"),
])
def test_short_kernel_names(raw: str, short: str) -> None:
    assert short_kernel_name(raw) == short


def test_kernel_table_shares_and_where_and_the_comparison_says_what_moved() -> None:
    a = [KernelCall("attn", 0, 30, False, "verify"), KernelCall("attn", 50, 30, False, "verify"),
         KernelCall("gemm", 90, 40, True, "decode")]
    b = [KernelCall("attn", 0, 20, True, "verify"), KernelCall("attn", 50, 20, True, "verify"),
         KernelCall("gemm", 90, 40, True, "decode"), KernelCall("new", 140, 5, True, "draft")]
    table = kernel_table(a)
    assert table.iloc[0][["phase", "kernel", "calls", "where"]].tolist() == ["verify", "attn", 2, "eager"]
    assert table["share_pct"].sum() == pytest.approx(100.0)
    phases = phase_table(a)
    assert phases.set_index("phase")["where"].to_dict() == {"verify": "eager", "decode": "CUDA graph"}
    moved = compare_kernel_tables(kernel_table(a), kernel_table(b), label_a="prefill", label_b="decode")
    by = moved.set_index(["phase", "kernel"])["moved"].to_dict()
    assert by == {("verify", "attn"): "into CUDA graph", ("decode", "gemm"): "same", ("draft", "new"): "only in decode"}
    assert moved.iloc[0]["kernel"] == "attn" and moved.iloc[0]["delta_ms"] == pytest.approx(-0.02)
    assert (where_label(100.0), where_label(0.0), where_label(50.0)) == ("CUDA graph", "eager", "mixed")


def _sim_trace(verify_in_extend: bool) -> dict[str, object]:
    shape = TraceShape("sglang", 4, True, 2, verify_in_extend, 2.4, 2)
    steps = [StepRecord("prefill", 10.0, 10.03, 1)] + [
        StepRecord("decode", 10.03 + 0.03 * i, 10.06 + 0.03 * i, 1) for i in range(4)]
    return build_trace(shape, steps, t0=10.0, pid=42, rank=0, note="simulated")


def test_the_simulator_trace_shows_verify_eager_in_prefill_mode_and_graphed_in_decode_mode() -> None:
    prefill = phase_table(kernel_calls(_sim_trace(True))).set_index("phase")["where"].to_dict()
    decode = phase_table(kernel_calls(_sim_trace(False))).set_index("phase")["where"].to_dict()
    assert prefill == {"verify": "eager", "draft": "CUDA graph", "prefill": "eager", "draft_extend": "eager"}
    assert decode == {"verify": "CUDA graph", "draft": "CUDA graph", "prefill": "eager",
                      "draft_extend": "CUDA graph"}
    attention = {k.short_name for k in kernel_calls(_sim_trace(True)) if k.phase == "verify"}
    assert "flashinfer::BatchPrefillWithPagedKVCacheKernel" in attention


def test_other_ranks_of_a_simulated_trace_differ_only_in_pid_and_rank() -> None:
    text = dumps(_sim_trace(True))
    other = json.loads(trace_json_for_rank(text, 3, 42, 99))
    assert other["distributedInfo"]["rank"] == 3 and other["toolkit_sim"]["simulated"] is True
    pids = {e["pid"] for e in other["traceEvents"] if e.get("cat") == "python_function"}
    assert pids == {99}
    assert len(kernel_calls(other)) == len(kernel_calls(json.loads(text)))


# ---- outputs and cache ----------------------------------------------------------------------------------------


def test_equivalence_counts_identical_prompts_and_finds_the_first_divergence() -> None:
    ref = GreedyOutputs("base", ("p0", "p1", "p2"), ((" a", " b"), (" c", " d", " e"), (" f",)), "token", 3)
    cand = GreedyOutputs("eagle", ("p0", "p1", "p2"), ((" a", " b"), (" c", " x", " e"), ()), "token", 3,
                         ("", "", "HTTP 500: boom"))
    result = compare_outputs(ref, cand)
    assert (result.identical, result.total, result.holds) == (1, 3, False)
    assert result.first_divergence is not None and (result.first_divergence.index,
                                                     result.first_divergence.first_divergence) == (1, 1)
    assert result.comparisons[2].error == "HTTP 500: boom" and result.comparisons[2].first_divergence is None
    row = result.metric_row()
    assert row.kind == "equivalence" and row.values["first_divergence"] == 1 and row.values["holds"] is False


def test_equivalence_falls_back_to_characters_when_one_side_gave_no_tokens() -> None:
    ref = GreedyOutputs("a", ("p",), ((" ab", " c"),), "token", 2)
    cand = GreedyOutputs("b", ("p",), (tuple(" ab c"),), "character", 2)
    assert compare_outputs(ref, cand).holds and compare_outputs(ref, cand).unit == "character"
    shorter = GreedyOutputs("b", ("p",), (tuple(" ab"),), "character", 2)
    assert compare_outputs(ref, shorter).comparisons[0].first_divergence == 3
    with pytest.raises(ValueError, match="different prompts"):
        compare_outputs(ref, GreedyOutputs("c", ("q",), ((),), "token", 2))


def test_cache_rows_read_back_as_states() -> None:
    for record, state in ((CacheRecord("flush", "flushed", ""), "flushed"), (CacheRecord("keep", "warm", ""), "warm"),
                          (CacheRecord("flush", "unknown", "404"), "unknown")):
        values = dict(record.metric_row().values)
        assert cache_state(values) == state
        assert cache_state({k: int(v) for k, v in values.items()}) == state  # as SQLite may give booleans back


def test_simulated_greedy_outputs_depend_on_the_prompt_only_unless_the_fault_asks() -> None:
    body = {"prompt": "hello there", "max_tokens": 8}
    first = greedy_words(body, False, 0.0, 0, "none")
    again = greedy_words(dict(body), False, 0.0, 0, "none")
    assert first is not None and again is not None and first.take(12) == again.take(12)
    assert greedy_words(body, False, 0.7, 0, "none") is None  # sampled requests keep the engine's source
    other = greedy_words({"prompt": "something else"}, False, 0.0, 0, "none")
    assert other is not None and other.take(12) != greedy_words(body, False, 0.0, 0, "none").take(12)  # type: ignore[union-attr]
    prompts = [{"prompt": f"prompt {i}"} for i in range(40)]
    diverged = sum(greedy_words(p, False, 0.0, 0, DIVERGENCE_FAULT).take(20)  # type: ignore[union-attr]
                   != greedy_words(p, False, 0.0, 0, "none").take(20) for p in prompts)  # type: ignore[union-attr]
    assert 8 <= diverged <= 32  # about half, chosen by the prompt's hash


def test_logprobs_blocks_in_both_openai_shapes() -> None:
    completion: dict[str, object] = {"choices": [{"text": " a b"}]}
    add_logprobs(completion, {"logprobs": 1}, False, [" a", " b"])
    assert completion["choices"][0]["logprobs"]["tokens"] == [" a", " b"]  # type: ignore[index]
    chat: dict[str, object] = {"choices": [{"message": {"content": " a"}}]}
    add_logprobs(chat, {"logprobs": True}, True, [" a"])
    assert chat["choices"][0]["logprobs"]["content"][0]["token"] == " a"  # type: ignore[index]
    untouched: dict[str, object] = {"choices": [{"text": "x"}]}
    add_logprobs(untouched, {}, False, ["x"])
    assert "logprobs" not in untouched["choices"][0]  # type: ignore[index]
