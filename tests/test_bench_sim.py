"""The client against the simulator (`python -m toolkit.sim`) running EAGLE-3: several tokens per chunk."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolkit.benchmark.runner import bench
from toolkit.sim import testing  # noqa: E402

pytestmark = pytest.mark.timeout(60)
READY = testing.READY_LINE
EAGLE = list(testing.EAGLE3_ARGS)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with testing.SimProcess(["--model-path", "m", "--tp", "1", "--sim-startup-s", "0.2", *EAGLE]) as sim:
        sim.wait_for(READY)
        yield f"http://127.0.0.1:{sim.port}"


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_speculative_chunks_and_the_servers_accept_length(sim_url: str, endpoint: str) -> None:
    r = bench(
        sim_url,
        endpoint=endpoint,
        num_prompts=4,
        max_concurrency=2,
        input_len=8,
        output_len=30,
        progress=False,
    )
    s = r.summary
    assert (s["completed"], s["failed"], s["total_output_tokens"]) == (4, 0, 120)
    assert s["output_tokens_source"] == "usage" and r.settings.model == "m"  # from /v1/models
    assert s["mean_tokens_per_chunk"] > 1.0  # one chunk per verify step
    assert s["mean_itl_per_token_ms"] < s["mean_itl_ms"]
    assert r.server_view.accept_length_source == "sglang_server_info" and r.server_view.cumulative
    assert s["accept_length"] is not None and s["accept_length"] > 1.0
