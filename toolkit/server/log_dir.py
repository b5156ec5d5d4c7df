"""The folder server logs go to: private to the user, made atomically, checked before every launch.

A log another user can read or swap is a leak and a lie (issue 20: whoever made ``/tmp/toolkit-logs``
first read every log, and a swapped log raised a fake CUDA OOM). The folder is per user, made 0700 in
one step, and :func:`check` refuses one that someone else can change; log files are 0600.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.errors import UnsafeLogDir
from toolkit.host.container import ContainerTarget
from toolkit.host.host import Host
from toolkit.host.place import Target
from toolkit.host.shell import quote, quote_path

__all__ = ["DEFAULT_LOG_DIR", "DirStat", "LogDirReport", "prepare", "check", "parse", "create_log_file"]

#: Where server logs go on the host unless ``log_dir`` says otherwise; ``{uid}`` is the user's id there.
DEFAULT_LOG_DIR = "/tmp/toolkit-logs-{uid}"

_ROOT_UID = 0
_STICKY = 0o1000
_GROUP_OTHER_WRITE = 0o022


@dataclass(frozen=True)
class DirStat:
    """One ``stat`` line: owner uid, mode bits (octal as stat prints them), file type, path."""

    uid: int
    mode: int
    kind: str
    path: str

    @classmethod
    def parse(cls, line: str) -> DirStat:
        uid, mode, rest = line.split(" ", 2)
        kind, _, path = rest.partition("|")
        return cls(int(uid), int(mode, 8), kind, path)


@dataclass(frozen=True)
class LogDirReport:
    """What the host said of the folder: who asks, the folder as named, and each folder of its real path."""

    uid: int
    directory: str
    named: DirStat  # the path as given (lstat: a link is reported as a link)
    chain: tuple[DirStat, ...]  # the real path, then each folder above it up to /


def _script(log_dir: str) -> str:
    # %u owner, %a octal mode (with the sticky bit), %F type, %n name; `|` cannot be in a type.
    stat = "stat -c '%u %a %F|%n' --"
    return "\n".join([
        "umask 077",
        "u=$(id -u)",
        f"t={quote_path(log_dir)}",
        "d=${t//'{uid}'/$u}",
        'mkdir -p -m 700 -- "$d" 2>/dev/null',
        'printf "%s\\n%s\\n" "$u" "$d"',
        f'{stat} "$d" || exit 3',
        'p=$(readlink -f -- "$d") || exit 3',
        f'while :; do {stat} "$p" || exit 3; [ "$p" = / ] && break; p=$(dirname -- "$p"); done',
    ])


def parse(text: str) -> LogDirReport:
    """The report from the output of :func:`prepare`'s script."""
    lines = text.splitlines()
    uid, directory, named, *chain = lines
    return LogDirReport(int(uid), directory, DirStat.parse(named), tuple(DirStat.parse(line) for line in chain))


def _whose(uid: int) -> str:
    return "root" if uid == _ROOT_UID else f"uid {uid}"


def check(report: LogDirReport, host: str) -> None:
    """Raise UnsafeLogDir unless only this user (and root) can change what is in the folder."""
    me, named = report.uid, report.named
    where = f"log folder {report.directory} on {host}"
    fix = (f"remove it if nobody should own it (`rm -rf {quote(report.directory)}` as its owner or root), "
           "or pass log_dir= a folder of yours that only you can write (it is made with mode 0700)")
    if named.kind == "symbolic link" and named.uid not in (me, _ROOT_UID):
        raise UnsafeLogDir(f"{where} is a link made by {_whose(named.uid)}, not by you (uid {me}): "
                           "whoever made it chooses where your logs go", host=host, evidence=[_line(named)], hint=fix)
    if not report.chain:
        raise UnsafeLogDir(f"{where}: its real path could not be read", host=host, hint=fix)
    folder, *above = report.chain
    if folder.kind != "directory":
        raise UnsafeLogDir(f"{where} is a {folder.kind}, not a directory", host=host, evidence=[_line(folder)],
                           hint=fix)
    if folder.uid != me:
        raise UnsafeLogDir(f"{where} is owned by {_whose(folder.uid)}, not by you (uid {me}): its owner could "
                           "read your server logs and swap them", host=host, evidence=[_line(folder)], hint=fix)
    if folder.mode & _GROUP_OTHER_WRITE:
        raise UnsafeLogDir(f"{where} can be written by {_writers(folder.mode)} (mode {folder.mode:o}): they could "
                           "swap a log while the toolkit reads it", host=host, evidence=[_line(folder)],
                           hint=f"`chmod 700 {quote(folder.path)}` on the host, or pass another log_dir=")
    for parent in above:
        foreign = parent.uid not in (me, _ROOT_UID)
        open_to_all = parent.mode & _GROUP_OTHER_WRITE and not parent.mode & _STICKY
        if foreign or open_to_all:
            who = f"owned by {_whose(parent.uid)}" if foreign else f"writable by {_writers(parent.mode)}"
            raise UnsafeLogDir(f"{where} lies in {parent.path}, {who} (mode {parent.mode:o}): it could be renamed "
                               "and replaced", host=host, evidence=[_line(parent)],
                               hint="pass log_dir= a folder whose parents only you or root can change")


def _writers(mode: int) -> str:
    return " and ".join(who for who, bit in (("its group", 0o020), ("every user", 0o002)) if mode & bit)


def _line(stat: DirStat) -> str:
    return f"{stat.path}: {stat.kind}, owner {_whose(stat.uid)}, mode {stat.mode:o}"


def _writer(target: Target) -> Target | Host:
    """Where the log file is written: a new container's log is its client's output, on the host."""
    if isinstance(target, ContainerTarget) and target.container is None:
        return target.host
    return target


def prepare(target: Target, log_dir: str | None) -> str:
    """Make (if needed) and check the folder on ``target`` in one command; return its absolute path there."""
    place = _writer(target)
    template = place.expand_user(log_dir or DEFAULT_LOG_DIR).rstrip("/") or "/"
    result = place.run(_script(template), check=False)
    try:
        report = parse(result.stdout)
    except ValueError:
        raise UnsafeLogDir(f"the log folder {template} on {target.name} could not be made or read "
                           f"(exit {result.exit_code})", host=target.name,
                           evidence=result.stderr.strip().splitlines()[-4:],
                           hint="pass log_dir= a folder you can create on that host") from None
    check(report, target.name)
    return report.directory


def create_log_file(target: Target, path: str) -> None:
    """Make the (empty) log file readable by its owner only: the launch then writes into it."""
    _writer(target).run(f"umask 077 && : >> {quote_path(path)} && chmod 600 -- {quote_path(path)}")
