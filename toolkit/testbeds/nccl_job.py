"""A real torch.distributed job that logs like a server: the env check's proving ground.

    torchrun --nproc-per-node 2 -m toolkit.testbeds.nccl_job --backend nccl --duration-s 60

Each rank all-reduces in a loop and writes SGLang-style lines (`[TIME TPn] ...`, then `The server is
fired up and ready to roll!`). `--imitate sglang-0.4` writes `NCCL_CUMEM_ENABLE=0` whatever the user
exported, as SGLang up to 0.5.4.post1 (0.4.10 python/sglang/srt/entrypoints/engine.py:626; 0.5.4.post1
:673); `sglang-0.5` only when unset, as 0.5.4.post2 and later (:680; 0.5.23 :1898). The rank re-executes
itself, so `/proc/<pid>/environ` shows the override as a spawned worker would. `--drop-env VAR` loses VAR
on the way to the ranks; `--backend gloo` runs on CPUs (the CI path).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
import time

__all__ = ["IMITATED", "OVERRIDDEN_VARIABLE", "OVERRIDE_VALUE", "main"]

OVERRIDDEN_VARIABLE = "NCCL_CUMEM_ENABLE"
OVERRIDE_VALUE = "0"
_REEXEC_MARK = "TOOLKIT_NCCL_JOB_REEXEC"


def _log(rank: int, message: str) -> None:
    stamp = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    print(f"[{stamp} TP{rank}] {message}", flush=True)


IMITATED = ("sglang-0.4", "sglang-0.5")


def _override_env_like_an_engine(imitate: str, drop: list[str]) -> None:
    """Re-exec this rank with the engine's writes (and without ``drop``); same pid, new /proc environ."""
    if os.environ.get(_REEXEC_MARK) == "1":
        return
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if imitate == "sglang-0.4" or OVERRIDDEN_VARIABLE not in env:
        env[OVERRIDDEN_VARIABLE] = OVERRIDE_VALUE
    env[_REEXEC_MARK] = "1"
    os.execve(sys.executable, [sys.executable, "-m", "toolkit.testbeds.nccl_job", *sys.argv[1:]], env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolkit.testbeds.nccl_job", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    parser.add_argument("--duration-s", type=float, default=30.0, help="stop after this long (SIGTERM stops sooner)")
    parser.add_argument("--numel", type=int, default=1 << 20, help="elements in the all-reduced tensor")
    parser.add_argument("--log-every-s", type=float, default=1.0)
    parser.add_argument("--imitate", choices=IMITATED, default="sglang-0.4",
                        help=f"how {OVERRIDDEN_VARIABLE} is written: always (sglang-0.4) or only when unset (sglang-0.5)")
    parser.add_argument("--drop-env", action="append", default=[], metavar="VAR",
                        help="start the ranks without VAR (repeatable): a variable lost on its way to the workers")
    args = parser.parse_args(argv)

    _override_env_like_an_engine(args.imitate, args.drop_env)
    import torch
    import torch.distributed as dist

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    stopping = False

    def _stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    _log(rank, f"Init torch distributed begin. backend={args.backend} world_size={world} "
               f"{OVERRIDDEN_VARIABLE}={os.environ.get(OVERRIDDEN_VARIABLE)}")
    if args.backend == "nccl":
        # More ranks than GPUs share GPUs round-robin, so that NCCL itself reports the clash
        # ("Duplicate GPU detected"): a real fatal line for the classifier, not a CUDA ordinal error.
        gpu = local_rank % max(torch.cuda.device_count(), 1)
        torch.cuda.set_device(gpu)
        device = torch.device("cuda", gpu)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=args.backend)
    _log(rank, "Init torch distributed ends.")
    tensor = torch.ones(args.numel, device=device)
    for _ in range(3):  # warm-up: the first all-reduce builds the communicator (NCCL prints its env here)
        dist.all_reduce(tensor)
    if device.type == "cuda":
        torch.cuda.synchronize()
    if rank == 0:
        _log(rank, "The server is fired up and ready to roll!")
    started = last_log = time.monotonic()
    steps = 0
    while not stopping and time.monotonic() - started < args.duration_s:
        dist.all_reduce(tensor)
        steps += 1
        now = time.monotonic()
        if now - last_log >= args.log_every_s:
            if device.type == "cuda":
                torch.cuda.synchronize()
            rate = steps / (now - last_log)
            gbytes = rate * args.numel * tensor.element_size() * 2 * (world - 1) / max(world, 1) / 1e9
            _log(rank, f"all-reduce steps: {steps}, rate: {rate:.1f}/s, bus bandwidth (GB/s): {gbytes:.2f}")
            steps, last_log = 0, now
    dist.destroy_process_group()
    _log(rank, "Shutting down.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
