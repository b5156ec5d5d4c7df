"""Launch servers in containers on a host: exec into a running one, or run one from an image.

``container="sglang-dev"`` starts the server as a detached process inside that running container:
its log is a file there, and stop ends its tree, leaving the container running. ``image=`` runs a
new container per launch (:mod:`toolkit.host.container_command`); the attached ``docker run``
writes the log on the host, and stop removes the container, verified gone. Either way the env
check reads the processes inside.

>>> gpu = Host("gpu-a", user="root")  # doctest: +SKIP
>>> box = ContainerTarget(gpu, image="lmsysorg/sglang:v0.5.4", mounts=["/models:/models:ro"])  # doctest: +SKIP
>>> with launch(box, ServerSpec.sglang("/models/Llama-3.1-8B", tp=8)) as server:  # doctest: +SKIP
...     server.wait_ready(timeout_s=1800)
...     server.placement.describe()
'container toolkit-sglang-baseline-20261201-120000-123 (docker) on root@gpu-a:22 (pid 2)'
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from toolkit.errors import HostError, InvalidFlag
from toolkit.host import container_command as cc
from toolkit.host.handles import LogElsewhere
from toolkit.host.host import CommandResult, Host, ProcessHandle, StopReport
from toolkit.host.place import PlacedProcess
from toolkit.host.placement import Placement
from toolkit.host.procs import ProcessInfo
from toolkit.host.shell import join

__all__ = ["ContainerTarget", "ContainerPlace"]


class ContainerTarget:
    """Where ``launch`` starts a server in a container on ``host``: ``container=`` to exec into, or ``image=``.

    ``engine`` is ``"docker"`` or ``"podman"``; ``engine_options`` go before the subcommand
    (``["--runtime", "runc"]``). For a new container: ``gpus`` (``"all"``, ``"0,1"``, None),
    ``ipc_host``, ``ports`` (more ``(host, container)`` pairs; the server's port is published
    unless ``network="host"``), ``mounts`` (``-v`` specs), ``env``, ``init``, ``run_options``;
    ``rootfs`` (podman) in place of an image; ``name`` (default: one per launch).
    """

    def __init__(self, host: Host, *, container: str | None = None, image: str | None = None,
                 rootfs: str | None = None, engine: cc.Engine = "docker", name: str | None = None,
                 gpus: str | None = "all", ipc_host: bool = True, ports: Sequence[tuple[int, int]] = (),
                 mounts: Sequence[str] = (), network: str | None = None,
                 env: Mapping[str, str] | None = None, init: bool = True, run_options: Sequence[str] = (),
                 engine_options: Sequence[str] = (), start_timeout_s: float = 600.0) -> None:
        if engine not in cc.ENGINES:
            raise InvalidFlag(f"engine must be one of {', '.join(cc.ENGINES)}, not {engine!r}")
        if (container is None) == (image is None and rootfs is None):
            raise InvalidFlag("pass container= (exec into a running container) or image= (run a new one), not both",
                              hint="ContainerTarget(host, container='sglang-dev') or ContainerTarget(host, "
                                   "image='lmsysorg/sglang:v0.5.4')")
        self.host = host
        self.engine: cc.Engine = engine
        self.engine_options = tuple(engine_options)
        self.container = None if container is None else cc.check_name(container)
        self.fixed_name = None if name is None else cc.check_name(name)
        self.start_timeout_s = start_timeout_s
        self.spec: cc.ContainerRun | None = None
        if self.container is None:
            self.spec = cc.ContainerRun(image, rootfs, gpus, ipc_host, tuple(ports), tuple(mounts), network,
                                        tuple((env or {}).items()), init, tuple(run_options))
        self._shell = self._inside(self.container) if self.container is not None else None

    @property
    def name(self) -> str:
        """``podman sglang-dev on root@gpu-a:22`` (exec), ``docker lmsysorg/sglang:v0.5.4 on ...`` (image)."""
        what = self.container or (self.spec.image if self.spec and self.spec.image else "rootfs")
        return f"{self.engine} {what} on {self.host.name}"

    def __repr__(self) -> str:
        return f"ContainerTarget({self.name!r})"

    @property
    def registry_host(self) -> None:
        """None: the container engine lists its containers (``docker ps``); the driver stops them at exit."""
        return None

    def _inside(self, container: str) -> Host:
        prefix = cc.exec_prefix(container, engine=self.engine, engine_options=self.engine_options)
        return self.host.inside(prefix, name=f"{container} ({self.engine} on {self.host.name})")

    # -- what launch asks before anything starts -----------------------------------------------
    def expand_user(self, path: str, /) -> str:
        return (self._shell or self.host).expand_user(path)

    def run(self, command: str, /, *, check: bool = True, timeout_s: float | None = None) -> CommandResult:
        """In the container (exec), or in a throwaway container of the image (``run --rm``)."""
        if self._shell is not None:
            return self._shell.run(command, check=check, timeout_s=timeout_s)
        assert self.spec is not None
        prefix = cc.throwaway_prefix(self.spec, engine=self.engine, engine_options=self.engine_options)
        throwaway = self.host.inside(prefix, name=f"a throwaway {self.engine} container on {self.host.name}")
        return throwaway.run(command, check=check, timeout_s=timeout_s)

    def port_holder(self, port: int, /) -> tuple[int, str] | None:
        """Inside the running container (exec); on the host for a new one (its port is published there)."""
        return (self._shell or self.host).port_holder(port)

    # -- starting ------------------------------------------------------------------------------
    def start_server(self, command: str, /, *, log_path: str, port: int, check_port: bool = True,
                     env: Mapping[str, str] | None = None) -> PlacedProcess:
        """Start ``command``: inside the running container, or as the main process of a new one."""
        if self._shell is not None and self.container is not None:
            handle = self._shell.start_detached(command, log_path=log_path, env=env)
            placement = Placement("container", self.name, (self.host.name,), self.host.address, handle.pid,
                                  container=self.container, engine=self.engine,
                                  command=join([*cc.exec_prefix(self.container, engine=self.engine,
                                                                engine_options=self.engine_options),
                                                "bash", "-c", command]))
            return PlacedProcess(handle.host, handle.pid, handle.log_path, handle.command, handle.started_at,
                                 handle.start_ticks, place=self._shell, placement=placement)
        assert self.spec is not None
        name = self.fixed_name or cc.container_name(f"toolkit-{log_path.rsplit('/', 1)[-1].removesuffix('.log')}")
        line = join(cc.run_argv(self.spec, engine=self.engine, name=name, command=command, port=port,
                                engine_options=self.engine_options))
        client = self.host.start_detached(line, log_path=log_path)
        place = ContainerPlace(self, name, client)
        place.wait_running(self.start_timeout_s)
        pid = place.server_pid()
        placement = Placement("container", self.name, (self.host.name,), self.host.address, pid, container=name,
                              engine=self.engine, command=line)
        return PlacedProcess(place.name, pid, log_path, line, client.started_at, place=place, placement=placement)

    def engine_command(self, *words: str) -> str:
        """``docker ...`` (or podman) as run on the host, with the engine options."""
        return join([self.engine, *self.engine_options, *words])


class ContainerPlace(LogElsewhere):
    """A server's own container as its Server sees it: the log on the host, processes inside, stop removes it.

    The handle's pid is the server's, as the container numbers it (the child of its init).
    """

    def __init__(self, target: ContainerTarget, container: str, client: ProcessHandle) -> None:
        self.target = target
        self.log_host = target.host
        self.container = container
        self.client = client  # the attached `docker run` on the host, whose output is the log
        self._shell = target._inside(container)

    @property
    def name(self) -> str:
        return f"{self.container} ({self.target.engine} on {self.target.host.name})"

    @property
    def address(self) -> str:
        return self.target.host.address

    def __repr__(self) -> str:
        return f"ContainerPlace({self.name!r})"

    def _state(self) -> bool | None:
        argv = cc.inspect_argv(self.container, engine=self.target.engine, engine_options=self.target.engine_options)
        result = self.target.host.run(join(argv), check=False, timeout_s=60)
        try:
            return cc.parse_running(result.exit_code, result.stdout, result.stderr)
        except ValueError as exc:
            raise HostError(f"`{result.command}` failed on {self.target.host.name}", host=self.target.host.name,
                            evidence=[str(exc)], hint="is the container engine running there?") from None

    def wait_running(self, timeout_s: float) -> None:
        """Until the container runs; if ``docker run`` ends first (no image, no GPU runtime), say why."""
        deadline = time.monotonic() + timeout_s
        while self._state() is not True:
            if not self.target.host.is_alive(self.client) or time.monotonic() >= deadline:
                said = self.target.host.run(f"tail -n 12 -- {join([self.client.log_path])}", check=False)
                self.stop(self.client, grace_s=0)
                raise HostError(
                    f"the container {self.container} did not start on {self.target.host.name}",
                    host=self.target.host.name, evidence=[self.client.command, *said.stdout.splitlines()],
                    hint="the engine's words are above: a missing image (pull it first), no GPU runtime "
                         "(docker: nvidia-container-toolkit; podman: `nvidia-ctk cdi generate`), or a name in use")
            time.sleep(0.1)

    def server_pid(self) -> int:
        """The server's pid inside: pid 1 without ``init``, else its child (the container's only one)."""
        if self.target.spec is not None and not self.target.spec.init:
            return 1
        children = [info.pid for info in self._shell.process_tree(1) if info.ppid == 1]
        return min(children) if children else 1

    def is_alive(self, handle: ProcessHandle, /) -> bool:
        return self._state() is True

    def stop(self, handle: ProcessHandle, /, *, grace_s: float = 10.0) -> StopReport:
        """``stop`` (SIGTERM, SIGKILL after ``grace_s``) then ``rm -f``; verified gone; idempotent."""
        t0 = time.monotonic()
        host, engine, options = self.target.host, self.target.engine, self.target.engine_options
        state = self._state()
        if state is not None:
            if state:
                host.run(join(cc.stop_argv(self.container, grace_s, engine=engine, engine_options=options)),
                         check=False, timeout_s=grace_s + 60)
            host.run(join(cc.remove_argv(self.container, engine=engine, engine_options=options)), check=False,
                     timeout_s=60)
            if self._state() is not None:
                raise HostError(f"the container {self.container} is still there after `rm -f`", host=host.name,
                                evidence=[host.run(self.target.engine_command("ps", "-a"), check=False).stdout],
                                hint=f"remove it by hand: {self.target.engine_command('rm', '-f', self.container)}")
        host.stop(self.client, grace_s=5.0)  # the attached client ends with its container
        return StopReport(self.name, handle.pid, state is None, False, elapsed_s=time.monotonic() - t0)

    def process_tree(self, pid: int, /) -> list[ProcessInfo]:
        """Read inside the container (``exec``), in its pid numbering."""
        return self._shell.process_tree(pid)

    def port_holder(self, port: int, /) -> tuple[int, str] | None:
        return self.target.host.port_holder(port)
