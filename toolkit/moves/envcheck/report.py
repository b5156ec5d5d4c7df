"""Expected versus actual environment, one row per process and variable: the report, pure.

In the EAGLE-3 investigation NCCL variables were "propagated to the TP worker processes" and ruled
out, which is only sound if each worker's environment was read. An ``overridden`` row's ``reason``
names the engine release, condition and source line of the write; NCCL's own echoes are the authority.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import pandas as pd

from toolkit.moves.envcheck.nccl import nccl_env_frame
from toolkit.moves.envcheck.overrides import override_reason, unseen_writes
from toolkit.moves.envcheck.roles import ProcessLike, ProcessRole, Role, classify_tree
from toolkit.moves.envcheck.survivors import OVERWRITTEN, Surviving, overwritten, surviving_environ

__all__ = ["EnvReport", "STATUS_CODES", "check_env"]

# The summary names the most telling finding first.
_SEVERITY = {"overridden": 3, "missing": 2, "unreadable": 1, "ok": 0}

STATUS_CODES: Mapping[str, int] = {"ok": 0, "overridden": 1, "missing": 2, "unreadable": 3}
_FRAME_COLUMNS = ["host", "pid", "ppid", "role", "engine", "rank", "process", "variable", "expected",
                  "actual", "status", "reason", "source"]
_ROLE_ORDER = {role: i for i, role in enumerate(Role)}


@dataclass(frozen=True, eq=False)
class EnvReport:
    """Expected versus actual environment, one row per (process, variable).

    ``source`` says what decided a row: ``proc`` (its own ``/proc/PID/environ``) or, for a process the
    engine renamed, ``NCCL echo``, ``sibling PID`` or ``parent PID`` (:mod:`.survivors`).
    """

    frame: pd.DataFrame
    expected: tuple[tuple[str, str | None], ...]
    nccl: pd.DataFrame | None = None
    release: str | None = None  # the engine release the reasons were read for ("0.5.23")
    notes: tuple[str, ...] = ()  # what /proc cannot show, for this release

    def problems(self) -> pd.DataFrame:
        """The rows that are not ``ok``."""
        return self.frame[self.frame["status"] != "ok"].reset_index(drop=True)

    @property
    def ok(self) -> bool:
        nccl_ok = self.nccl is None or bool((self.nccl["status"] == "ok").all())
        return bool((self.frame["status"] == "ok").all()) and nccl_ok

    def by_rank(self) -> pd.DataFrame:
        """Variable x process table of actual values (``<missing>``, ``<unreadable>``)."""
        status = self.frame["status"]
        shown = self.frame.assign(value=self.frame["actual"].where(status.isin(["ok", "overridden"]),
                                                                   "<" + status + ">"))
        return self._pivot(shown, "value")

    def heatmap_frame(self) -> pd.DataFrame:
        """Variable x process table of :data:`STATUS_CODES` to colour (legend: ``.attrs["status_codes"]``)."""
        coded = self.frame.assign(code=self.frame["status"].map(STATUS_CODES))
        table = self._pivot(coded, "code").astype("int64")
        table.attrs["status_codes"] = dict(STATUS_CODES)
        return table

    def _pivot(self, frame: pd.DataFrame, values: str) -> pd.DataFrame:
        processes = list(dict.fromkeys(frame["process"]))
        variables = [name for name, _ in self.expected]
        table = frame.pivot(index="variable", columns="process", values=values)
        table = table.reindex(index=variables, columns=processes)
        return table.rename_axis(index="variable", columns="process")

    def with_nccl_log(self, lines: Iterable[str], *, host: str | None = None) -> EnvReport:
        """This report plus the NCCL log comparison; ``host``: our name of the host whose log it is."""
        return self._with_nccl([(host, lines)])

    def roles(self) -> dict[tuple[str, int], ProcessRole]:
        """Each process's role, engine and rank, keyed by (host, pid)."""
        rows = self.frame.drop_duplicates(["host", "pid"])
        return {(row.host, int(row.pid)): ProcessRole(Role(row.role),
                                                      # pandas stores a missing string as NaN
                                                      row.engine if isinstance(row.engine, str) else None,
                                                      row.rank if isinstance(row.rank, str) else None)
                for row in rows.itertuples(index=False)}

    def with_nccl_logs(self, logs: Mapping[str, Iterable[str]]) -> EnvReport:
        """Like :meth:`with_nccl_log` for several nodes: ``{host name: that host's log lines}``."""
        return self._with_nccl(list(logs.items()))

    def _with_nccl(self, logs: list[tuple[str | None, Iterable[str]]]) -> EnvReport:
        roles = self.roles()
        frames = [nccl_env_frame(lines, dict(self.expected), roles=roles, host=host, version=self.release)
                  for host, lines in logs]
        if not frames:
            return self
        frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        nccl = frame.sort_values(["host", "device", "pid", "variable"], kind="stable").reset_index(drop=True)
        return replace(self, nccl=nccl, frame=_decided_by_nccl(self.frame, nccl))

    def summary(self) -> str:
        """One line: counts by status and the worst finding."""
        frame = self.frame
        hosts = sorted(set(frame["host"]))
        counts = frame["status"].value_counts()
        parts = [f"{int(counts.get(status, 0))} {status}" for status in STATUS_CODES]
        processes = len(frame[["host", "pid"]].drop_duplicates())  # a pid is unique per host only
        variables = _count(len(self.expected), "variable")
        text = (f"env check of {_count(processes, 'process', 'processes')} x {variables} "
                f"on {', '.join(hosts) or 'no host'}: {', '.join(parts)}")
        worst = self.problems()
        if len(worst):
            grouped = worst.groupby(["status", "variable"], sort=False).size().reset_index(name="n")
            grouped["severity"] = grouped["status"].map(_SEVERITY)
            top = grouped.sort_values(["severity", "n"], ascending=False, kind="stable").iloc[0]
            text += f"; {top['variable']} {top['status']} in {top['n']} of {processes}"
        if self.nccl is not None:
            good = int((self.nccl["status"] == "ok").sum())
            text += f"; NCCL log: {good} of {len(self.nccl)} echoes as expected (NCCL's echoes are the authority)"
        return text

    def __str__(self) -> str:
        problems = self.problems()
        lines = [self.summary()]
        if len(problems):
            columns = ["process", "variable", "expected", "actual", "status", "reason"]
            lines.append(problems[columns].fillna("").to_string(index=False))
        lines += [f"what /proc cannot see: {note}" for note in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        table = self.by_rank()
        status = self._pivot(self.frame, "status")
        colours = {"ok": "#e6f4ea", "overridden": "#fff4ce", "missing": "#fde2e1", "unreadable": "#eeeeee"}
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
        rows = []
        for variable in table.index:
            cells = "".join(f'<td style="background:{colours.get(str(status.at[variable, c]), "#fff")}">'
                            f"{html.escape(str(table.at[variable, c]))}</td>" for c in table.columns)
            rows.append(f"<tr><th>{html.escape(str(variable))}</th>{cells}</tr>")
        notes = "".join(f"<p>what /proc cannot see: {html.escape(note)}</p>" for note in self.notes)
        return (f"<p>{html.escape(self.summary())}</p><table><thead><tr><th>variable</th>{head}</tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table>{notes}")


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def check_env(processes: Iterable[ProcessLike], expected: Mapping[str, str | None], *,
              skip_roles: Iterable[Role | str] = (Role.HELPER, Role.SHELL),
              release: str | None = None) -> EnvReport:
    """Compare each process's environment with ``expected`` (``None``: any value, but set).

    ``release`` (``server.release().version``) lets overridden rows name that release's write and
    :attr:`EnvReport.notes` list what ``/proc`` cannot show. Shell wrappers and helpers are skipped:
    ``bash -c 'NCCL_ALGO=Ring python ...'`` never has the variable itself.

    >>> from types import SimpleNamespace as P
    >>> worker = P(host="gpu-a", pid=11, ppid=10, cmdline=("sglang::scheduler_TP0",),
    ...            environ={"NCCL_NVLS_ENABLE": "0"}, error=None)
    >>> check_env([worker], {"NCCL_NVLS_ENABLE": "1"}).frame["status"].tolist()
    ['overridden']
    """
    skipped = {Role(role) for role in skip_roles}
    infos = list(processes)
    roles = classify_tree(infos)
    by_key = {(info.host, info.pid): info for info in infos}
    multi_host = len({info.host for info in infos}) > 1
    records = []
    for info in infos:
        role = roles[(info.host, info.pid)]
        if role.role in skipped:
            continue
        label = f"{info.host} " if multi_host else ""
        label += f"{role.rank or role.role} [{info.pid}]"
        parent = by_key.get((info.host, info.ppid))
        renamed = overwritten(info, parent)
        survivor = surviving_environ(info, role, infos, roles, release) if renamed else None
        for variable, want in expected.items():
            # a renamed process's /proc environ is partly its title's memory: only what is found there counts
            if not renamed or variable in (info.environ or {}):
                actual, status, reason = _judge(info, role, variable, want, release)
                source = "proc"
            else:
                actual, status, reason = _judge_renamed(survivor, role, variable, want, release)
                source = survivor.source if survivor is not None else "none"
            records.append({"host": info.host, "pid": info.pid, "ppid": info.ppid, "role": str(role.role),
                            "engine": role.engine, "rank": role.rank, "process": label, "variable": variable,
                            "expected": want, "actual": actual, "status": status, "reason": reason,
                            "source": source,
                            "_order": (_ROLE_ORDER[role.role], tuple(n for _, n in role.ranks), info.pid)})
    records.sort(key=lambda r: (r["host"], r["_order"]))
    frame = pd.DataFrame(records, columns=[*_FRAME_COLUMNS, "_order"]).drop(columns="_order")
    engines = [r.engine for r in roles.values() if r.engine]
    present = [roles[(i.host, i.pid)].role for i in infos]
    notes = unseen_writes(engines[0] if engines else None, release, expected, present)
    return EnvReport(frame=frame, expected=tuple(expected.items()), release=release, notes=tuple(notes))


def _judge(info: ProcessLike, role: ProcessRole, variable: str, want: str | None,
           release: str | None = None) -> tuple[str | None, str, str | None]:
    # A zombie reads as an empty environment with an error: unreadable, not "missing".
    if info.environ is None or (info.error and not info.environ):
        return None, "unreadable", info.error or "the environment could not be read"
    actual = info.environ.get(variable)
    if actual is None:
        return None, "missing", None
    if want is None or actual == want:
        return actual, "ok", None
    return actual, "overridden", override_reason(role, variable, actual, release)


def _judge_renamed(survivor: Surviving | None, role: ProcessRole, variable: str, want: str | None,
                   release: str | None) -> tuple[str | None, str, str | None]:
    """A process whose /proc environment is its title: judged on the surviving source, never ``missing`` by /proc."""
    if survivor is None:
        return None, "unreadable", (f"{OVERWRITTEN}, and no sibling or parent could be read; run with "
                                    "NCCL_DEBUG=INFO for NCCL's own echo of each NCCL_* variable")
    actual = survivor.environ.get(variable)
    why = f"{OVERWRITTEN}; read from its {survivor.source} and the release's writes"
    if actual is None:
        return None, "missing", why
    if want is None or actual == want:
        return actual, "ok", why
    return actual, "overridden", override_reason(role, variable, actual, release, seen_by="nccl") or why


def _decided_by_nccl(frame: pd.DataFrame, nccl: pd.DataFrame) -> pd.DataFrame:
    """Rows not read from /proc, re-decided by NCCL's own echo of the same process (the authority) where it has one."""
    echoed = {(r.host, int(r.pid), r.variable): r for r in nccl.itertuples(index=False)}
    frame = frame.copy()
    for index, row in frame.iterrows():
        echo = echoed.get((row["host"], int(row["pid"]), row["variable"]))
        if row["source"] == "proc" or echo is None:
            continue
        if echo.status == "not_logged":  # NCCL logged this process's start-up but never read the variable
            frame.loc[index, ["actual", "status", "source"]] = [None, "missing", "NCCL echo"]
            frame.loc[index, "reason"] = f"{OVERWRITTEN}; NCCL_DEBUG=INFO echoed other variables of it, not this one"
            continue
        frame.loc[index, ["actual", "status", "source"]] = [echo.log_value, echo.status, "NCCL echo"]
        frame.loc[index, "reason"] = echo.reason if echo.status != "ok" else f"{OVERWRITTEN}; NCCL echoed its value"
    return frame
