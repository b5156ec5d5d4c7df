"""The torch trace file names each engine release writes (toolkit/engines/traces.py, issue 23)."""

from __future__ import annotations

import doctest

import pytest

from toolkit.engines import traces
from toolkit.engines.traces import TRACE_NAMES, is_frontend_trace, trace_file_name, trace_rank


def test_docstring_examples_run() -> None:
    assert doctest.testmod(traces).failed == 0


@pytest.mark.parametrize("known", TRACE_NAMES, ids=lambda n: f"{n.engine}-{n.kind}-{n.releases}")
def test_every_name_cites_its_release_and_the_simulator_writes_what_it_matches(known: traces.TraceName) -> None:
    assert known.source.startswith(known.engine) and (".py:" in known.source or "UNVERIFIED" in known.source)
    written = known.template.format(rank=3, host="vm", pid=4242, ns=1796178325015002506, ms=1796178325015, prefix="")
    assert known.match(written) is not None


@pytest.mark.parametrize(("version", "name", "rank"), [
    ("0.25.0", "rank0.1796178325015002506.pt.trace.json.gz", 0),  # what real 0.25.0 wrote on the H200
    ("0.25.0", "vm_16217.async_llm.1796178325015002506.pt.trace.json.gz", None),  # its front end: no rank
    ("0.33.0", "dp0_pp0_tp1_dcp0_ep0_rank1.1796178325015.pt.trace.json.gz", 1),
    ("0.10.2", "dp0_pp0_tp2_rank2.1796178325015.pt.trace.json.gz", 2),
    (None, "rank1.1796178325015002506.pt.trace.json", 1),  # release unknown: every name of the engine
    ("0.25.0", "profiler_out_0.txt", None),
])
def test_vllm_trace_names_by_release(version: str | None, name: str, rank: int | None) -> None:
    assert trace_rank("vllm", version, name) == rank


def test_the_simulator_names_a_vllm_0_25_trace_as_that_release_does() -> None:
    assert trace_file_name("vllm", "0.25.0", 1, host="vm", pid=7, ns=123) == "rank1.123.pt.trace.json.gz"
    front = trace_file_name("vllm", "0.25.0", 0, host="vm", pid=7, ns=123, kind="frontend")
    assert front == "vm_7.async_llm.123.pt.trace.json.gz" and is_frontend_trace("vllm", "0.25.0", front)
    assert trace_rank("sglang", "0.5.23", "prefill-1764640000.1-TP-2.trace.json.gz") == 2


@pytest.mark.parametrize(("name", "rank"), [
    # sglang 0.5.17 profiler_manager.py:320-337: [prefix-]profile_id-TP-r[-DP-d][-PP-p][-EP-e][-STAGE].trace.json.gz
    ("1764640000.8720653-TP-0.trace.json.gz", 0),
    ("decode-1764640000.8720653-TP-3.trace.json.gz", 3),
    ("1764640000.8720653-TP-1-DP-1-EP-1.trace.json.gz", 1),
    ("1764640000.8720653-TP-0-EXTEND.trace.json.gz", 0),
    ("1764640000.8720653-TP-0-memory.pickle", None),  # the MEM activity's snapshot (:359-366): not a trace
    ("rank0.1764640000123456789.pt.trace.json.gz", None),  # vLLM's name
])
def test_sglang_0_5_17_trace_names(name: str, rank: int | None) -> None:
    assert trace_rank("sglang", "0.5.17", name) == rank
