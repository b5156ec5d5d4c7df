"""The launch registry as data: one record per server, and which records are orphans.

Pure. Every launch writes a small JSON file on its host naming the server's process (pid *and*
start token, so a recycled pid is never taken for it), port, log and owner (the driver's machine,
pid, start token); :mod:`toolkit.server.registry` moves the files, this module judges them. Why: a
driver killed with ``kill -9`` runs no exit hook, and an 8-GPU server left behind holds every GPU's
memory until someone finds it by hand.

>>> owner = Owner("box", 4000, 17)
>>> rec = LaunchRecord(pid=4242, start_ticks=900, description="sim EAGLE3", port=30000,
...                    log_path="/logs/sim.log", host="localhost", owner=owner, started_at=0.0)
>>> decode_record(encode_record(rec)) == rec
True
>>> verdict(rec, server_ticks=900, owner_ticks=None, this_machine="box").status
'orphan'
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

from toolkit.host.shell import check_word, quote

__all__ = [
    "REGISTRY_DIR", "Owner", "LaunchRecord", "Verdict", "Status", "encode_record", "decode_record",
    "record_name", "verdict", "group_members", "write_script", "list_script", "parse_listing",
    "remove_script", "self_ticks", "LAUNCH_MARKER", "marked_script", "parse_marked",
]

#: The per-user registry on each host, expanded by the host's shell (XDG's cache directory).
REGISTRY_DIR = '"${XDG_CACHE_HOME:-$HOME/.cache}/toolkit/servers"'

_FORMAT = 1

#: running: its driver still runs; orphan: the driver is gone; kept: launched with outlive=True;
#: elsewhere: the driver ran on another machine, which cannot be asked; gone: nothing of the server runs;
#: unverified: no start token was recorded, so its pid may name another process now: never signalled.
Status = Literal["running", "orphan", "kept", "elsewhere", "gone", "unverified"]


@dataclass(frozen=True)
class Owner:
    """The driver process that launched a server: its machine, pid and start token."""

    machine: str
    pid: int
    start_ticks: int | None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.machine}"


@dataclass(frozen=True)
class LaunchRecord:
    """One launched server, as recorded on its host. ``description`` is already redacted."""

    pid: int
    start_ticks: int | None
    description: str
    port: int
    log_path: str
    host: str
    owner: Owner
    started_at: float
    outlive: bool = False


@dataclass(frozen=True)
class Verdict:
    """What a record means now: its status and why, in words for a table or an error."""

    record: LaunchRecord
    status: Status
    why: str


def record_name(record: LaunchRecord) -> str:
    """The record's file name: pid and start token name a process for its whole life."""
    return f"{record.pid}-{record.start_ticks if record.start_ticks is not None else 0}.json"


def encode_record(record: LaunchRecord) -> str:
    """One line of JSON (the file's whole content)."""
    return json.dumps({"format": _FORMAT, **asdict(record)}, sort_keys=True)


def decode_record(text: str) -> LaunchRecord | None:
    """The record in ``text``; None for anything that is not one (half-written, foreign, newer format)."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            return None
        owner = data["owner"]
        return LaunchRecord(
            pid=int(data["pid"]), start_ticks=_int_or_none(data["start_ticks"]),
            description=str(data["description"]), port=int(data["port"]), log_path=str(data["log_path"]),
            host=str(data["host"]), started_at=float(data["started_at"]), outlive=bool(data.get("outlive", False)),
            owner=Owner(str(owner["machine"]), int(owner["pid"]), _int_or_none(owner["start_ticks"])),
        )
    except (ValueError, TypeError, KeyError):
        return None


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(str(value))


def verdict(record: LaunchRecord, *, server_ticks: int | None, owner_ticks: int | None, this_machine: str,
            group_left: int = 0) -> Verdict:
    """Is the server alive, and is its owner? ``*_ticks``: the start token of that pid now (None: no such process);
    ``group_left``: live processes of its process group other than the leader (:func:`group_members`).

    A pid whose start token differs from the record's is another process: the recorded leader is gone, but
    the server is gone only when its group is empty too (issue 25: after the OOM killer took the leader, a
    surviving rank was missed and its record deleted).
    """
    owner = record.owner
    leader_gone = server_ticks is None or (record.start_ticks is not None and server_ticks != record.start_ticks)
    if leader_gone and not group_left:
        return Verdict(record, "gone", "the server exited")
    if record.start_ticks is None:
        return Verdict(record, "unverified", f"its start token was not recorded, so pid {record.pid} may be another "
                                             f"process now: check it (ps -o pid,lstart,args -p {record.pid}) and stop "
                                             "it by hand")
    left = f"; its leader (pid {record.pid}) is gone, {group_left} process(es) of its group still run" if leader_gone else ""
    if record.outlive:
        return Verdict(record, "kept", f"launched with outlive=True by {owner.describe()}{left}")
    if owner.machine != this_machine:
        return Verdict(record, "elsewhere", f"launched from {owner.machine}, which this session cannot ask{left}")
    if owner_ticks is not None and (owner.start_ticks is None or owner_ticks == owner.start_ticks):
        return Verdict(record, "running", f"its driver ({owner.describe()}) still runs{left}")
    return Verdict(record, "orphan", f"its driver ({owner.describe()}) is gone{left}")


def group_members(record: LaunchRecord, groups: Iterable[tuple[int, int, int, bool]]) -> int:
    """How many live processes other than the leader are in the record's process group.

    ``groups``: ``(pid, pgid, start_ticks, alive)`` of every process on the host. The kernel never reuses a
    pid while a process group of that id exists, so a member started no earlier than the leader is ours.
    """
    since = record.start_ticks
    return sum(1 for pid, pgid, ticks, alive in groups
               if alive and pgid == record.pid and pid != record.pid and since is not None and ticks >= since)


def write_script(record: LaunchRecord) -> str:
    """Bash that writes the record atomically into a private registry directory."""
    name = quote(record_name(record))
    body = quote(encode_record(record))
    return (f"d={REGISTRY_DIR}; umask 077; mkdir -p -- \"$d\" && chmod 700 -- \"$d\" && "
            f"printf '%s\\n' {body} > \"$d/.{name}.tmp\" && mv -f -- \"$d/.{name}.tmp\" \"$d/\"{name}")


def list_script() -> str:
    """Bash that prints ``NAME<TAB>JSON`` for every record (nothing when the registry is absent)."""
    return (f"d={REGISTRY_DIR}; [ -d \"$d\" ] || exit 0; for f in \"$d\"/*.json; do [ -f \"$f\" ] || continue; "
            "IFS= read -r l < \"$f\"; printf '%s\\t%s\\n' \"${f##*/}\" \"$l\"; done")


def parse_listing(text: str) -> list[tuple[str, LaunchRecord | None]]:
    """``(file name, record or None)`` per line of :func:`list_script` output."""
    rows = (line.partition("\t") for line in text.splitlines())
    return [(name, decode_record(body)) for name, tab, body in rows if tab and name.endswith(".json")]


def remove_script(names: Iterable[str]) -> str:
    """Bash that removes these records (a missing one is not an error)."""
    targets = " ".join(f"\"$d/\"{quote(n)}" for n in names if "/" not in n and n.endswith(".json"))
    return f"d={REGISTRY_DIR}; rm -f -- {targets}" if targets else "true"


def self_ticks(stat_text: str) -> int | None:
    """The start token (field 22 of proc(5)) in the text of a ``/proc/PID/stat`` file."""
    fields = stat_text.rpartition(")")[2].split()
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


#: The environment variable each launched server carries (``launch`` sets a fresh value): a helper that
#: double-forks into its own session leaves the process group and tree a stop plans from, but keeps its
#: environment, so a stop can still find it and say so (issue 25).
LAUNCH_MARKER = "TOOLKIT_LAUNCH"


def marked_script(marker: str) -> str:
    """Bash printing ``PID<TAB>ARGS`` of every process whose environment holds ``TOOLKIT_LAUNCH=marker``
    (one ``grep`` over ``/proc/*/environ``: only this user's processes are readable)."""
    word = quote(f"{LAUNCH_MARKER}={check_word(marker, what='the launch marker')}")
    return (f"for f in $(grep -l -s -z -x -F -e {word} /proc/[0-9]*/environ); do p=${{f#/proc/}}; p=${{p%/environ}}; "
            "printf '%s\t' \"$p\"; tr '\\0' ' ' < \"/proc/$p/cmdline\" 2>/dev/null; echo; done; true")


def parse_marked(text: str) -> list[tuple[int, str]]:
    """``(pid, args)`` per line of :func:`marked_script` output."""
    rows = (line.partition("\t") for line in text.splitlines())
    return [(int(pid), args.strip()) for pid, tab, args in rows if tab and pid.isdigit()]
