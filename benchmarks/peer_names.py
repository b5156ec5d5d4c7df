"""Do the peers' figures equal the toolkit's under the names toolkit.engines.bench_names maps them to?

Runs SGLang's own ``bench_serving`` (``python -m sglang.benchmark.serving``, 0.5.23, backends
``sglang`` and ``sglang-oai``) and vLLM's own ``vllm bench serve`` (0.33.0) against simulated
servers (EAGLE-3 speculative decoding: several tokens per chunk), runs ``tk.bench`` against the
same server right after, and prints each mapped pair (peer JSON key -> toolkit key) with both
values. The peers' environments are those ``../shared/peers/setup_all.sh`` builds (venv-sgl,
venv-vllm, the extracted SGLang client in sgl/, the tokenizer in tok/) under ``$PEERS_ROOT``
(the scripts' default: ``<tmp>/peers``); the scripts themselves run from ``../shared/peers``.

    python benchmarks/peer_names.py                  # prints the table, exits 1 when a pair disagrees
    PEERS_ROOT=/path/to/peers python benchmarks/peer_names.py --prompts 8 --output-len 128
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sim_process import SimProcess  # noqa: E402

from toolkit.benchmark import Load, bench  # noqa: E402
from toolkit.engines import peer_names  # noqa: E402

PEERS_SCRIPTS = REPO.parent / "shared" / "peers"
EAGLE = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
         "--speculative-num-draft-tokens", "3"]
VLLM_EAGLE = '{"method": "eagle3", "model": "d", "num_speculative_tokens": 2}'
READY = "The server is fired up and ready to roll!"


def peers_root() -> Path:
    return Path(os.environ.get("PEERS_ROOT") or Path(tempfile.gettempdir()) / "peers")


def missing_environments(root: Path) -> list[str]:
    """What of the peers' set-up is absent (empty: both clients can run)."""
    needed = [root / "venv-sgl" / "bin" / "python", root / "sgl" / "sglang" / "benchmark" / "serving.py",
              root / "venv-vllm" / "bin" / "python", root / "tok", PEERS_SCRIPTS / "vllm_bench_serve.py"]
    return [str(p) for p in needed if not p.exists()]


@dataclass(frozen=True)
class Pair:
    tool: str
    backend: str
    peer_key: str
    toolkit_key: str
    peer: float
    ours: float
    definition: str

    @property
    def relative_gap(self) -> float:
        return abs(self.peer - self.ours) / max(abs(self.ours), 1e-9)

    def agrees(self, tolerance: float) -> bool:
        """Within ``tolerance`` (relative), with two allowances the definitions explain:

        - TTFT: a request waits for the engine's step in flight (up to one decode step, ~31 ms with
          EAGLE-3 here) and, on a busy 2-core machine, for the CPU: two clients' medians over a few
          requests, taken one after the other, differ by tens of ms (allowed: 80 ms; measured: 44 vs 49 ms idle,
          95 vs 43 ms beside a test run);
        - the median per-token ITL: when the server does not say how many tokens each chunk carried,
          ``tk.bench`` spreads a gap over the request's mean tokens per chunk (docs/metrics.md), so its
          median is an estimate; the mean is exact (total gap time over tokens) and held to ``tolerance``.
        """
        if "ttft" in self.toolkit_key:
            return abs(self.peer - self.ours) <= max(80.0, tolerance * self.ours)
        if self.toolkit_key == "median_itl_per_token_ms":
            return self.relative_gap <= max(0.35, tolerance)
        return self.relative_gap <= tolerance


def _run(argv: list[str], cwd: Path | None, timeout_s: float) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... exited {done.returncode}:\n{done.stderr[-3000:]}")


def sglang_client(root: Path, port: int, backend: str, prompts: int, output_len: int, out: Path) -> dict[str, float]:
    result = out / f"sglang-{backend}.jsonl"
    _run([str(root / "venv-sgl" / "bin" / "python"), "-m", "sglang.benchmark.serving", "--backend", backend,
          "--host", "127.0.0.1", "--port", str(port), "--model", "m", "--tokenizer", str(root / "tok"),
          "--dataset-name", "random-ids", "--random-input-len", "16", "--random-output-len", str(output_len),
          "--random-range-ratio", "1.0", "--num-prompts", str(prompts), "--max-concurrency", "1",
          "--disable-tqdm", "--output-file", str(result)], root / "sgl", 600)
    return json.loads(result.read_text().splitlines()[-1])


def vllm_client(root: Path, port: int, prompts: int, output_len: int, out: Path) -> dict[str, float]:
    _run([str(root / "venv-vllm" / "bin" / "python"), str(PEERS_SCRIPTS / "vllm_bench_serve.py"), "--backend",
          "vllm", "--endpoint", "/v1/completions", "--host", "127.0.0.1", "--port", str(port), "--model", "m",
          "--tokenizer", str(root / "tok"), "--dataset-name", "random", "--random-input-len", "16",
          "--random-output-len", str(output_len), "--ignore-eos", "--num-prompts", str(prompts),
          "--max-concurrency", "1", "--disable-tqdm", "--percentile-metrics", "ttft,tpot,itl,e2el",
          "--save-result", "--result-dir", str(out), "--result-filename", "vllm.json"], None, 900)
    return json.loads((out / "vllm.json").read_text())


def _pairs(tool: str, backend: str, peer: dict[str, float], ours: dict[str, object]) -> list[Pair]:
    out = []
    for name in peer_names(tool, backend, speculative=True):  # type: ignore[arg-type]
        value, mine = peer.get(name.json_key), ours.get(name.toolkit_key)
        if isinstance(value, int | float) and isinstance(mine, int | float):
            out.append(Pair(tool, backend, name.json_key, name.toolkit_key, float(value), float(mine),
                            name.definition))
    return out


def compare(root: Path, prompts: int = 8, output_len: int = 64) -> list[Pair]:
    """Every mapped pair of both peers, each against tk.bench on the same simulated server."""
    work = Path(tempfile.mkdtemp(prefix="peer-names-"))
    load = Load(num_prompts=prompts, max_concurrency=1, input_len=16, output_len=output_len)
    pairs: list[Pair] = []
    with SimProcess(["--model-path", "m", "--tp-size", "1", "--sim-startup-s", "0.5", *EAGLE]) as sim:
        sim.wait_for(READY, timeout_s=120)
        for backend in ("sglang", "sglang-oai"):
            peer = sglang_client(root, sim.port, backend, prompts, output_len, work)
            ours = dict(bench(f"http://127.0.0.1:{sim.port}", load, progress=False, tokenizer=None).summary)
            pairs += _pairs("sglang.bench_serving", backend, peer, ours)
    with SimProcess(["--engine", "vllm", "m", "--sim-startup-s", "0.5", "--speculative-config", VLLM_EAGLE]) as sim:
        sim.wait_for("Application startup complete.", timeout_s=120)
        peer = vllm_client(root, sim.port, prompts, output_len, work)
        ours = dict(bench(f"http://127.0.0.1:{sim.port}", load, progress=False, tokenizer=None).summary)
        pairs += _pairs("vllm bench serve", "vllm", peer, ours)
    return pairs


def retokenized(pair: Pair) -> bool:
    """SGLang's OpenAI backends re-tokenize chunk text with the client's tokenizer: equal only when that
    tokenizer counts the server's tokens, which a simulator's words and the peers' BPE do not."""
    return "retokenized" in pair.definition


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--tolerance", type=float, default=0.15, help="relative gap allowed per pair (default 0.15)")
    ns = parser.parse_args(argv)
    root = peers_root()
    if missing := missing_environments(root):
        print("the peers' environments are missing (run ../shared/peers/setup_all.sh): " + ", ".join(missing))
        return 2
    pairs = compare(root, ns.prompts, ns.output_len)
    bad = 0
    print(f"{'tool':<22}{'backend':<12}{'peer key':<32}{'toolkit key':<26}{'peer':>10}{'toolkit':>10}{'gap':>8}")
    for p in pairs:
        flag = "" if retokenized(p) or p.agrees(ns.tolerance) else "  DISAGREES"
        bad += bool(flag)
        note = "  (re-tokenized: not expected equal)" if retokenized(p) else ""
        print(f"{p.tool:<22}{p.backend:<12}{p.peer_key:<32}{p.toolkit_key:<26}{p.peer:>10.3f}{p.ours:>10.3f}"
              f"{p.relative_gap:>8.1%}{flag}{note}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
