"""Hosts without SSH: the pure process logic (procs, shell) from plain data, and Host.local()."""

from __future__ import annotations

import base64
import doctest
import os
import shlex
import subprocess
import time

import pytest

import toolkit.host.host
import toolkit.host.procs
import toolkit.host.shell
import toolkit.host.streams
from toolkit.errors import CommandFailed, CommandNotFound, InvalidFlag, ToolkitError
from toolkit.host import procs
from toolkit.host.group import HostGroup
from toolkit.host.host import CommandResult, Host
from toolkit.host.shell import check_env_name, quote_path


@pytest.mark.parametrize("module", [toolkit.host.shell, toolkit.host.procs, toolkit.host.host, toolkit.host.streams])
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.failed == 0 and result.attempted > 0


# -- shell -------------------------------------------------------------------------------------
def test_quote_path_keeps_home_expandable_and_quotes_the_rest() -> None:
    assert quote_path("~/logs dir/a.log") == "\"$HOME\"/'logs dir/a.log'"
    assert quote_path("~") == '"$HOME"'
    assert quote_path("/tmp/~x") == "'/tmp/~x'"
    out = subprocess.run(["bash", "-c", "echo " + quote_path("~/a b")], capture_output=True, text=True).stdout
    assert out.strip() == os.path.expanduser("~") + "/a b"


@pytest.mark.parametrize("name", ["1ABC", "A-B", "", "A B", "A=B", "ÄBC"])
def test_env_names_that_env_would_misread_are_refused(name: str) -> None:
    with pytest.raises(InvalidFlag, match="not a valid environment variable name"):
        check_env_name(name)


# -- the process table -------------------------------------------------------------------------
# pid ppid pgid state start: a server (10) with a rank (11) that forked a helper (12), a worker
# that escaped into its own group (13) with a child (14), a group member reparented to init
# (15), a zombie (16), and an unrelated process (20).
TABLE_TEXT = """\
1 0 1 S 1
10 1 10 S 100
11 10 10 S 101
12 11 10 S 102
13 10 13 S 103
14 13 13 S 104
15 1 10 S 105
16 10 10 Z 106
20 1 20 S 200
garbage line
"""


def test_parse_process_table_skips_malformed_lines() -> None:
    table = procs.parse_process_table(TABLE_TEXT)
    assert sorted(table) == [1, 10, 11, 12, 13, 14, 15, 16, 20]
    assert table[16].alive is False and table[10].alive is True
    assert table[13] == procs.ProcRow(13, 10, 13, "S", 103)


def test_descendants_walk_the_tree_breadth_first() -> None:
    table = procs.parse_process_table(TABLE_TEXT)
    assert [r.pid for r in procs.descendants(table, 10)] == [10, 11, 13, 16, 12, 14]
    assert procs.descendants(table, 999) == []


def test_a_stop_plan_covers_the_group_the_tree_and_escaped_groups() -> None:
    table = procs.parse_process_table(TABLE_TEXT)
    plan = procs.plan_stop(table, 10, start_ticks=100)
    assert plan.pgids == {10, 13}
    assert {pid for pid, _ in plan.members} == {10, 11, 12, 13, 14, 15, 16}
    assert [r.pid for r in procs.survivors(table, plan)] == [10, 11, 12, 13, 14, 15]  # not the zombie


def test_a_reused_pid_is_not_our_process() -> None:
    table = procs.parse_process_table(TABLE_TEXT)
    plan = procs.plan_stop(table, 10, start_ticks=99)
    assert plan.members == frozenset() and procs.survivors(table, plan) == ()


def test_survivors_include_children_forked_during_shutdown_but_not_strangers() -> None:
    plan = procs.plan_stop(procs.parse_process_table(TABLE_TEXT), 10, start_ticks=100)
    later = procs.parse_process_table(
        "1 0 1 S 1\n14 13 13 S 104\n30 14 30 S 300\n31 30 30 Z 301\n20 1 20 S 200\n"
    )
    assert [r.pid for r in procs.survivors(later, plan)] == [14, 30]
    gone = procs.parse_process_table("1 0 1 S 1\n16 1 10 Z 106\n20 1 20 S 200\n")
    assert procs.survivors(gone, plan) == ()


def test_kill_script_never_targets_init() -> None:
    assert (
        procs.kill_script("TERM", (1, 12), frozenset({1, 10})) == "kill -s TERM -- -10 12 2>/dev/null; true"
    )
    assert procs.kill_script("KILL", (), frozenset()) == "true"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_parse_process_tree_keeps_empty_argv_words_and_explains_failures() -> None:
    argv, environ, sleep = _b64(b"python\0-c\0\0x y\0"), _b64(b"A=1\0B=x=y\nz\0"), _b64(b"sleep\x009\0")
    text = "\n".join(
        [
            f"10\t1\tS\t{argv}\t{environ}",
            f"11\t10\tS\t{sleep}\t!Permission denied",
            "12\t10\tZ\t-\t-",
            "13\t0\t?\t!gone\t!gone",
            "not a record",
        ]
    )
    infos = procs.parse_process_tree(text, host="h")
    assert [i.pid for i in infos] == [10, 11, 12, 13]
    assert infos[0].cmdline == ("python", "-c", "", "x y") and infos[0].environ == {"A": "1", "B": "x=y\nz"}
    assert infos[0].error is None
    assert infos[1].environ is None and "permission denied" in (infos[1].error or "")
    assert "zombie" in (infos[2].error or "")
    assert "does not exist" in (infos[3].error or "")


def test_a_renamed_process_reads_as_its_title_without_the_nul_padding() -> None:
    # setproctitle writes the title over the argv area and NUL-pads the rest (vLLM, SGLang, the simulator)
    titled, trailing = _b64(b"sglang::scheduler_TP0" + b"\0" * 15), _b64(b"prog\0a\0\0\0")
    infos = procs.parse_process_tree(f"20\t1\tS\t{titled}\t-\n21\t1\tS\t{trailing}\t-", host="h")
    assert [i.cmdline for i in infos] == [("sglang::scheduler_TP0",), ("prog", "a", "", "")]
    assert procs.parse_port_holder(f"holder 20 {titled}\n") == (20, "sglang::scheduler_TP0")


def test_parse_port_holder() -> None:
    cmd = _b64(b"python3\0-m\0http.server\0")
    assert procs.parse_port_holder("") is None
    assert procs.parse_port_holder(f"listen 55\nholder 9 {cmd}\nholder 7 {cmd}\n") == (
        7,
        "python3 -m http.server",
    )
    pid, why = procs.parse_port_holder("listen 55\n") or (None, "")
    assert pid == 0 and "cannot see" in why


def test_detach_script_quotes_everything_and_reports_pid_and_start_ticks(tmp_path: os.PathLike[str]) -> None:
    log = f"{tmp_path}/sub dir/x.log"
    script = procs.detach_script('echo "$TK_V" $0', log_path=log, env={"TK_V": "a 'b' $c"}, cwd=str(tmp_path))
    assert "setsid nohup env" in script
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    pid, ticks = procs.parse_detached(out)
    assert pid > 1 and ticks is not None
    for _ in range(100):
        with open(log) as f:
            if f.read():
                break
        time.sleep(0.02)
    with open(log) as f:
        assert f.read() == "a 'b' $c bash\n"
    with pytest.raises(ValueError):
        procs.parse_detached("")


def test_timeout_script_is_shell_safe() -> None:
    words = shlex.split(procs.timeout_script("echo 'x'; exit 3", 1.5))
    assert words == ["timeout", "-k", "2", "1.500", "bash", "-c", "echo 'x'; exit 3"]


# -- Host.local() ------------------------------------------------------------------------------
def test_local_host_identity() -> None:
    host = Host.local()
    assert (host.name, host.address, host.is_local) == ("localhost", "127.0.0.1", True)
    assert repr(host) == "Host.local()"


def test_run_returns_a_result_and_check_raises_with_stderr_as_evidence(local_host: Host) -> None:
    result = local_host.run("echo out; echo err >&2; exit 3", check=False)
    assert result == CommandResult("localhost", "echo out; echo err >&2; exit 3", 3, "out\n", "err\n")
    assert not result.ok
    with pytest.raises(CommandFailed) as info:
        local_host.run("echo boom >&2; exit 4")
    assert info.value.exit_code == 4 and info.value.evidence == ("boom",)
    assert "exited with status 4" in str(info.value)


def test_exit_127_is_command_not_found_with_a_hint(local_host: Host) -> None:
    with pytest.raises(CommandNotFound) as info:
        local_host.run("definitely-not-a-program-tk --version")
    assert "command not found" in str(info.value) and "absolute path" in str(info.value)


def test_stop_refuses_this_process_and_init(local_host: Host) -> None:
    for pid in (os.getpid(), 1):
        with pytest.raises(ToolkitError, match="refusing to stop"):
            local_host.stop(pid)


def test_stopping_a_pid_that_never_existed_is_already_stopped(local_host: Host) -> None:
    report = local_host.stop(4_000_000)  # above any pid_max
    assert report.already_stopped and not report.sigkill_sent and report.survivors == ()


def test_host_group_of_local_hosts_runs_in_threads() -> None:
    results = HostGroup([Host.local(), Host.local()]).run("echo $((6*7))")
    assert list(results) == ["localhost"] and results["localhost"].stdout == "42\n"
