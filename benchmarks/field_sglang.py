"""The field test on real SGLang 0.5.17 (issue 23, point 8): field_vllm.py's battery, with SGLang's flags and client.

The stages, the journal in ``--work`` and the products copied into ``--out`` are field_vllm.py's (its
docstring says what each stage does); what differs is data: the launch (Triton attention, PyTorch
sampling, no grammar backend: FlashInfer and FA3 are not carried, docs/real-gpu/sglang/README.md),
the typo (``--mem-fracton-static``), the reference client (``python -m sglang.bench_serving
--backend sglang-oai`` on SGLang's custom dataset shape), the start that fails
(``--mem-fraction-static 0.01``) and CUDA graphs off (``--disable-cuda-graph``, a deprecated alias that
still turns both phases' graphs off in 0.5.17: python/sglang/srt/server_args.py:8332-8337, :4297-4299).
The profile needs no launch flag: ``POST /start_profile`` names the folder and each TP rank writes
``{profile_id}-TP-{rank}.trace.json.gz`` (toolkit/engines/traces.py).

A stage that fails is kept in ``figures.json`` (``<stage>_failed``: the error, its evidence) and the
next stage still runs; the exit status is 1 then. Before anything on the GPU machine the script says
whether ``--python`` exists and whether a C compiler (Triton's launcher stubs) and nvcc (SGLang's JIT
KV-store kernel, which falls back without it) are on PATH.

On the GPU machine (docs/real-gpu/sglang/README.md, "How to run the battery")::

    /tmp/sv/bin/python benchmarks/field_sglang.py --python /tmp/sv/bin/python --model /tmp/m --out $OUT/a --stage basics,bench,profile

Here, against the simulator imitating SGLang 0.5.17 (SGLang's client laid out by ../shared/peers/setup_sglang.sh
on PYTHONPATH, the tokenizer from ../shared/peers/make_tokenizer.py in /tmp/peers/tok)::

    .venv/bin/python benchmarks/field_sglang.py --simulate --work /tmp/field-sglang-sim --out out/field-sglang-sim --stage basics,bench,profile
"""

from __future__ import annotations

import subprocess
import sys

from field_vllm import PEERS, Engine, Field, main


def sglang_client(field: Field) -> tuple[list[str], str | None]:
    """``python -m sglang.bench_serving`` beside the engine (with ``--simulate``: the peers' layout of SGLang's
    client), checked with ``--help`` first, and its tokenizer (None: the model's). sglang 0.5.17's client imports
    Hugging Face ``datasets`` at load time (python/sglang/benchmark/datasets/__init__.py:11 -> mmmu.py:8) although
    only MMMU reads with it, and the GPU machine's set does not carry ``datasets``: without it a stub that raises
    on use goes on PYTHONPATH."""
    args = field.args
    tokenizer = args.tokenizer or (str(PEERS / "tok") if args.simulate else None)
    if args.reference_bench:
        words = args.reference_bench.split()
    elif args.simulate:
        words = ["env", f"PYTHONPATH={PEERS / 'sgl'}", str(PEERS / "venv-vllm" / "bin" / "python"),
                 "-m", "sglang.bench_serving"]
    else:
        words = [args.python, "-m", "sglang.bench_serving"]
    for _ in range(2):
        ran = subprocess.run([*words, "--help"], capture_output=True, text=True, timeout=180, check=False)
        if ran.returncode == 0:
            return words, tokenizer
        if "No module named 'datasets'" not in ran.stderr or "field-stub" in " ".join(words):
            break
        stub = field.work / "field-stub" / "datasets"
        stub.mkdir(parents=True, exist_ok=True)
        (stub / "__init__.py").write_text(
            "def load_dataset(*args, **kwargs):\n    raise ImportError('Hugging Face datasets is not installed here: "
            "a stub from benchmarks/field_sglang.py, enough for --dataset-name custom')\n")
        if words[0] == "env" and words[1].startswith("PYTHONPATH="):
            words = ["env", f"PYTHONPATH={stub.parent}:{words[1].split('=', 1)[1]}", *words[2:]]
        else:
            words = ["env", f"PYTHONPATH={stub.parent}", *words]
        field.keep("reference_client_stub", f"{stub}: sglang.bench_serving needs the datasets module at import")
    raise RuntimeError(f"{' '.join(words)} --help failed (exit {ran.returncode}): {ran.stderr.strip()[-600:]}")


SGLANG = Engine(
    "sglang", "0.5.17",
    env={"NCCL_NVLS_ENABLE": "0", "NCCL_ALGO": "Ring", "FIELD_MARKER": "issue-23"},
    flags={"--attention-backend": "triton", "--sampling-backend": "pytorch", "--grammar-backend": "none",
           "--mem-fraction-static": 0.35, "--context-length": 2048, "--enable-metrics": True},
    typo={"--mem-fracton-static": 0.35},
    fail_flags={"--mem-fraction-static": 0.01},
    sim_fail_flags={"--mem-fraction-static": 0.01},
    eager_flags={"--disable-cuda-graph": True},
    python_hint="/tmp/sv/bin/python",
    stages=("basics", "bench", "profile", "fail", "graphs"),  # diagnose and notebook: not run on SGLang yet
    keep_going=True,
    sim_takes_flags=True,
    reference_client=sglang_client,
)

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], SGLANG, __doc__))
