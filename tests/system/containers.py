"""A real container engine for the tests: Debian's podman, with a root filesystem made here (no registry).

The root filesystem is an empty folder with the merged-/usr links; ``/usr``, ``/etc``, the
Python this venv was built from and the repository are mounted read-only, so the simulator
runs inside as it runs outside. No image is pulled.

This machine (itself a container) needs three quirks, found by trying them (podman 4.3.1):
crun cannot set RLIMIT_NOFILE here (``setrlimit: Operation not permitted``), so runc runs the
containers, with limits no higher than ours; and runc cannot mount a cgroup of its own at
``/sys/fs/cgroup`` (cgroup v1, no systemd), so a tmpfs stands there. Where podman still cannot
run a container, :func:`probe` says why and the tests skip with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENGINE_OPTIONS = ("--runtime", "runc")
RUN_OPTIONS = ("--ulimit=nofile=1024:1024", "--ulimit=nproc=1024:1024",
               "--mount=type=tmpfs,destination=/sys/fs/cgroup")


def find_podman() -> str | None:
    return shutil.which("podman")


@dataclass
class LocalPodman:
    """podman on this machine, and what a container needs to run the simulator: rootfs, mounts, options."""

    rootfs: Path
    engine_options: tuple[str, ...] = ENGINE_OPTIONS
    run_options: tuple[str, ...] = RUN_OPTIONS
    made: list[str] = field(default_factory=list)

    @property
    def mounts(self) -> tuple[str, ...]:
        shared = ["/usr", "/etc", str(Path(sys.base_prefix).resolve()), str(REPO)]
        return tuple(f"{path}:{path}:ro" for path in dict.fromkeys(shared) if not path.startswith("/usr/"))

    def podman(self, *words: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["podman", *self.engine_options, *words], capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"podman {' '.join(words)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def run_words(self) -> list[str]:
        """``run`` options and the root filesystem for a container like the ones the tests launch."""
        mounts = [word for mount in self.mounts for word in ("-v", mount)]
        return [*self.run_options, "--network=host", *mounts, "--rootfs", str(self.rootfs)]

    def start_box(self) -> str:
        """A running container (``sleep infinity``) to exec servers into; removed at the end of the session."""
        name = f"tk-box-{uuid.uuid4().hex[:8]}"
        self.podman("run", "-d", "--name", name, "--init", *self.run_words(), "sleep", "infinity")
        self.made.append(name)
        return name

    def names(self) -> list[str]:
        return self.podman("ps", "-a", "--format", "{{.Names}}").stdout.split()

    def cleanup(self) -> None:
        for name in self.made:
            self.podman("rm", "-f", "-t", "0", name, check=False)


def make_rootfs(root: Path) -> Path:
    """An empty root with Debian's merged-/usr links; everything else comes from read-only mounts."""
    rootfs = root / "rootfs"
    for sub in ("usr", "etc", "tmp", "proc", "dev", "sys", "run", "root", "var/tmp"):
        (rootfs / sub).mkdir(parents=True, exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{link}"):
            (rootfs / link).symlink_to(os.readlink(f"/{link}"))
    for path in {Path(sys.base_prefix).resolve(), REPO}:
        (rootfs / str(path).lstrip("/")).mkdir(parents=True, exist_ok=True)
    return rootfs


def probe(engine: LocalPodman) -> str | None:
    """Why podman cannot run a container here, or None."""
    try:
        done = engine.podman("run", "--rm", *engine.run_words(), sys.executable, "-c", "import toolkit.sim",
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"podman did not answer: {exc}"
    if done.returncode != 0:
        return f"podman cannot run a container on this machine: {done.stderr.strip()[-300:]}"
    return None
