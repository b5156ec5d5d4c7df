"""The peers' own clients and tk.bench against the same simulated server: each mapped pair of figures agrees.

SGLang's ``bench_serving`` (0.5.23, backends ``sglang`` and ``sglang-oai``) and ``vllm bench serve``
(0.33.0) run from the environments ``../shared/peers/setup_all.sh`` builds (``$PEERS_ROOT``, default
``<tmp>/peers``); the scripts run from ``../shared/peers``, never copied here. Under speculative
decoding (EAGLE-3 on the simulator) SGLang's native "Median ITL" is ``median_itl_per_token_ms`` and
vLLM's is ``median_itl_ms`` (``toolkit/engines/bench_names.py``). The comparison itself is
``benchmarks/peer_names.py``, which prints the table. Setting the peers up takes minutes and a few GB
(measured in docs/metrics.md), so this test is ``slow`` and ``peers``: ``pytest -m peers``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.peers, pytest.mark.timeout(1200)]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("peer_names", REPO / "benchmarks" / "peer_names.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["peer_names"] = module  # its dataclasses look their module up while they are made
    spec.loader.exec_module(module)
    return module


def test_each_mapped_pair_agrees_with_the_peers_own_clients() -> None:
    script = _script()
    root = script.peers_root()
    missing = script.missing_environments(root)
    if missing:
        pytest.skip("the peers' environments are missing (build them with ../shared/peers/setup_all.sh, "
                    f"PEERS_ROOT={root}): {', '.join(missing)}")
    pairs = script.compare(root)
    keys = {(p.tool, p.backend, p.peer_key) for p in pairs}
    for expected in [("sglang.bench_serving", "sglang", "median_itl_ms"), ("vllm bench serve", "vllm", "median_itl_ms"),
                     ("sglang.bench_serving", "sglang", "accept_length"),
                     ("vllm bench serve", "vllm", "spec_decode_acceptance_length")]:
        assert expected in keys, f"{expected} was not compared: {sorted(keys)}"
    native_itl = next(p for p in pairs if p.backend == "sglang" and p.peer_key == "median_itl_ms")
    assert native_itl.toolkit_key == "median_itl_per_token_ms"  # SGLang's native ITL is per token
    mean_itl = next(p for p in pairs if p.backend == "sglang" and p.peer_key == "mean_itl_ms")
    assert mean_itl.toolkit_key == "mean_itl_per_token_ms" and mean_itl.relative_gap <= 0.15
    wrong = [f"{p.tool} {p.backend} {p.peer_key}={p.peer:.3f} vs {p.toolkit_key}={p.ours:.3f}"
             for p in pairs if not script.retokenized(p) and not p.agrees(0.15)]
    assert not wrong, "pairs that disagree (15%; TTFT within a decode step; see Pair.agrees):\n" + "\n".join(wrong)
