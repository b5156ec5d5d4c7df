"""Container command lines as data: ``docker``/``podman`` run, exec, inspect, stop and rm for a server.

Pure. :class:`toolkit.host.container.ContainerTarget` runs these on the host; each is an argv,
joined by :func:`toolkit.host.shell.join` (property-tested: any image, mount, variable or
command reaches the engine as written). The run line is the one the engines document for
their images: GPUs, host IPC (NCCL and PyTorch's shared memory), the server's port, mounts:

- SGLang (docs/get_started/install.md, "Method 3: Using docker", sglang main at 010db98): ``docker
  run --gpus all --shm-size 32g -p 30000:30000 -v ~/.cache/huggingface:/root/.cache/huggingface
  --env "HF_TOKEN=<secret>" --ipc=host lmsysorg/sglang:latest python3 -m sglang.launch_server ...``;
- vLLM (docs/getting_started/installation/gpu.cuda.inc.md, "pre-built-images", vllm main at
  0487d5c): ``docker run --runtime nvidia --gpus all -v ... -p 8000:8000 --ipc=host
  vllm/vllm-openai:latest --model ...``, and for podman ``podman run --device nvidia.com/gpu=all
  ... --ipc=host docker.io/vllm/vllm-openai:latest ...`` (GPUs through CDI, not ``--gpus``).

vLLM's image has an entrypoint (the words after the tag are engine arguments), so the
entrypoint is cleared (``--entrypoint=``) and the server's own bash line runs, in any image.

>>> run_argv(ContainerRun(image="lmsysorg/sglang:v0.5.4"), engine="docker", name="sv", command="exec python3 -V",
...          port=30000)[:8]
['docker', 'run', '--name', 'sv', '--init', '--gpus', 'all', '--ipc=host']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from toolkit.errors import InvalidFlag
from toolkit.host.shell import check_env_name, check_word

__all__ = [
    "Engine", "ENGINES", "ContainerRun", "run_argv", "throwaway_prefix", "exec_prefix", "inspect_argv",
    "stop_argv", "remove_argv", "parse_running", "container_name", "check_name",
]

Engine = Literal["docker", "podman"]
ENGINES: tuple[Engine, ...] = ("docker", "podman")
_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")


@dataclass(frozen=True)
class ContainerRun:
    """What a server's container is made of: an image (or, for podman, a root filesystem) and its resources.

    ``gpus``: ``"all"``, ``"0,1"``, or None for none. ``ports``: ``(host, container)`` pairs to
    publish, beside the server's own port (published as itself unless ``network="host"``).
    ``mounts``: ``-v`` specs (``"/models:/models:ro"``). ``options``: more ``run`` options, one
    word each (``"--shm-size=32g"``, ``"--runtime=nvidia"``).
    """

    image: str | None = None
    rootfs: str | None = None
    gpus: str | None = "all"
    ipc_host: bool = True
    ports: tuple[tuple[int, int], ...] = ()
    mounts: tuple[str, ...] = ()
    network: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    init: bool = True
    options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.image is None) == (self.rootfs is None):
            raise InvalidFlag("a container is made from an image or (podman) a root filesystem: pass one of them",
                              hint="ContainerTarget(host, image='lmsysorg/sglang:v0.5.4'), or container='NAME' to "
                                   "exec into one that runs")
        for word in (self.image or "", self.rootfs or "", *self.mounts, *self.options, self.network or "",
                     self.gpus or ""):
            check_word(word, what="a container option")
        for name, value in self.env:
            check_env_name(name)
            check_word(value, what=f"the value of {name}")
        for option in self.options:
            if not option.startswith("-"):
                raise InvalidFlag(f"container run option {option!r} does not start with '-'",
                                  hint="one option per item, value attached: options=['--shm-size=32g']")

    def resource_options(self, engine: Engine, port: int | None, *, publish: bool = True) -> list[str]:
        """GPUs, IPC, network, ports (unless not ``publish``), mounts, env and the extra options, as the engine spells them."""
        words: list[str] = []
        if self.gpus is not None:
            if engine == "docker":
                words += ["--gpus", self.gpus if self.gpus == "all" else f"device={self.gpus}"]
            else:
                for device in self.gpus.split(","):
                    words += ["--device", f"nvidia.com/gpu={device.strip()}"]
        if self.ipc_host:
            words.append("--ipc=host")
        if self.network is not None:
            words.append(f"--network={self.network}")
        published = list(self.ports) if publish else []
        if publish and port is not None and self.network != "host" and all(inside != port for _, inside in published):
            published.append((port, port))
        for outside, inside in published:
            words += ["-p", f"{int(outside)}:{int(inside)}"]
        for mount in self.mounts:
            words += ["-v", mount]
        for name, value in self.env:
            words += ["-e", f"{name}={value}"]
        return [*words, *self.options]

    def source(self) -> list[str]:
        """The image, or ``--rootfs DIR``, after the entrypoint is cleared."""
        source = [self.image] if self.image is not None else ["--rootfs", str(self.rootfs)]
        return ["--entrypoint=", *source]


def container_name(text: str) -> str:
    """A name both engines accept: ``[a-zA-Z0-9][a-zA-Z0-9_.-]*``."""
    cleaned = re.sub(r"[^a-zA-Z0-9_.-]+", "-", text).strip("-._")[:100]
    return cleaned if _NAME.fullmatch(cleaned or "") else f"toolkit-{cleaned}".rstrip("-")


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise InvalidFlag(f"{name!r} is not a container name docker or podman accepts",
                          hint="letters, digits, '_', '.', '-', starting with a letter or digit")
    return name


def run_argv(run: ContainerRun, *, engine: Engine, name: str, command: str, port: int | None,
             engine_options: Sequence[str] = ()) -> list[str]:
    """``ENGINE run --name NAME [--init] RESOURCES --entrypoint= IMAGE bash -c COMMAND``: attached, so its output is the log."""
    words = [engine, *engine_options, "run", "--name", check_name(name)]
    if run.init:
        words.append("--init")  # reaps the ranks' children and forwards SIGTERM: the server is not pid 1
    return [*words, *run.resource_options(engine, port), *run.source(), "bash", "-c", command]


def throwaway_prefix(run: ContainerRun, *, engine: Engine, engine_options: Sequence[str] = ()) -> list[str]:
    """A removed-on-exit container of the same image, for one command (the engine's ``--help``); no ports published."""
    return [engine, *engine_options, "run", "--rm", "-i", *run.resource_options(engine, None, publish=False),
            *run.source()]


def exec_prefix(container: str, *, engine: Engine, engine_options: Sequence[str] = ()) -> list[str]:
    """Bash inside a running container, stdin forwarded (``-i``) so that a stream's watcher sees our EOF."""
    return [engine, *engine_options, "exec", "-i", check_name(container)]


def inspect_argv(name: str, *, engine: Engine, engine_options: Sequence[str] = ()) -> list[str]:
    return [engine, *engine_options, "inspect", "--format", "{{.State.Running}}", check_name(name)]


def stop_argv(name: str, grace_s: float, *, engine: Engine, engine_options: Sequence[str] = ()) -> list[str]:
    """SIGTERM, then SIGKILL after ``grace_s`` (the engine's own stop)."""
    return [engine, *engine_options, "stop", "-t", str(max(int(grace_s + 0.999), 0)), check_name(name)]


def remove_argv(name: str, *, engine: Engine, engine_options: Sequence[str] = ()) -> list[str]:
    return [engine, *engine_options, "rm", "-f", check_name(name)]


def parse_running(exit_code: int, stdout: str, stderr: str) -> bool | None:
    """``inspect``'s answer: True running, False stopped, None no such container (removed)."""
    if exit_code != 0:
        if re.search(r"(?i)no such (object|container)", stderr):
            return None
        raise ValueError(stderr.strip() or f"inspect exited {exit_code}")
    return stdout.strip() == "true"
