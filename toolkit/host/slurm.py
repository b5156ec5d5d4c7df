"""Launch servers through Slurm from a login node: a job of their own, or a step of an allocation.

The toolkit drives the scheduler the cluster has; it imitates none. A job still pending after
``pending_timeout_s`` is cancelled and reported with Slurm's reason. The job's output file is the
server log, read on the login node (Slurm writes it on the node: the log directory must be on a file
system both see, as in SGLang's recipe). Stop is ``scancel``, verified: the job leaves the queue
and no step of it remains.

>>> login = Host("login-1", user="me")  # doctest: +SKIP
>>> gpu = SlurmTarget(login, partition="h200", gpus_per_node=8, time="2:00:00", account="llm")  # doctest: +SKIP
>>> with launch(gpu, ServerSpec.sglang("/models/Llama-3.1-8B", tp=8)) as server:  # doctest: +SKIP
...     server.wait_ready(timeout_s=1800)
...     server.placement.describe()
'slurm job 4242 on gpu-017 (pid 91234)'
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from toolkit.errors import CommandFailed, HostError, InvalidFlag, JobNotStarted
from toolkit.host import slurm_script as ss
from toolkit.host.handles import LogElsewhere
from toolkit.host.host import CommandResult, Host, ProcessHandle, StopReport
from toolkit.host.place import PlacedProcess
from toolkit.host.placement import Placement
from toolkit.host.procs import ProcessInfo
from toolkit.host.shell import quote

__all__ = ["SlurmTarget", "SlurmNode", "SlurmJob"]


@dataclass(frozen=True)
class SlurmJob:
    """One server's job: its id (``42``, or ``42.3`` for a step of an allocation), nodes, and how it was started."""

    job_id: str
    step: str | None
    name: str
    nodes: tuple[str, ...]
    addresses: tuple[str, ...]
    command: str
    client: ProcessHandle | None = None  # the srun client on the login node, for a step of an allocation

    @property
    def ident(self) -> str:
        return self.step or self.job_id


class SlurmTarget:
    """Where ``launch`` submits a server as a Slurm job (or a step of ``allocation``), from ``login``.

    ``partition``, ``nodes``, ``gpus_per_node``, ``time``, ``account`` in Slurm's spelling;
    ``options`` more ``sbatch`` options, ``srun_options`` more options of the server step
    (``--container-image=...`` with pyxis). ``slurm_conf`` sets ``SLURM_CONF`` for the client
    commands (a cluster other than the login node's default). ``check_port_on_node`` makes each
    task refuse to start where its port is already held; ``bind_node_address`` passes each node's
    own NodeAddr as ``--host`` (for nodes that share a machine, as on a loopback test cluster).
    """

    def __init__(self, login: Host, *, partition: str | None = None, nodes: int = 1,
                 gpus_per_node: int | None = None, time: str | None = None, account: str | None = None,
                 options: Sequence[str] = (), srun_options: Sequence[str] = (),
                 allocation: str | int | None = None, slurm_conf: str | None = None,
                 pending_timeout_s: float = 300.0, check_port_on_node: bool = True,
                 bind_node_address: bool = False, kill_wait_s: float = 120.0,
                 poll_interval_s: float = 1.0) -> None:
        self.login = login
        self.request = ss.SlurmRequest(partition, nodes, gpus_per_node, time, account, tuple(options),
                                       tuple(srun_options), None if allocation is None else str(allocation))
        self.slurm_conf = slurm_conf
        self.pending_timeout_s = pending_timeout_s
        self.check_port_on_node = check_port_on_node
        self.bind_node_address = bind_node_address
        self.kill_wait_s = kill_wait_s
        self.poll_interval_s = poll_interval_s
        self._seen: dict[str, tuple[float, bool]] = {}

    @property
    def name(self) -> str:
        """``slurm h200 via me@login-1:22``, or ``slurm job 4242 via ...`` inside an allocation."""
        what = f"job {self.request.allocation}" if self.request.allocation else (self.request.partition or "default")
        return f"slurm {what} via {self.login.name}"

    def __repr__(self) -> str:
        return f"SlurmTarget({self.name!r}, nodes={self.request.nodes})"

    # -- what launch asks before anything starts -----------------------------------------------
    def expand_user(self, path: str, /) -> str:
        return self.login.expand_user(path)

    def run(self, command: str, /, *, check: bool = True, timeout_s: float | None = None) -> CommandResult:
        """On the login node (where the engine's ``--help`` is read: the same install as the nodes')."""
        return self.login.run(command, check=check, timeout_s=timeout_s)

    def port_holder(self, port: int, /) -> tuple[int, str] | None:
        """None: the node is not known before the job starts; the job's task checks the port there."""
        return None

    @property
    def registry_host(self) -> None:
        """None: Slurm lists its jobs (``squeue``); the driver stops them at exit."""
        return None

    # -- starting ------------------------------------------------------------------------------
    def start_server(self, command: str, /, *, log_path: str, port: int, check_port: bool = True,
                     env: Mapping[str, str] | None = None) -> PlacedProcess:
        """Submit ``command`` as a one-node job and wait until it runs; its output file is ``log_path``."""
        if self.request.nodes != 1:
            raise InvalidFlag(
                f"{self!r} asks for {self.request.nodes} nodes, and launch() starts one server on one node",
                hint="use launch_multinode(target, spec): one job over the nodes, with SGLang's --nnodes/--node-rank",
            )
        return self.start_job(command, log_path=log_path, port=port if check_port else None, node_flags=None,
                              env=env)[0]

    def start_job(self, command: str, *, log_path: str, port: int | None, node_flags: ss.NodeFlags | None,
                  env: Mapping[str, str] | None = None, cwd: str | None = None) -> tuple[PlacedProcess, ...]:
        """One job over ``nodes``: one task each, node 0 first; each node's log is its own (``x-node1.log``)."""
        started_at = time.time()
        many = self.request.nodes > 1
        name = ss.job_name(f"toolkit-{log_path.rsplit('/', 1)[-1].removesuffix('.log')}")
        node_logs = ss.node_log_path(log_path, 0).replace("-node0", "-node%n") if many else None
        task = ss.task_script(command, log_path=log_path, port=port if self.check_port_on_node else None,
                              node_flags=node_flags if many else None, env=env, cwd=cwd)
        task_path = ss.task_path(log_path)
        self.login.write_file(task_path, ss.task_file(task))
        allocation = self.request.allocation
        step = ss.step_argv(self.request, job_name=name, node_logs=node_logs, allocation=allocation)
        if allocation is None:
            job = self._submit(name, log_path, step, task_path)
        else:
            job = self._start_step(allocation, name, log_path,
                                   f"{ss.with_conf(step, self.slurm_conf)} bash {quote(task_path)}")
        pids = self._pids(log_path, job)
        handles = []
        for rank in range(len(job.nodes)):
            place = SlurmNode(self, job, rank)
            node_log = ss.node_log_path(log_path, rank) if many else log_path
            placement = Placement("slurm", self.name, job.nodes, job.addresses[rank], pids[rank] or None,
                                  job_id=job.ident, node_rank=rank, command=job.command)
            handles.append(PlacedProcess(place.name, pids[rank], node_log, job.command, started_at,
                                         place=place, placement=placement))
        return tuple(handles)

    def _submit(self, name: str, log_path: str, step: list[str], task_path: str) -> SlurmJob:
        script_path = log_path.removesuffix(".log") + ".sbatch"
        sbatch = ss.sbatch_argv(self.request, job_name=name, log_path=log_path,
                                workdir=log_path.rsplit("/", 1)[0] or "/")
        submitted = ss.with_conf([*sbatch, script_path], self.slurm_conf)
        self.login.write_file(script_path, ss.batch_script(step, task_path, submitted=submitted))
        result = self.login.run(submitted, check=False, timeout_s=120)
        if not result.ok:
            raise CommandFailed(
                f"sbatch refused the job on {self.login.name} (exit {result.exit_code})", host=self.login.name,
                command=submitted, exit_code=result.exit_code, stderr=result.stderr,
                hint="Slurm's words are above: check partition=, account=, time= and options= against "
                     "`sinfo` and `sacctmgr show assoc user=$USER`")
        job_id = ss.parse_job_id(result.stdout)
        queue = self._wait_running(job_id, name)
        nodes = self._hostnames(queue.nodelist)
        return SlurmJob(job_id, None, name, nodes, self._addresses(nodes), submitted)

    def _wait_running(self, job_id: str, name: str) -> ss.QueueState:
        deadline = time.monotonic() + self.pending_timeout_s
        pause = 0.05
        while True:
            queue = self._queue(job_id)
            if queue is None:  # it ran and ended already (a held port, a crash): scontrol still knows it
                fields = ss.parse_fields(self._slurm(["scontrol", "show", "job", "-o", job_id], check=False).stdout)
                queue = ss.QueueState(fields.get("JobState", "GONE"), fields.get("Reason", "?"),
                                      fields.get("NodeList", ""))
            if queue.state not in ("PENDING", "CONFIGURING"):
                if queue.nodelist and queue.nodelist != "(null)":
                    return queue
                raise JobNotStarted(
                    f"slurm job {job_id} ({name}) ended without running: {queue.state} ({queue.reason})",
                    host=self.login.name, job_id=job_id, state=queue.state, reason=queue.reason,
                    evidence=self._job_evidence(job_id), hint=ss.pending_hint(queue.reason))
            if time.monotonic() >= deadline and queue.state == "PENDING":
                evidence = self._job_evidence(job_id)
                self.cancel(SlurmJob(job_id, None, name, (), (), ""), grace_s=0)
                raise JobNotStarted(
                    f"slurm job {job_id} ({name}) was still pending after {self.pending_timeout_s:g} s, "
                    f"because of {queue.reason}; it was cancelled",
                    host=self.login.name, job_id=job_id, state=queue.state, reason=queue.reason, evidence=evidence,
                    hint=ss.pending_hint(queue.reason))
            time.sleep(pause)
            pause = min(pause * 2, self.poll_interval_s)

    def _start_step(self, allocation: str, name: str, log_path: str, line: str) -> SlurmJob:
        client = self.login.start_detached(line, log_path=log_path)
        deadline = time.monotonic() + self.pending_timeout_s
        pause = 0.05
        while True:
            steps = self._steps(allocation)
            found = [(ident, nodelist) for ident, (step_name, nodelist) in steps.items() if step_name == name]
            if found:
                ident, nodelist = found[0]
                nodes = self._hostnames(nodelist)
                return SlurmJob(allocation, ident, name, nodes, self._addresses(nodes), line, client)
            if not self.login.is_alive(client) or time.monotonic() >= deadline:
                self.login.stop(client, grace_s=5)
                said = self.login.run(f"tail -n 8 -- {quote(log_path)}", check=False).stdout.splitlines()
                raise JobNotStarted(
                    f"the server step {name} did not start in allocation {allocation} within "
                    f"{self.pending_timeout_s:g} s", host=self.login.name, job_id=allocation, state="NOSTEP",
                    reason="srun could not create the step", evidence=said,
                    hint="srun's words are above: is the allocation still running (`squeue -j JOBID`), with free "
                         "nodes (other steps hold them unless started with --overlap)?")
            time.sleep(pause)
            pause = min(pause * 2, self.poll_interval_s)

    def _pids(self, log_path: str, job: SlurmJob) -> list[int]:
        """Each task's pid, from the files the tasks write first; 0 for a task that never ran."""
        files = " ".join(quote(f"{ss.pid_path(log_path)}{rank}.pid") for rank in range(len(job.nodes)))
        script = f"for f in {files}; do cat -- \"$f\" 2>/dev/null || echo -; done"
        deadline = time.monotonic() + 120
        while True:
            words = self.login.run(script).stdout.split()
            if all(word.isdigit() for word in words) or time.monotonic() >= deadline or not self._present(job):
                return [int(word) if word.isdigit() else 0 for word in words]
            time.sleep(0.1)

    # -- what the nodes ask ------------------------------------------------------------------
    def job_alive(self, job: SlurmJob) -> bool:
        """Whether the server's processes run (RUNNING; a step still listed); asked at most once per poll interval."""
        now = time.monotonic()
        seen = self._seen.get(job.ident)
        if seen is not None and now - seen[0] < min(self.poll_interval_s, 1.0):
            return seen[1]
        if job.step is not None:
            alive = job.step in self._steps(job.job_id)
        else:
            queue = self._queue(job.job_id)
            alive = queue is not None and queue.alive
        self._seen[job.ident] = (now, alive)
        return alive

    def cancel(self, job: SlurmJob, *, grace_s: float = 10.0) -> tuple[bool, bool, float]:
        """``scancel`` it, verified: ``(already_stopped, hard_cancel_needed, seconds)``; raises if it stays."""
        t0 = time.monotonic()
        self._seen.pop(job.ident, None)
        already = not self._present(job)
        hard = False
        if not already:
            if grace_s > 0:
                self._slurm(["scancel", "--signal=TERM", job.ident], check=False)
            if not self._gone_within(job, grace_s):
                hard = True
                self._slurm(["scancel", job.ident], check=False)
                if not self._gone_within(job, self.kill_wait_s):
                    raise HostError(
                        f"slurm job {job.ident} is still in the queue {self.kill_wait_s:g} s after scancel",
                        host=self.login.name, evidence=self._job_evidence(job.job_id),
                        hint="a node may not answer (state COMPLETING): `scontrol show job`, `sinfo -R`; an admin "
                             "can mark it down")
        if job.client is not None:
            self.login.stop(job.client, grace_s=max(grace_s, 5.0))
        return already, hard, time.monotonic() - t0

    def _gone_within(self, job: SlurmJob, wait_s: float) -> bool:
        deadline = time.monotonic() + wait_s
        while self._present(job):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def _present(self, job: SlurmJob) -> bool:
        """The job in the queue in any state, or any step of it (for a step: that step)."""
        steps = self._steps(job.job_id)
        if job.step is not None:
            return job.step in steps
        return bool(steps) or self._queue(job.job_id) is not None

    # -- Slurm's answers -----------------------------------------------------------------------
    def _slurm(self, argv: Sequence[str], *, check: bool = True) -> CommandResult:
        return self.login.run(ss.with_conf(argv, self.slurm_conf), check=check, timeout_s=60)

    def _listing(self, argv: Sequence[str]) -> str:
        """squeue's output; a job id Slurm has already forgotten lists nothing (not an error)."""
        result = self._slurm(argv, check=False)
        if not result.ok and "Invalid job id" not in result.stderr:
            raise CommandFailed(f"`{argv[0]}` failed on {self.login.name} (exit {result.exit_code})",
                                host=self.login.name, command=" ".join(argv), exit_code=result.exit_code,
                                stderr=result.stderr, hint="is slurmctld up? `scontrol ping` says")
        return result.stdout if result.ok else ""

    def _queue(self, job_id: str) -> ss.QueueState | None:
        return ss.parse_queue(self._listing(["squeue", "-h", "-j", job_id, "-o", "%T|%r|%N"]))

    def _steps(self, job_id: str) -> dict[str, tuple[str, str]]:
        return ss.parse_steps(self._listing(["squeue", "-h", "-s", "-j", job_id, "-o", "%i|%j|%N"]))

    def _hostnames(self, nodelist: str) -> tuple[str, ...]:
        return tuple(self._slurm(["scontrol", "show", "hostnames", nodelist]).stdout.split())

    def _addresses(self, nodes: tuple[str, ...]) -> tuple[str, ...]:
        known = ss.parse_node_addresses(self._slurm(["scontrol", "show", "node", "-o", ",".join(nodes)]).stdout)
        return tuple(known.get(node, node) for node in nodes)

    def _job_evidence(self, job_id: str) -> list[str]:
        fields = ss.parse_fields(self._slurm(["scontrol", "show", "job", "-o", job_id], check=False).stdout)
        keys = ("JobState", "Reason", "Partition", "NumNodes", "TRES", "TimeLimit", "ReqNodeList", "Account", "QOS")
        return [f"{key}={fields[key]}" for key in keys if key in fields]


class SlurmNode(LogElsewhere):
    """One node of a running server job, as its Server sees it: processes through ``srun``, the log on login."""

    def __init__(self, target: SlurmTarget, job: SlurmJob, rank: int) -> None:
        self.target = target
        self.log_host = target.login
        self.job = job
        self.rank = rank
        node = job.nodes[rank]
        self._shell = target.login.inside(ss.probe_prefix(job.job_id, node, target.slurm_conf), name=self.name,
                                          address=job.addresses[rank])

    @property
    def name(self) -> str:
        return f"{self.job.nodes[self.rank]} (slurm job {self.job.ident})"

    @property
    def address(self) -> str:
        return self.job.addresses[self.rank]

    def __repr__(self) -> str:
        return f"SlurmNode({self.name!r})"

    def is_alive(self, handle: ProcessHandle, /) -> bool:
        return self.target.job_alive(self.job)

    def stop(self, handle: ProcessHandle, /, *, grace_s: float = 10.0) -> StopReport:
        """``scancel`` the job (or step), verified gone from the queue with no step left; idempotent."""
        already, hard, elapsed = self.target.cancel(self.job, grace_s=grace_s)
        return StopReport(self.name, handle.pid, already, hard, elapsed_s=elapsed)

    def process_tree(self, pid: int, /) -> list[ProcessInfo]:
        """Read on the node, through an ``srun --overlap`` step of the same job."""
        return self._shell.process_tree(pid)

    def port_holder(self, port: int, /) -> tuple[int, str] | None:
        return self._shell.port_holder(port)
