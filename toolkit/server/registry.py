"""The launch registry on each host: record a launch, forget it at stop, list what outlived its driver.

The shell around :mod:`toolkit.host.launches` (record format, verdicts). What a ``kill -9`` of a
driver left is listed by :func:`verdicts` (``python -m toolkit ps``) and stopped by
:func:`stop_recorded` (``python -m toolkit stop --all-mine``) with the process-group stop of ``Server.stop``.

>>> [v.status for v in verdicts(Host.local()) if v.record.pid == 0]
[]
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from toolkit.host import launches, procs
from toolkit.host.host import Host, ProcessHandle, StopReport
from toolkit.host.launches import LaunchRecord, Owner, Verdict
from toolkit.host.place import Place
from toolkit.server import exit_guard
from toolkit.server.spec import ServerSpec

__all__ = ["this_driver", "register", "forget", "verdicts", "orphan_holding", "stop_recorded", "explain",
           "stop_hint", "age_s", "leftovers"]


def _local_ticks(pid: int) -> int | None:
    try:
        return launches.self_ticks(Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def this_driver() -> Owner:
    """This Python process, as a record names its owner."""
    return Owner(socket.gethostname(), os.getpid(), _local_ticks(os.getpid()))


def register(place: Place, handle: ProcessHandle, spec: ServerSpec, *, key: int, stop: Callable[[], object],
             outlive: bool = False) -> LaunchRecord:
    """Record the launch on its host and, unless ``outlive``, stop it when this driver ends; a record
    that cannot be written stops the server (one nobody can find later is what this prevents)."""
    if not outlive:
        exit_guard.hold(key, stop)
    try:
        record = LaunchRecord(pid=handle.pid, start_ticks=handle.start_ticks, description=spec.describe(),
                              port=spec.port, log_path=handle.log_path, host=place.name, owner=this_driver(),
                              started_at=handle.started_at, outlive=outlive)
        place.run(launches.write_script(record))
        return record
    except BaseException:
        exit_guard.release(key)
        stop()
        raise


def forget(place: Place, record: LaunchRecord, key: int) -> None:
    """The server was stopped: drop its record and its exit hook. Never raises (a stop must finish)."""
    exit_guard.release(key)
    with contextlib.suppress(Exception):  # a stale record is cleaned by the next listing
        place.run(launches.remove_script([launches.record_name(record)]), check=False, timeout_s=30)


def verdicts(host: Host, *, clean: bool = True) -> list[Verdict]:
    """Every recorded server on ``host`` with its status now (two round trips); exited ones' records go."""
    listing = launches.parse_listing(host.run(launches.list_script()).stdout)
    records = [(name, record) for name, record in listing if record is not None]
    table = procs.parse_process_table(host.run(procs.PROCESS_TABLE_SCRIPT).stdout) if records else {}
    groups = [(row.pid, row.pgid, row.start_ticks, row.alive) for row in table.values()]  # a leaderless group counts
    machine = socket.gethostname()
    found, stale = [], [name for name, record in listing if record is None]
    for name, record in records:
        row = table.get(record.pid)
        owner_ticks = _local_ticks(record.owner.pid) if record.owner.machine == machine else None
        seen = launches.verdict(record, server_ticks=row.start_ticks if row is not None and row.alive else None,
                                owner_ticks=owner_ticks, this_machine=machine,
                                group_left=launches.group_members(record, groups))
        (stale.append(name) if seen.status == "gone" else found.append(seen))
    if clean and stale:
        host.run(launches.remove_script(stale), check=False)
    return sorted(found, key=lambda v: v.record.started_at)


def orphan_holding(host: Host, pid: int) -> Verdict | None:
    """The recorded server of this user whose process group holds ``pid`` (the port holder), if any."""
    if pid <= 0:
        return None
    recorded = verdicts(host, clean=False)
    if not recorded:
        return None
    table = procs.parse_process_table(host.run(procs.PROCESS_TABLE_SCRIPT).stdout)
    for seen in recorded:
        members = {row.pid for row in procs.survivors(table, procs.plan_stop(table, seen.record.pid,
                                                                              seen.record.start_ticks))}
        if pid in members:
            return seen
    return None


def explain(seen: Verdict) -> str:
    """`the server 'sim EAGLE3' this user launched at 12:00:01 (pid 42); its driver (...) is gone`."""
    record = seen.record
    when = time.strftime("%H:%M:%S", time.localtime(record.started_at))
    mine = " by this process" if record.owner == this_driver() else ""
    return f"the server '{record.description}' this user launched{mine} at {when} (pid {record.pid}); {seen.why}"


def stop_hint(seen: Verdict, host: Host) -> str:
    """The one command that stops a recorded server, or what to do when its driver still runs."""
    where = "" if host.is_local else f" --host {host.name}"
    command = f"`python -m toolkit stop {seen.record.pid}{where}`"
    if seen.status == "running":
        return (f"{'call server.stop() on it' if seen.record.owner == this_driver() else 'its driver still runs: stop it there'}"
                f", or {command}; or choose another port")
    return f"stop it with {command} (or every orphan: `python -m toolkit stop --all-mine{where}`), or choose another port"


def stop_recorded(host: Host, pids: Sequence[int] = (), *, statuses: Sequence[str] = ("orphan",),
                  grace_s: float = 10.0) -> list[StopReport]:
    """Stop recorded servers of ``host``: those with these pids (any status), else those with these statuses."""
    reports = []
    for seen in verdicts(host):
        chosen = (seen.record.pid in pids) if pids else (seen.status in statuses)
        if not chosen or seen.status == "unverified":  # its pid may be another's process now: never signalled
            continue
        record = seen.record
        handle = ProcessHandle(host.name, record.pid, record.log_path, record.description, record.started_at,
                               record.start_ticks)
        reports.append(host.stop(handle, grace_s=grace_s))
        host.run(launches.remove_script([launches.record_name(record)]), check=False)
    return reports


def leftovers(host: Host) -> pd.DataFrame:
    """The servers of this user on ``host`` whose driver is gone (after a ``kill -9`` or a dead kernel).

    Stop them with ``python -m toolkit stop --all-mine`` (``--host user@h:port`` for SSH).

    >>> leftovers(Host.local()).columns.tolist()[:4]
    ['host', 'pid', 'port', 'server']
    """
    rows = [{"host": host.name, "pid": v.record.pid, "port": v.record.port, "server": v.record.description,
             "age_s": round(age_s(v.record), 1), "log": v.record.log_path, "owner": v.record.owner.describe(),
             "why": v.why} for v in verdicts(host) if v.status == "orphan"]
    return pd.DataFrame(rows, columns=["host", "pid", "port", "server", "age_s", "log", "owner", "why"])


def age_s(record: LaunchRecord) -> float:
    """Seconds since the server was launched."""
    return max(time.time() - record.started_at, 0.0)
