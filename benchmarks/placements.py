"""What does a place cost? Time to start, to be ready and to stop the simulator on each kind of target.

Starts the tests' loopback Slurm cluster (munged, slurmctld, two slurmd in a temp folder) and,
where podman can run a container here, the tests' podman set-up (a root filesystem made
locally; see tests/system/containers.py), then launches the simulator ``--launches`` times on:

- this machine (``Host.local()``), the reference;
- a Slurm job (``SlurmTarget``): ``launch`` returns once Slurm runs the job and its task wrote its pid;
- a 2-node Slurm job (``launch_multinode``);
- a step inside an existing allocation (``allocation=``);
- a new podman container per launch (``ContainerTarget(rootfs=...)``);
- a server exec'd into a running podman container (``ContainerTarget(container=...)``).

and reports, per target, the median (min-max) of: ``start`` (the ``launch`` call: submit,
schedule, placement), ``ready`` (``wait_ready`` after that), ``stop`` (``server.stop()``,
verified: the job out of the queue with no step left, the container removed).

    .venv/bin/python benchmarks/placements.py [--launches 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sim_process import free_port  # noqa: E402
from system.containers import LocalPodman, find_podman, make_rootfs, probe  # noqa: E402
from system.slurm import LoopbackSlurm, missing_parts  # noqa: E402

from toolkit.host.container import ContainerTarget  # noqa: E402
from toolkit.host.host import Host  # noqa: E402
from toolkit.host.slurm import SlurmTarget  # noqa: E402
from toolkit.server.launch import launch, launch_multinode  # noqa: E402
from toolkit.server.server import MultiNodeServer, Server  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402

Starter = Callable[[ServerSpec, str], Server | MultiNodeServer]


def measure(name: str, start: Starter, launches: int, log_dir: str) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"start": [], "ready": [], "stop": []}
    for _ in range(launches):
        spec = ServerSpec.simulator(tp=2, port=free_port(), python=sys.executable, sim_startup_s=0.3,
                                    sim_warmup_s=0.05)
        t0 = time.monotonic()
        server = start(spec, log_dir)
        t1 = time.monotonic()
        try:
            server.wait_ready(timeout_s=120)
            t2 = time.monotonic()
        finally:
            server.stop()
        t3 = time.monotonic()
        times["start"].append(t1 - t0)
        times["ready"].append(t2 - t1)
        times["stop"].append(t3 - t2)
    return times


def row(name: str, times: dict[str, list[float]]) -> str:
    cells = [f"{statistics.median(v):5.2f} ({min(v):.2f}-{max(v):.2f})" for v in times.values()]
    return f"| {name:<34} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--launches", type=int, default=5)
    args = parser.parse_args()
    why = missing_parts()
    if why:
        sys.exit(f"no loopback Slurm here: {why}")
    root = Path(tempfile.mkdtemp(prefix="toolkit-placements-"))
    cluster = LoopbackSlurm.start(root / "slurm")
    engine: LocalPodman | None = None
    if find_podman() is not None:
        (root / "podman").mkdir()
        engine = LocalPodman(make_rootfs(root / "podman"))
        if (reason := probe(engine)) is not None:
            print(f"podman skipped: {reason}")
            engine = None
    local = Host.local()
    conf = str(cluster.conf)
    held: list[str] = []  # the allocation, made when its turn comes (it holds a node the 2-node job needs)

    def allocation() -> str:
        if not held:
            held.append(cluster.client("sbatch", "--parsable", "--nodes=1", "--output=/dev/null", "--wrap",
                                       "sleep 3600").strip())
        return held[0]

    targets: dict[str, Starter] = {
        "this machine (Host.local)": lambda spec, d: launch(local, spec, log_dir=d),
        "Slurm job, 1 node": lambda spec, d: launch(SlurmTarget(local, slurm_conf=conf), spec, log_dir=d),
        "Slurm job, 2 nodes (multinode)": lambda spec, d: launch_multinode(
            SlurmTarget(local, nodes=2, slurm_conf=conf, bind_node_address=True, check_port_on_node=False), spec,
            dist_init_port=free_port(), log_dir=d),
        "Slurm step in an allocation": lambda spec, d: launch(
            SlurmTarget(local, slurm_conf=conf, allocation=allocation(), srun_options=["--overlap"]), spec, log_dir=d),
    }
    if engine is not None:
        podman = engine
        box = podman.start_box()
        targets["podman: new container per launch"] = lambda spec, d: launch(ContainerTarget(
            local, engine="podman", rootfs=str(podman.rootfs), gpus=None, network="host", mounts=podman.mounts,
            run_options=podman.run_options, engine_options=podman.engine_options), spec, log_dir=d)
        targets["podman: exec into a running one"] = lambda spec, d: launch(ContainerTarget(
            local, engine="podman", container=box, engine_options=podman.engine_options), spec)
    try:
        print(f"{args.launches} launches each of the simulator (tp=2); seconds, median (min-max)\n")
        print("| target                             | start               | ready               | stop                |")
        print("|---|---|---|---|")
        for name, start in targets.items():
            print(row(name, measure(name, start, args.launches, str(root / "logs"))), flush=True)
    finally:
        if held:
            cluster.client("scancel", *held, check=False)
        cluster.stop()
        if engine is not None:
            engine.cleanup()


if __name__ == "__main__":
    main()
