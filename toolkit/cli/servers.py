"""`python -m toolkit ps` and `python -m toolkit stop`: the servers this user launched on a host.

Every launch is recorded on its host (:mod:`toolkit.server.registry`); a driver killed with
``kill -9`` leaves its servers running, and these commands find and stop them::

    python -m toolkit ps [--host user@gpu-a:22]
    python -m toolkit stop --all-mine [--host user@gpu-a:22]    # every server whose driver is gone
    python -m toolkit stop 4242 [--host ...]                     # one recorded server, by pid
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from toolkit.errors import ToolkitError
from toolkit.host.host import Host
from toolkit.server import registry

__all__ = ["ps_main", "stop_main", "host_from"]


def _add_host(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default=None, help="user@host:port over SSH (default: this machine)")
    parser.add_argument("--ssh-config", default=None, help="ssh_config file (IdentityFile, UserKnownHostsFile, ...)")


def host_from(target: str | None, ssh_config: str | None = None) -> Host:
    """``user@host:port`` -> an SSH Host (host keys checked); None or ``localhost`` -> this machine."""
    if target in (None, "", "localhost"):
        return Host.local()
    user, at, hostname = str(target).rpartition("@")
    hostname, colon, port = (hostname, "", "") if hostname.count(":") > 1 else hostname.partition(":")  # IPv6: no port
    if colon and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"--host {target}: the port {port!r} is not a number 1-65535; write user@host or "
                         "user@host:PORT")
    return Host(hostname, user=user if at else None, port=int(port) if port else None, ssh_config=ssh_config)

def _host_or_none(args: argparse.Namespace) -> Host | None:
    """``--host`` as a Host, or None after one line on stderr saying what is wrong with it."""
    try:
        return host_from(args.host, args.ssh_config)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def _age(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def ps_main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``python -m toolkit ps``: one line per recorded server that still runs."""
    parser = argparse.ArgumentParser(prog="python -m toolkit ps", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_host(parser)
    args = parser.parse_args(argv)
    host = _host_or_none(args)
    if host is None:
        return 2
    try:
        found = registry.verdicts(host)
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not found:
        print(f"no recorded server of this user runs on {host.name}")
        return 0
    print(f"{'PID':>8}  {'STATUS':<9}  {'PORT':>5}  {'AGE':>7}  SERVER (WHY)")
    for seen in found:
        record = seen.record
        print(f"{record.pid:>8}  {seen.status:<9}  {record.port:>5}  {_age(registry.age_s(record)):>7}  "
              f"{record.description} ({seen.why}; log {record.log_path})")
    orphans = sum(seen.status == "orphan" for seen in found)
    if orphans:
        where = "" if host.is_local else f" --host {args.host}"
        print(f"\n{orphans} orphan(s): stop them with `python -m toolkit stop --all-mine{where}`")
    return 0


def stop_main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``python -m toolkit stop``: stop orphans (``--all-mine``) or recorded servers by pid."""
    parser = argparse.ArgumentParser(prog="python -m toolkit stop", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pids", nargs="*", type=int, help="pids of recorded servers (see `python -m toolkit ps`)")
    parser.add_argument("--all-mine", action="store_true", help="every recorded server whose driver is gone")
    parser.add_argument("--grace-s", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    _add_host(parser)
    args = parser.parse_args(argv)
    if not args.pids and not args.all_mine:
        parser.error("name the pids to stop, or pass --all-mine")
    host = _host_or_none(args)
    if host is None:
        return 2
    try:
        seen_now = registry.verdicts(host)
        unverified = [seen for seen in seen_now if seen.record.pid in args.pids and seen.status == "unverified"]
        if unverified:
            print(f"error: not stopped: {registry.explain(unverified[0])}", file=sys.stderr)
            return 1
        known = {seen.record.pid for seen in seen_now}
        unknown = [pid for pid in args.pids if pid not in known]
        if unknown:
            print(f"error: no recorded server of this user has pid {', '.join(map(str, unknown))} on {host.name}; "
                  "`python -m toolkit ps` lists them (other processes: stop them with kill)", file=sys.stderr)
            return 1
        reports = registry.stop_recorded(host, args.pids, grace_s=args.grace_s)
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for report in reports:
        how = "already gone" if report.already_stopped else (
            f"stopped {len(report.signalled)} process(es)" + (" (SIGKILL needed)" if report.sigkill_sent else ""))
        print(f"pid {report.pid} on {host.name}: {how}")
    if not reports:
        print(f"nothing to stop on {host.name}")
    return 0
