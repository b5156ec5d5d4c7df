"""Where processes run: this machine or an SSH host, behind one `Host` API.

- `shell` (pure): quoting of every word and env value; `procs` (pure): process tables, trees, the stop plan.
- `ssh`: opening fabric connections with host keys checked; `transport`: one persistent remote bash per host.
- `streams`: long-lived byte streams (a `tail -F` channel); `host`: `Host` and `HostGroup`.

Import from the modules (`from toolkit.host.host import Host`); this face stays empty so that a pure
module (`toolkit.host.shell`) can be imported where fabric is not installed (the CPU server's venv).
"""
