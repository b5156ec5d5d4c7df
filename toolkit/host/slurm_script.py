"""Slurm as data: the job a server launch submits, and what squeue and scontrol answer about it.

Pure: ``SlurmTarget`` runs these on the login node and hands back the text. Every word goes through
:mod:`toolkit.host.shell`, so any partition, path or option reaches Slurm as written (property-tested).

The job follows SGLang's Slurm recipe (docs/references/multi_node_deployment/multi_node.md,
"Multi-Node Inference on SLURM", checked on sglang main, 2026-12): one task per node
(``--ntasks-per-node=1``), ``--dist-init-addr`` from the first node of the job, the node rank
from ``SLURM_NODEID``. One fix: the recipe writes ``--node-rank "$SLURM_NODEID"`` on srun's
command line, where the *batch* shell expands it once, on node 0, so every node would claim
rank 0; here the task's own bash expands it on each node.

>>> request = SlurmRequest(partition="gpu", nodes=2, gpus_per_node=8, time="1:00:00")
>>> sbatch_argv(request, job_name="toolkit-x", log_path="/logs/x.log", workdir="/logs")[:4]
['sbatch', '--parsable', '--job-name=toolkit-x', '--output=/logs/x.log']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from toolkit.errors import InvalidFlag
from toolkit.host.procs import port_holder_script
from toolkit.host.shell import check_env_name, check_word, join, quote, quote_path

__all__ = [
    "SlurmRequest", "NodeFlags", "job_name", "QueueState", "ALIVE_STATES", "sbatch_argv", "batch_script",
    "task_path", "task_file", "step_argv", "task_script", "probe_prefix", "with_conf", "parse_job_id",
    "parse_queue", "parse_steps", "parse_node_addresses", "parse_fields", "pending_hint", "pid_path",
    "node_log_path",
]

#: States in which a job's (or step's) processes run; COMPLETING means they are being killed.
ALIVE_STATES = frozenset({"RUNNING", "CONFIGURING"})
_JOB_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class SlurmRequest:
    """What to ask Slurm for, in Slurm's own spelling (``time="1:00:00"``).

    ``options``: more ``sbatch`` options, one per item (``"--exclusive"``); ``srun_options``: more
    options of the server's step (``"--container-image=..."`` with pyxis); ``allocation``: run the
    server as a step of that existing job instead of submitting a new one.
    """

    partition: str | None = None
    nodes: int = 1
    gpus_per_node: int | None = None
    time: str | None = None
    account: str | None = None
    options: tuple[str, ...] = ()
    srun_options: tuple[str, ...] = ()
    allocation: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.nodes, int) or isinstance(self.nodes, bool) or self.nodes < 1:
            raise InvalidFlag(f"nodes must be a positive integer, not {self.nodes!r}")
        if self.gpus_per_node is not None and self.gpus_per_node < 0:
            raise InvalidFlag(f"gpus_per_node must be >= 0, not {self.gpus_per_node!r}")
        if self.allocation is not None and not re.fullmatch(r"\d+", str(self.allocation)):
            raise InvalidFlag(f"allocation must be a Slurm job id (digits), not {self.allocation!r}",
                              hint="the JOBID that salloc or squeue shows, e.g. allocation='4242'")
        for option in (*self.options, *self.srun_options):
            check_word(option, what="a Slurm option")
            if not option.startswith("-"):
                raise InvalidFlag(f"Slurm option {option!r} does not start with '-'",
                                  hint="pass one option per item, e.g. options=['--exclusive', '--qos=high']")
        if self.allocation is not None and self.options:
            raise InvalidFlag("options= are sbatch options, and an allocation submits no job",
                              hint="pass step options as srun_options=[...] when allocation= is set")

    def resource_options(self) -> list[str]:
        """The options both a job and a step take: nodes, tasks, GPUs, partition, time, account."""
        words = [f"--nodes={self.nodes}", "--ntasks-per-node=1"]
        if self.gpus_per_node is not None:
            words.append(f"--gpus-per-node={self.gpus_per_node}")
        for name, value in (("--partition", self.partition), ("--time", self.time), ("--account", self.account)):
            if value is not None:
                words.append(f"{name}={check_word(str(value), what=name)}")
        return words


@dataclass(frozen=True)
class NodeFlags:
    """SGLang's multi-node flags, filled in on each node: rank, and the first node's address:port."""

    dist_init_port: int
    dist_init_addr: str | None = None  # None: the first node's NodeAddr, read in the job
    bind_node_address: bool = False  # --host <this node's NodeAddr>: nodes that share one machine


@dataclass(frozen=True)
class QueueState:
    """One job or step as squeue prints it."""

    state: str
    reason: str
    nodelist: str

    @property
    def alive(self) -> bool:
        return self.state in ALIVE_STATES


def job_name(text: str) -> str:
    """A name squeue shows as it is: letters, digits, ``._-``."""
    return _JOB_NAME.sub("-", text).strip("-.")[:80] or "toolkit"


def with_conf(argv: Sequence[str], slurm_conf: str | None) -> str:
    """A Slurm client command line, with ``SLURM_CONF`` set when the cluster is not the default one."""
    line = join(argv)
    return f"SLURM_CONF={quote_path(slurm_conf)} {line}" if slurm_conf else line


def pid_path(log_path: str) -> str:
    """Where each task writes its pid: ``LOG.node<N>.pid`` (read on the login node)."""
    return f"{log_path}.node"


def node_log_path(log_path: str, rank: int) -> str:
    """Node ``rank``'s own log in a multi-node job: ``x.log`` -> ``x-node1.log``."""
    stem = log_path[:-4] if log_path.endswith(".log") else log_path
    return f"{stem}-node{rank}.log"


def sbatch_argv(request: SlurmRequest, *, job_name: str, log_path: str, workdir: str) -> list[str]:
    """``sbatch`` with every option on its command line (each word quoted once, by the caller's ``join``)."""
    return [
        "sbatch", "--parsable", f"--job-name={job_name}", f"--output={log_path}", "--open-mode=append",
        f"--chdir={workdir}", *request.resource_options(), *request.options,
    ]


def step_argv(request: SlurmRequest, *, job_name: str, node_logs: str | None, allocation: str | None) -> list[str]:
    """The ``srun`` that starts the server step: one task per node, all stopped if one fails."""
    words = ["srun"]
    if allocation is not None:  # partition, time and account belong to the allocation already
        words += [f"--jobid={allocation}", f"--job-name={job_name}", f"--nodes={request.nodes}"]
        if request.gpus_per_node is not None:
            words.append(f"--gpus-per-node={request.gpus_per_node}")
    words += ["--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    if node_logs is not None:
        words.append(f"--output={node_logs}")
    return [*words, *request.srun_options]


_NODE_ADDR = "scontrol show node \"$1\" 2>/dev/null | sed -n 's/.* NodeAddr=\\([^ ]*\\).*/\\1/p' | head -n 1"


def task_script(command: str, *, log_path: str, port: int | None, node_flags: NodeFlags | None,
                env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """The bash each task runs on its node: pid file, port check, then ``exec`` the server.

    ``$SLURM_NODEID`` and the node addresses are expanded here, by each task, on its node.
    A held port ends the task with a ``toolkit:`` line naming the holder, before any weight loads.
    """
    lines = [
        f"addr_of() {{ {_NODE_ADDR}; }}",
        f"printf '%s\\n' \"$$\" > {quote_path(pid_path(log_path))}\"$SLURM_NODEID\".pid",
    ]
    if port is not None:
        lines += [
            f"held=$({port_holder_script(port)}\n)",
            'if [ -n "$held" ]; then',
            "  who=; while read -r kind pid b64; do [ \"$kind\" = holder ] && who=\"$who${who:+, }pid $pid "
            "($(printf %s \"$b64\" | base64 -d 2>/dev/null | tr '\\0' ' ' | sed 's/ $//'))\"; done <<< \"$held\"",
            f"  echo \"toolkit: port {int(port)} on $SLURMD_NODENAME: address already in use, held by "
            "${who:-a process this user cannot see}; the server was not started\"",
            "  exit 98",
            "fi",
        ]
    if cwd is not None:
        lines.append(f"cd -- {quote_path(cwd)} || exit 1")
    for name, value in (env or {}).items():
        lines.append(f"export {quote(check_env_name(name) + '=' + check_word(value, what=f'the value of {name}'))}")
    tail = ""
    if node_flags is not None:
        if node_flags.dist_init_addr is not None:
            addr, init_port = node_flags.dist_init_addr, int(node_flags.dist_init_port)  # not the server's
            target = f"[{addr}]:{init_port}" if ":" in addr else f"{addr}:{init_port}"
            lines.append(f"dist_init={quote(target)}")
        else:
            lines += [
                'head=$(scontrol show hostnames "$SLURM_STEP_NODELIST" | head -n 1)',
                'head_addr=$(addr_of "$head")',
                f'dist_init="${{head_addr:-$head}}:{int(node_flags.dist_init_port)}"',
            ]
        tail = ' --node-rank "$SLURM_NODEID" --dist-init-addr "$dist_init"'
        if node_flags.bind_node_address:
            lines.append('node_addr=$(addr_of "$SLURMD_NODENAME")')
            tail += ' --host "${node_addr:-$SLURMD_NODENAME}"'
        lines.append('echo "toolkit: node $SLURM_NODEID of $SLURM_STEP_NUM_NODES ($SLURMD_NODENAME), '
                     'dist-init-addr $dist_init"')
    lines.append(command + tail)
    return "\n".join(lines)


def task_path(log_path: str) -> str:
    """Where the task's script is written, beside the log (``x.log`` -> ``x.task.sh``): every node reads it."""
    return log_path.removesuffix(".log") + ".task.sh"


def task_file(task: str) -> str:
    """The task script as a file each node runs with bash."""
    return "#!/bin/bash\n# Run by each task of the server's step, on its node (see toolkit/host/slurm_script.py).\n" + task + "\n"


def batch_script(step: Sequence[str], task_path: str, *, submitted: str) -> str:
    """The job's script: one ``srun`` of the task file; ``submitted`` (the sbatch line) is kept as a comment."""
    return "\n".join([
        "#!/bin/bash",
        "# Submitted by the toolkit as:",
        *(f"#   {line}" for line in submitted.splitlines()),
        "# One server task per node; each task fills in its own node rank.",
        f"exec {join(step)} bash {quote_path(task_path)}",
        "",
    ])


def probe_prefix(job: str, node: str, slurm_conf: str | None) -> list[str]:
    """The argv that runs bash on ``node`` inside job ``job``, beside the server (``--overlap``)."""
    words = ["srun", f"--jobid={job}", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}", "--quiet"]
    return ["env", f"SLURM_CONF={slurm_conf}", *words] if slurm_conf else words


# -- parsers -------------------------------------------------------------------------------
def parse_job_id(text: str) -> str:
    """The job id ``sbatch --parsable`` printed (``42`` or ``42;cluster``); ValueError if none."""
    for line in text.splitlines():
        first = line.strip().split(";", 1)[0]
        if first.isdigit():
            return first
    raise ValueError(f"no job id in {text!r}")


def parse_queue(text: str) -> QueueState | None:
    """``squeue -h -j J -o '%T|%r|%N'``: the job's state, or None once it left the queue."""
    rows = (line.strip().split("|") for line in text.splitlines())
    return next((QueueState(*parts) for parts in rows if len(parts) == 3 and parts[0]), None)


def parse_steps(text: str) -> dict[str, tuple[str, str]]:
    """``squeue -h -s -j J -o '%i|%j|%N'``: ``{step id: (step name, nodelist)}``."""
    rows = (line.strip().split("|") for line in text.splitlines())
    return {parts[0]: (parts[1], parts[2]) for parts in rows if len(parts) == 3 and parts[0]}


def parse_node_addresses(text: str) -> dict[str, str]:
    """``scontrol show node -o A B``: ``{node name: NodeAddr}``."""
    rows = map(parse_fields, text.splitlines())
    return {row["NodeName"]: row.get("NodeAddr", row["NodeName"]) for row in rows if "NodeName" in row}


def parse_fields(text: str) -> dict[str, str]:
    """``scontrol show job -o J``: its ``Key=Value`` words (values with spaces are cut; enough for states)."""
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


#: What to do about a job that stays pending, by Slurm's reason (squeue %r; slurm/slurm.h job_state_reason).
PENDING_HINTS = {
    "Resources": "the nodes or GPUs it needs are busy: wait longer (pending_timeout_s=...), or ask for fewer",
    "Priority": "jobs with a higher priority are ahead of it: wait longer (pending_timeout_s=...), or ask your "
                "admins about the partition's queue",
    "PartitionNodeLimit": "the partition cannot give that many nodes: lower nodes= or choose another partition "
                          "(`sinfo -o '%P %D %G'` lists them)",
    "PartitionTimeLimit": "time= is longer than the partition allows: shorten it (`sinfo -o '%P %l'`)",
    "ReqNodeNotAvail": "the nodes it may use are down, drained or reserved: `sinfo -R` says why",
    "BeginTime": "it was submitted to begin later (--begin): drop that option",
    "JobHeldUser": "it is held (--hold or scontrol hold): release it with `scontrol release JOBID`",
    "JobHeldAdmin": "an administrator holds it: ask them, or submit elsewhere",
    "Dependency": "it waits for another job (--dependency): drop that option or wait for that job",
}


def pending_hint(reason: str) -> str:
    """What to do about a job pending for ``reason``; account and QOS limits share one answer."""
    if reason in PENDING_HINTS:
        return PENDING_HINTS[reason]
    if reason.startswith(("Assoc", "QOS")):
        return "an account or QOS limit holds it: `sshare` and `sacctmgr show qos` show the limits; pick account= " \
               "or a --qos that has room"
    return "read Slurm's reason (`squeue -j JOBID -o %r`, `scontrol show job JOBID`), or raise pending_timeout_s"
