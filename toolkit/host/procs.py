"""Processes on a Linux host as data: the table, a server's tree, and the bash that reads them.

Pure: `Host` runs these scripts and hands their output back to the parsers. They read ``/proc``
with bash builtins and coreutils only: a bare GPU container may lack procps and iproute2.
Groups *and* trees: ``setsid`` makes the server lead its own group, but a rank that calls
``setsid`` itself escapes it, so the tree is captured before signalling. Zombies count as gone.

>>> table = parse_process_table("10 1 10 S 500\\n11 10 10 S 501\\n12 11 12 S 502\\n")
>>> [row.pid for row in descendants(table, 10)]
[10, 11, 12]
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from toolkit.host.shell import check_env_name, check_word, quote, quote_path

__all__ = [
    "ProcRow", "ProcessInfo", "StopPlan", "PROCESS_TABLE_SCRIPT", "stat_script", "parse_process_table",
    "parse_environ", "descendants", "plan_stop", "survivors", "kill_script", "signal_script",
    "process_tree_script", "parse_process_tree", "port_holder_script", "parse_port_holder", "quote_argv",
    "detach_script", "parse_detached", "stream_script", "timeout_script",
]

# Print "pid ppid pgid state starttime" for every process. Fields after "(comm) " start at
# field 3 of proc(5): $1=state $2=ppid $3=pgrp ... ${20}=starttime. `${l##*) }` strips a
# comm that itself contains ") ".
_STAT_LOOP = r"""for d in /proc/[0-9]*; do
  IFS= read -r l < "$d/stat" || continue
  p=${d#/proc/}; r=${l##*) }
  set -f; set -- $r; set +f
  BODY
done 2>/dev/null"""

_ROW = 'printf "%s %s %s %s %s\\n" "$p" "$2" "$3" "$1" "${20}"'
PROCESS_TABLE_SCRIPT = _STAT_LOOP.replace("BODY", _ROW)


def stat_script(pids: Iterable[int]) -> str:
    """Like :data:`PROCESS_TABLE_SCRIPT` for a few pids only (absent ones print nothing)."""
    paths = " ".join(f"/proc/{int(p)}" for p in pids) or "/proc/0"
    return _STAT_LOOP.replace("/proc/[0-9]*", paths).replace("BODY", _ROW)


@dataclass(frozen=True)
class ProcRow:
    """One line of the process table. ``(pid, start_ticks)`` names a process even after pid reuse."""

    pid: int
    ppid: int
    pgid: int
    state: str
    start_ticks: int

    @property
    def alive(self) -> bool:
        """False for zombies (Z) and dead tasks (X): exited, only waiting to be reaped."""
        return self.state not in ("Z", "X")

    @property
    def identity(self) -> tuple[int, int]:
        return (self.pid, self.start_ticks)


@dataclass(frozen=True)
class ProcessInfo:
    """A process of a server's tree. ``environ`` is what it was *exec'd* with (``/proc/PID/environ``);
    ``error`` says why a part could not be read (``environ`` is then ``None``)."""

    host: str
    pid: int
    ppid: int
    cmdline: tuple[str, ...]
    environ: Mapping[str, str] | None
    error: str | None = None
    state: str = "?"


@dataclass(frozen=True)
class StopPlan:
    """What a stop must make disappear: known processes and the groups to signal."""

    members: frozenset[tuple[int, int]]
    pgids: frozenset[int]


def parse_process_table(text: str) -> dict[int, ProcRow]:
    """Parse the output of :data:`PROCESS_TABLE_SCRIPT`; malformed lines are skipped."""
    table: dict[int, ProcRow] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 5 or not all(p.isdigit() for i, p in enumerate(parts) if i != 3):
            continue
        pid, ppid, pgid, state, start = parts
        table[int(pid)] = ProcRow(int(pid), int(ppid), int(pgid), state, int(start))
    return table


def descendants(table: Mapping[int, ProcRow], root: int) -> list[ProcRow]:
    """``root`` and every process below it (by parent pid), breadth first; [] if root is absent."""
    if root not in table:
        return []
    children: dict[int, list[int]] = {}
    for row in table.values():
        children.setdefault(row.ppid, []).append(row.pid)
    order, queue, seen = [], [root], {root}
    while queue:
        pid = queue.pop(0)
        order.append(table[pid])
        for child in sorted(children.get(pid, ())):
            if child not in seen:
                seen.add(child)
                queue.append(child)
    return order


def plan_stop(table: Mapping[int, ProcRow], pid: int, start_ticks: int | None = None) -> StopPlan:
    """Everything a stop of the group led by ``pid`` must end, captured before any signal. A ``pid`` that
    now names another process means our group is gone: no pid is reused while its process group exists."""
    leader = table.get(pid)
    if leader is not None and start_ticks is not None and leader.start_ticks != start_ticks:
        return StopPlan(frozenset(), frozenset())
    tree = descendants(table, pid)
    pgids = {pid} | {row.pid for row in tree if row.pgid == row.pid}  # escaped group leaders
    members = {row.identity for row in tree} | {row.identity for row in table.values() if row.pgid in pgids}
    return StopPlan(frozenset(members), frozenset(pgids))


def survivors(table: Mapping[int, ProcRow], plan: StopPlan) -> tuple[ProcRow, ...]:
    """Live processes of the plan now: known members, members of its groups, and their children."""
    found = {row.pid for row in table.values() if row.identity in plan.members or row.pgid in plan.pgids}
    grew = True
    while grew:  # children forked during shutdown (reparented or not) belong to the stop too
        extra = {row.pid for row in table.values() if row.ppid in found and row.pid not in found}
        found |= extra
        grew = bool(extra)
    return tuple(sorted((table[p] for p in found if table[p].alive), key=lambda row: row.pid))


def kill_script(signal: str, pids: tuple[int, ...], pgids: frozenset[int]) -> str:
    """``kill`` every group and pid; a target that already exited is not an error."""
    targets = [f"-{g}" for g in sorted(pgids) if g > 1] + [str(p) for p in pids if p > 1]
    if not targets:
        return "true"
    return f"kill -s {signal} -- {' '.join(targets)} 2>/dev/null; true"


def signal_script(signal: str, pids: tuple[int, ...], pgids: frozenset[int], *, settle_s: float) -> str:
    """:func:`kill_script`, a wait on the host (up to ``settle_s``) for those pids, then the table:
    one round trip per signal, not three (a server that exits 0.1 s after SIGTERM is seen gone at once)."""
    paths = " ".join(f"/proc/{int(p)}" for p in pids if p > 1) or "/proc/0"
    rounds = max(int(settle_s / 0.02), 0)
    wait = (f"for ((i = 0; i < {rounds}; i++)); do live=; for d in {paths}; do IFS= read -r l < \"$d/stat\" || continue; "
            'case ${l##*) } in Z*|X*) ;; *) live=1;; esac; done 2>/dev/null; [ -z "$live" ] && break; sleep 0.02; done')
    return f"{kill_script(signal, pids, pgids)}\n{wait}\n{PROCESS_TABLE_SCRIPT}"


def process_tree_script(pid: int) -> str:
    """Bash printing ``pid ppid state cmdline-b64 environ-b64`` (tab-separated) for a tree, in one round trip;
    an unreadable field is ``!`` plus the reason (``!Permission denied``)."""
    collect = _STAT_LOOP.replace("BODY", 'st[$p]=$1; pp[$p]=$2; kids[$2]+=" $p"')
    return f"""declare -A st pp kids
{collect}
root={int(pid)}
if [[ -z ${{st[$root]:-}} ]]; then printf '%s\\t0\\t?\\t!gone\\t!gone\\n' "$root"; exit 0; fi
q=($root)
while ((${{#q[@]}})); do
  p=${{q[0]}}; q=("${{q[@]:1}}")
  c=$(base64 -w0 "/proc/$p/cmdline" 2>&1) || c="!${{c##*: }}"
  e=$(base64 -w0 "/proc/$p/environ" 2>&1) || e="!${{e##*: }}"
  printf '%s\\t%s\\t%s\\t%s\\t%s\\n' "$p" "${{pp[$p]}}" "${{st[$p]}}" "${{c:--}}" "${{e:--}}"
  q+=(${{kids[$p]:-}})
done"""


def _decode(field: str) -> tuple[bytes | None, str | None]:
    if field == "-":
        return b"", None
    if field.startswith("!"):
        return None, field[1:]
    try:
        return base64.b64decode(field, validate=True), None
    except (binascii.Error, ValueError):
        return None, "unreadable output"


def _split_cmdline(raw: bytes) -> tuple[str, ...]:
    """Split ``/proc/PID/cmdline`` exactly (one NUL ends each word, so empty words survive); a title
    (setproctitle, ``VLLM::EngineCore``) NUL-padded over the old argv reads as the title alone."""
    if not raw:
        return ()
    words = tuple(word.decode("utf-8", "replace") for word in raw.removesuffix(b"\0").split(b"\0"))
    return words[:1] if len(words) >= 3 and words[0] and not any(words[1:]) else words


def _why(pid: int, what: str, reason: str) -> str:
    if reason == "gone" or "No such file" in reason or "No such process" in reason:
        return f"process {pid} does not exist (it exited, or never started)"
    if "Permission denied" in reason:
        return (
            f"permission denied reading /proc/{pid}/{what}: the process belongs to another user; "
            "connect as that user or as root"
        )
    return f"/proc/{pid}/{what} could not be read: {reason}"


def parse_environ(raw: bytes) -> dict[str, str]:
    """``/proc/PID/environ`` as a mapping; only well-formed ``KEY=VALUE`` entries count (setproctitle
    overwrites the start of this memory: ``toolkit.moves.envcheck.survivors``).

    >>> parse_environ(b"A=1\\0B=x=y\\0")
    {'A': '1', 'B': 'x=y'}
    >>> parse_environ(b"VLLM::EngineCore\\0\\0\\0")
    {}
    """
    environ = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep and key and "\x00" not in key and ":" not in key and " " not in key:
            environ[key] = value
    return environ


def parse_process_tree(text: str, *, host: str) -> list[ProcessInfo]:
    """Parse :func:`process_tree_script` output into :class:`ProcessInfo` records."""
    infos = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 5 or not parts[0].isdigit():
            continue
        pid, ppid, state = int(parts[0]), int(parts[1]) if parts[1].isdigit() else 0, parts[2]
        raw_cmd, cmd_err = _decode(parts[3])
        raw_env, env_err = _decode(parts[4])
        cmdline = _split_cmdline(raw_cmd or b"")
        environ = None if raw_env is None else parse_environ(raw_env)
        error = None
        if cmd_err is not None:
            error = _why(pid, "cmdline", cmd_err)
        elif env_err is not None:
            error = _why(pid, "environ", env_err)
        elif state in ("Z", "X"):
            error = f"process {pid} is a zombie: it exited and waits to be reaped by its parent"
        infos.append(ProcessInfo(host, pid, ppid, cmdline, environ, error, state))
    return infos


def port_holder_script(port: int) -> str:
    """Bash printing ``listen INODE`` for a TCP listener on ``port`` and ``holder PID CMDLINE-B64``, from
    ``/proc/net/tcp{,6}`` (0A = LISTEN) and ``/proc/*/fd``: no ``ss``, and no root for our own processes."""
    return f"""inodes=$(awk -v p=":{int(port):04X}" '$4 == "0A" && substr($2, length($2) - 4) == p {{ print $10 }}' \\
  /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u)
for i in $inodes; do
  echo "listen $i"
  for f in $(find /proc/[0-9]*/fd -maxdepth 1 -lname "socket:\\[$i\\]" 2>/dev/null); do
    p=${{f#/proc/}}; p=${{p%%/*}}
    echo "holder $p $(base64 -w0 /proc/$p/cmdline 2>/dev/null)"
  done
done"""


def parse_port_holder(text: str) -> tuple[int, str] | None:
    """``(pid, command line)`` of the lowest pid holding the listener (the parent of workers forked after
    ``bind``); ``(0, why)`` when something listens but this user cannot see which process."""
    listening, holders = False, []
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "listen":
            listening = True
        elif kind == "holder":
            pid, _, b64 = rest.partition(" ")
            raw, _ = _decode(b64 or "-")
            holders.append((int(pid), quote_argv(_split_cmdline(raw or b""))))
    if holders:
        return min(holders)
    if listening:
        return (0, "a process this user cannot see (connect as root to name it)")
    return None


def quote_argv(argv: Iterable[str]) -> str:
    """A command line for humans, quoted so that it can be pasted into a shell."""
    return " ".join(quote(word) for word in argv) or "?"


def detach_script(command: str, *, log_path: str, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> str:
    """Bash that starts ``command`` detached and prints ``PID STARTTIME``.

    ``setsid`` makes it lead a new session and group (no SIGHUP when SSH goes; one signal reaches its
    children); with job control off a background job never leads a group, so ``$!`` is the leader itself.
    """
    log_dir = log_path.rsplit("/", 1)[0] if "/" in log_path.lstrip("/") else ""
    lines = ["set +m"]
    if log_dir:
        lines.append(f"mkdir -p -- {quote_path(log_dir)} || exit 1")
    if cwd is not None:
        lines.append(f"cd -- {quote_path(cwd)} || exit 1")
    assignments = "".join(
        f"{quote(check_env_name(k) + '=' + check_word(v, what=f'environment value of {k}'))} "
        for k, v in (env or {}).items())
    prefix = f"env {assignments}" if assignments else ""
    lines += [f"setsid nohup {prefix}bash -c {quote(command)} </dev/null >{quote_path(log_path)} 2>&1 &",
              "p=$!",
              'if IFS= read -r l < "/proc/$p/stat"; then r=${l##*) }; set -f; set -- $r; echo "$p ${20}"; '
              'else echo "$p"; fi 2>/dev/null']
    return "\n".join(lines)


def parse_detached(text: str) -> tuple[int, int | None]:
    """``(pid, start_ticks)`` from :func:`detach_script` output; ValueError if there is no pid."""
    words = text.split()
    if not words or not words[0].isdigit():
        raise ValueError(f"no pid in {text!r}")
    ticks = int(words[1]) if len(words) > 1 and words[1].isdigit() else None
    return int(words[0]), ticks


def stream_script(command: str) -> str:
    """Bash that runs ``command`` and ends its group when our channel closes.

    Closing an SSH channel does not signal a command without a pty (a ``tail -F`` would live forever):
    a watcher reads our never-written stdin, and its EOF ends the command's process group.
    """
    return f"""exec 3<&0
setsid bash -c {quote(command)} </dev/null 2>&1 &
p=$!
( while IFS= read -r -u 3 _; do :; done; kill -s TERM -- -$p $p ) </dev/null >/dev/null 2>&1 &
w=$!
wait $p
rc=$?
kill $w 2>/dev/null
exit $rc"""


def timeout_script(command: str, timeout_s: float) -> str:
    """``command`` under coreutils ``timeout``: the host itself ends it (exit 124), group and all."""
    return f"timeout -k 2 {max(timeout_s, 0.001):.3f} bash -c {quote(command)}"
