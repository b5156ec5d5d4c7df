"""Where processes run: this machine or an SSH host behind one `Host` API; Slurm jobs and containers beside it.

- `shell` (pure): quoting of every word and env value; `procs` (pure): process tables, trees, the stop plan.
- `ssh`: opening fabric connections with host keys checked; `transport`: one persistent remote bash per host
  (and bash through a prefix: `docker exec -i`, `srun --overlap`).
- `streams`: long-lived byte streams (a `tail -F` channel); `host`: `Host`; `group`: `HostGroup`.
- `placement` (pure): where a server ran; `place`: the `Place`/`Target` seam that `launch` speaks.
- `slurm_script` (pure) and `slurm`: `SlurmTarget`, a job or a step from a login host.
- `container_command` (pure) and `container`: `ContainerTarget`, docker or podman, exec or run.

Import from the modules (`from toolkit.host.host import Host`); this face stays empty so that a pure
module (`toolkit.host.shell`) can be imported where fabric is not installed (the CPU server's venv).
"""
