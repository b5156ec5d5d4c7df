"""A real Slurm cluster on loopback for the tests: munged, slurmctld and two slurmd, all in a temp folder.

Debian's ``slurm-wlm`` and ``munge``, configured here and started as root: nothing under
``/etc`` is used or changed (munged gets its own key and socket, the daemons their own
``slurm.conf``). Two nodes, ``loop1`` on 127.0.0.1 and ``loop2`` on 127.0.0.2, are two
``slurmd -N`` of this one machine with their own ports, so a 2-node job runs for real.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from sim_process import free_port

NODES = (("loop1", "127.0.0.1"), ("loop2", "127.0.0.2"))
DAEMONS = ("munged", "slurmctld", "slurmd")


def find_daemon(name: str) -> str | None:
    """A daemon binary (in /usr/sbin, which is not on a normal user's PATH)."""
    found = shutil.which(name)
    if found:
        return found
    candidate = f"/usr/sbin/{name}"
    return candidate if os.access(candidate, os.X_OK) else None


def missing_parts() -> str | None:
    """Why a loopback cluster cannot start here, or None."""
    absent = [name for name in (*DAEMONS, "sbatch", "squeue", "scancel", "srun", "munge") if
              find_daemon(name) is None]
    if absent:
        return f"{', '.join(absent)} not installed (Debian: apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "slurmd runs jobs only as root here (SlurmUser=root); run the tests as root"
    return None


_CONF = """\
ClusterName=loop
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge-run/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SlurmUser=root
ReturnToService=2
MpiDefault=none
KillWait=5
InactiveLimit=0
{nodes}
PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class LoopbackSlurm:
    """A running two-node cluster: ``conf`` is its slurm.conf (pass it as SLURM_CONF / slurm_conf=)."""

    root: Path
    conf: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def client(self, *argv: str, check: bool = True) -> str:
        """A Slurm client command against this cluster; its stdout."""
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def jobs(self) -> list[str]:
        """Every job in the queue, in any state: ``id state nodelist``."""
        return self.client("squeue", "-h", "-o", "%i %T %N").splitlines()

    def steps(self) -> list[str]:
        return self.client("squeue", "-h", "-s", "-o", "%i %j").splitlines()

    @classmethod
    def start(cls, root: Path) -> LoopbackSlurm:
        host = socket.gethostname().split(".")[0]
        cpus = os.cpu_count() or 1
        root.mkdir(parents=True, exist_ok=True)
        for sub in ("munge", "munge-run", "state", "spool"):
            (root / sub).mkdir(mode=0o755, exist_ok=True)
        (root / "munge").chmod(0o700)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        munged = find_daemon("munged")
        assert munged is not None
        _daemon([munged, "--force", f"--socket={root}/munge-run/munge.socket", f"--key-file={key}",
                 f"--pid-file={root}/munge-run/munged.pid", f"--log-file={root}/munged.log",
                 f"--seed-file={root}/munge/seed"], root / "munged.log")
        nodes = "\n".join(
            f"NodeName={name} NodeHostname={host} NodeAddr={address} Port={free_port()} CPUs={cpus} RealMemory=1000"
            for name, address in NODES
        )
        conf = root / "slurm.conf"
        conf.write_text(_CONF.format(host=host, ctld_port=free_port(), slurmd_port=free_port(), root=root,
                                     nodes=nodes, names=",".join(name for name, _ in NODES)))
        cluster = cls(root, conf)
        try:
            ctld, slurmd = find_daemon("slurmctld"), find_daemon("slurmd")
            assert ctld is not None and slurmd is not None
            _daemon([ctld, "-f", str(conf)], root / "slurmctld.log")
            for name, _ in NODES:
                _daemon([slurmd, "-f", str(conf), "-N", name], root / f"slurmd-{name}.log")
            cluster._wait_idle(60.0)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _wait_idle(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        states: list[str] = []
        while time.monotonic() < deadline:
            states = self.client("sinfo", "-h", "-N", "-o", "%N %T", check=False).split("\n")
            if sum(line.endswith(" idle") for line in states) == len(NODES):
                return
            time.sleep(0.2)
        logs = "".join(path.read_text()[-600:] for path in self.root.glob("slurm*.log"))
        raise RuntimeError(f"the loopback cluster's nodes did not become idle: {states}\n{logs}")

    def stop(self) -> None:
        """Cancel every job, then stop slurmd, slurmctld and munged by their pid files, verified."""
        ids = [line.split()[0] for line in self.jobs()] if (self.root / "slurmctld.pid").exists() else []
        if ids:
            self.client("scancel", *ids, check=False)
        pids = [f"slurmd-{name}.pid" for name, _ in NODES] + ["slurmctld.pid", "munge-run/munged.pid"]
        for name in pids:
            _terminate(self.root / name)


def _daemon(argv: list[str], log: Path) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        said = log.read_text()[-1500:] if log.exists() else ""
        raise RuntimeError(f"{argv[0]} did not start (exit {done.returncode}): {done.stderr.strip()}\n{said}")


def _terminate(pid_file: Path, grace_s: float = 15.0) -> None:
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
