"""The env check against a real torch.distributed job: NCCL ranks on GPUs, or gloo ranks on CPUs.

Launches `torchrun -m toolkit.testbeds.nccl_job` through the toolkit's `Host.local()` with NCCL tuning
variables (and `NCCL_DEBUG=INFO`), follows and classifies its log until rank 0 says it is
ready, then reads every rank's `/proc/<pid>/environ` with `env_report`: the variables that were
set show `ok` on every rank, the one the job overrides in its workers (as SGLang does with
`NCCL_CUMEM_ENABLE`) shows `overridden`, and NCCL's own `... set by environment to ...` echoes
are matched against them. Writes the report (CSV, text, heatmap PNG) and the log to --out.

    python benchmarks/nccl_env_check.py --nproc 1 --backend nccl --out $OUT      # on a GPU host
    python benchmarks/nccl_env_check.py --nproc 2 --backend gloo --out /tmp/x    # on CPUs (the CI path)
    python benchmarks/nccl_env_check.py --nproc 2 --backend gloo --imitate sglang-0.5 --drop-env NCCL_ALGO
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from toolkit.host.host import Host  # noqa: E402
from toolkit.logs import Verdict  # noqa: E402
from toolkit.moves.envcheck import env_report  # noqa: E402
from toolkit.server.launch import launch  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402
from toolkit.testbeds.nccl_job import IMITATED, OVERRIDDEN_VARIABLE  # noqa: E402
from toolkit.views import plots  # noqa: E402

NCCL_TUNING = {
    "NCCL_ALGO": "Ring",
    "NCCL_PROTO": "Simple",
    "NCCL_MIN_NCHANNELS": "4",
    "NCCL_DEBUG": "INFO",
    OVERRIDDEN_VARIABLE: "1",  # what the user exports; the job's workers override it to 0
    "NCCL_NVLS_ENABLE": "0",  # NVLink multicast stays off on shared machines
}


def job_spec(python: str, nproc: int, backend: str, duration_s: float, port: int, imitate: str = "sglang-0.4",
             drop: tuple[str, ...] = ()) -> ServerSpec:
    argv = [python, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port", str(port),
            "-m", "toolkit.testbeds.nccl_job", "--backend", backend, "--duration-s", str(duration_s),
            "--imitate", imitate, *[f"--drop-env={name}" for name in drop]]
    env = dict(NCCL_TUNING, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    return ServerSpec.command(argv, port=port).with_env(env)


def wait_for_ready_line(server: object, timeout_s: float) -> list[object]:
    """Follow the job's log until its ready line (or a fatal one); return the events seen."""
    follower = server.follow()  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = follower.events()
        fatal = [e for e in events if e.verdict is Verdict.FATAL]
        if fatal:
            first = min(fatal, key=lambda e: e.line_no)
            raise RuntimeError(f"the job failed: line {first.line_no} ({first.rule}): {first.text}")
        if any("fired up and ready" in e.text for e in events):
            return events
        if not server.is_alive():  # type: ignore[attr-defined]
            raise RuntimeError("the job exited before it was ready:\n" + "\n".join(e.raw for e in events[-20:]))
        time.sleep(0.2)
    raise TimeoutError(f"no ready line within {timeout_s} s")


def run(python: str, nproc: int, backend: str, out: Path, *, duration_s: float = 60, port: int = 29511,
        timeout_s: float = 240, imitate: str = "sglang-0.4", drop: tuple[str, ...] = ()) -> dict[str, object]:
    out.mkdir(parents=True, exist_ok=True)
    host = Host.local()
    spec = job_spec(python, nproc, backend, duration_s, port, imitate, drop)
    tag = f"{backend}_{nproc}_{imitate}" + "".join(f"_no-{name}" for name in drop)
    started = time.monotonic()
    with launch(host, spec, log_dir=str(out / "logs"), validate=False, check_port=False) as server:
        events = wait_for_ready_line(server, timeout_s)
        ready_s = time.monotonic() - started
        time.sleep(2.0)  # let NCCL print its INFO lines for the first collectives
        report = env_report(server, {k: v for k, v in NCCL_TUNING.items() if k != "NCCL_DEBUG"})
        log_text = host.read_file(server.log_path).decode("utf-8", "replace")
    frame = report.frame
    frame.to_csv(out / f"env_report_{tag}.csv", index=False)
    (out / f"env_report_{tag}.txt").write_text(f"{report.summary()}\n\n{report.by_rank().to_string()}\n"
                                                          f"\nNCCL echoes:\n{_nccl_text(report)}\n")
    (out / f"job_{tag}.log").write_text(log_text)
    try:
        plots.env(report).savefig(out / f"env_matrix_{tag}.png", dpi=90, bbox_inches="tight")
    except Exception as exc:  # noqa: BLE001 - the figure is a bonus; the frame is the result
        print(f"(no heatmap: {exc})")
    workers = frame[frame["role"] == "worker"]
    summary = {
        "backend": backend, "nproc": nproc, "imitate": imitate, "dropped": list(drop), "ready_after_s": round(ready_s, 1),
        "processes": int(frame["pid"].nunique()), "workers": int(workers["pid"].nunique()),
        "statuses": {f"{var}": sorted(set(workers[workers["variable"] == var]["status"]))
                     for var in sorted(set(frame["variable"]))},
        "log_lines": len(log_text.splitlines()),
        "classified": {v.value: sum(e.verdict is v for e in events) for v in Verdict},
        "nccl_echoes": _nccl_rows(report),
        "summary": report.summary(),
    }
    (out / f"summary_{tag}.json").write_text(json.dumps(summary, indent=2))
    return summary


def _nccl_rows(report: object) -> list[dict[str, object]]:
    nccl = getattr(report, "nccl", None)
    if nccl is None or len(nccl) == 0:
        return []
    return nccl.astype(str).to_dict("records")  # type: ignore[no-any-return]


def _nccl_text(report: object) -> str:
    nccl = getattr(report, "nccl", None)
    return "(none)" if nccl is None or len(nccl) == 0 else nccl.to_string()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="the interpreter with torch")
    parser.add_argument("--nproc", type=int, default=1)
    parser.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    parser.add_argument("--out", default=os.environ.get("OUT", "out/nccl-env"))
    parser.add_argument("--duration-s", type=float, default=60)
    parser.add_argument("--imitate", choices=IMITATED, default="sglang-0.4",
                        help=f"the SGLang release line whose {OVERRIDDEN_VARIABLE} write the job imitates")
    parser.add_argument("--drop-env", action="append", default=[], metavar="VAR",
                        help="the ranks start without VAR (exported on the launcher): the report must say missing")
    args = parser.parse_args()
    if shutil.which(args.python) is None and not Path(args.python).exists():
        parser.error(f"{args.python} not found")
    summary = run(args.python, args.nproc, args.backend, Path(args.out), duration_s=args.duration_s,
                  imitate=args.imitate, drop=tuple(args.drop_env))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
