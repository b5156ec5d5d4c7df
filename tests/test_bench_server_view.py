"""The server's view: Prometheus parsing, vLLM spec-decode deltas, SGLang server info, log rows."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp

from toolkit.benchmark.metrics import RequestRecord
from toolkit.benchmark.server_view import (
    ServerSnapshot,
    build_server_view,
    sglang_accept_length,
    vllm_spec_counters,
    vllm_spec_delta,
)
from toolkit.benchmark.side_reads import fetch_snapshot
from toolkit.prometheus_text import parse_prometheus

METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} {drafts}
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} {tokens}
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} {accepted} 1712345678000
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} {p0}
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} {p1}
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} {p2}
vllm:spec_decode_num_drafts_created 1.7e9
vllm:num_requests_running{model_name="a \\"quoted\\" \\\\ name"} 3
"""


def metrics_text(drafts: int, tokens: int, accepted: int, p0: int, p1: int, p2: int) -> str:
    return (
        METRICS.replace("{drafts}", str(drafts))
        .replace("{tokens}", str(tokens))
        .replace("{accepted}", str(accepted))
        .replace("{p0}", str(p0))
        .replace("{p1}", str(p1))
        .replace("{p2}", str(p2))
    )


def test_prometheus_text_with_labels_escapes_and_timestamps():
    samples = parse_prometheus(metrics_text(1, 2, 3, 4, 5, 6))
    by_name = {(s.name, s.labels.get("position")): s for s in samples}
    assert by_name[("vllm:spec_decode_num_accepted_tokens_total", None)].value == 3.0
    assert by_name[("vllm:spec_decode_num_accepted_tokens_per_pos_total", "2")].value == 6.0
    running = by_name[("vllm:num_requests_running", None)]
    assert running.labels["model_name"] == 'a "quoted" \\ name' and running.value == 3.0
    assert parse_prometheus("garbage line\n# only a comment\nname_without_value\n") == []


def test_vllm_acceptance_length_is_one_plus_accepted_over_drafts():
    before = vllm_spec_counters(parse_prometheus(metrics_text(10, 30, 15, 8, 5, 2)))
    after = vllm_spec_counters(parse_prometheus(metrics_text(110, 330, 215, 88, 75, 52)))
    assert before is not None and after is not None
    delta = vllm_spec_delta(before, after)
    assert delta is not None
    assert delta["acceptance_length"] == 1 + 200 / 100
    assert delta["acceptance_rate"] == 200 / 300 * 100
    assert delta["per_position_acceptance_rates"] == [0.8, 0.7, 0.5]
    assert vllm_spec_delta(after, after) is None  # nothing drafted during the run
    assert vllm_spec_counters(parse_prometheus("vllm:num_requests_running 1\n")) is None


def test_sglang_server_info_shapes():
    assert sglang_accept_length({"internal_states": [{"avg_spec_accept_length": 2.75}]}) == 2.75
    assert sglang_accept_length({"decode": [{"internal_states": [{"avg_spec_accept_length": 3.0}]}]}) == 3.0
    assert sglang_accept_length({"avg_spec_accept_length": 1.5}) == 1.5
    assert sglang_accept_length({"internal_states": [{}]}) is None
    assert sglang_accept_length("not json") is None


@dataclass(frozen=True)
class Row:
    timestamp: datetime | None
    kind: str
    values: dict[str, Any]


class LogFollower:
    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows
        self.asked: tuple[datetime, datetime] | None = None

    def metric_rows(self, since: datetime, until: datetime) -> list[Row]:
        self.asked = (since, until)
        return self.rows


def test_precedence_and_log_window():
    t0 = datetime(2026, 2, 26, 20, 0, 0)
    rows = [
        Row(t0 - timedelta(seconds=5), "decode", {"accept_len": 9.0}),  # before the run
        Row(t0 + timedelta(seconds=1), "decode", {"accept_len": 2.0, "gen_throughput": 80.0}),
        Row(t0 + timedelta(seconds=2), "decode", {"accept_len": 3.0, "gen_throughput": 90.0, "cuda": True}),
        Row(None, "decode", {"accept_len": 7.0}),
    ]
    follower = LogFollower(rows)
    view = build_server_view(
        ServerSnapshot(), ServerSnapshot(), log_source=follower.metric_rows, since=t0, until=t0 + timedelta(seconds=10)
    )
    assert follower.asked == (t0, t0 + timedelta(seconds=10))
    assert view.log_rows == 2 and view.log_metrics == {"decode": {"accept_len": 2.5, "gen_throughput": 85.0}}
    assert (view.accept_length, view.accept_length_source) == (2.5, "server_log")
    # the server's running average outranks the log, and is flagged cumulative
    view = build_server_view(
        ServerSnapshot(sglang_accept_length=2.0),
        ServerSnapshot(sglang_accept_length=2.2),
        log_source=lambda a, b: rows,
        since=t0,
        until=t0 + timedelta(seconds=10),
    )
    assert (view.accept_length, view.accept_length_source, view.cumulative) == (
        2.2,
        "sglang_server_info",
        True,
    )
    # per-request figures from the responses outrank everything: sum(tokens) / sum(verify steps)
    recs = [
        RequestRecord(0.0, (0.1, 0.2), 0.2, 1, 10, "usage", spec_accept_length=2.5, spec_verify_ct=4),
        RequestRecord(0.0, (0.1, 0.2), 0.2, 1, 6, "usage", spec_accept_length=3.0, spec_verify_ct=2),
    ]
    view = build_server_view(
        ServerSnapshot(sglang_accept_length=2.0), ServerSnapshot(sglang_accept_length=2.2), recs
    )
    assert (view.accept_length, view.accept_length_source, view.cumulative) == (16 / 6, "responses", False)


def test_aware_timestamps_and_a_broken_log_hook_never_crash():
    t0 = datetime(2026, 2, 26, 20, 0, 0)
    aware = [Row((t0 + timedelta(seconds=1)).astimezone(UTC), "spec", {"accept_length": 2.0})]
    view = build_server_view(
        ServerSnapshot(),
        ServerSnapshot(),
        log_source=lambda a, b: aware,
        since=t0,
        until=t0 + timedelta(seconds=5),
    )
    assert view.accept_length == 2.0

    def broken(since: datetime, until: datetime) -> list[Row]:
        raise RuntimeError("log file rotated")

    view = build_server_view(
        ServerSnapshot(errors=("x: down",)),
        ServerSnapshot(errors=("x: down",)),
        log_source=broken,
        since=t0,
        until=t0,
    )
    assert view.accept_length is None
    assert view.unavailable == ("x: down", "server log metrics: RuntimeError: log file rotated")
    assert view.to_dict()["unavailable"][1].startswith("server log metrics")


def test_unreachable_server_gives_an_unavailable_view():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there

    async def go() -> ServerSnapshot:
        async with aiohttp.ClientSession() as session:
            return await fetch_snapshot(session, f"http://127.0.0.1:{port}", timeout_s=2.0)

    snap = asyncio.run(go())
    assert snap.vllm_spec is None and snap.sglang_accept_length is None and not snap.metrics_reachable
    assert len(snap.errors) == 2 and all(f"127.0.0.1:{port}" in e for e in snap.errors)
