"""The server log folder is private (issue 20, item 5): per user, made 0700, checked before use, files 0600.

The checks are pure (:func:`toolkit.server.log_dir.check` over ``stat`` lines) and tested on
data first; then the folder is made and checked on this machine and through the loopback sshd,
and refused when its mode or owner is wrong (the tests run as root: the owner case chowns the
folder to ``nobody``).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from sim_process import free_port

from toolkit.errors import UnsafeLogDir
from toolkit.host.host import Host
from toolkit.server import log_dir
from toolkit.server.launch import launch
from toolkit.server.log_dir import DirStat, LogDirReport
from toolkit.server.spec import ServerSpec

ME, OTHER = 1000, 1001
ROOT_DIR = DirStat(0, 0o755, "directory", "/")
TMP = DirStat(0, 0o1777, "directory", "/tmp")


def _report(folder: DirStat, *above: DirStat, named: DirStat | None = None) -> LogDirReport:
    return LogDirReport(ME, folder.path, named or folder, (folder, *above))


def _mine(path: str = "/tmp/toolkit-logs-1000", mode: int = 0o700) -> DirStat:
    return DirStat(ME, mode, "directory", path)


SAFE = {
    "made by the toolkit": _report(_mine(), TMP, ROOT_DIR),
    "group may read (a team folder)": _report(_mine(mode=0o750), TMP, ROOT_DIR),
    "under the user's home": _report(_mine("/home/u/logs"), DirStat(ME, 0o755, "directory", "/home/u"),
                                     DirStat(0, 0o755, "directory", "/home"), ROOT_DIR),
    "a link of the user's own": _report(_mine("/data/u/logs"), DirStat(ME, 0o700, "directory", "/data/u"),
                                        DirStat(0, 0o755, "directory", "/data"), ROOT_DIR,
                                        named=DirStat(ME, 0o777, "symbolic link", "/tmp/toolkit-logs-1000")),
}
UNSAFE = {
    "owned by another user": (_report(DirStat(OTHER, 0o700, "directory", "/tmp/toolkit-logs-1000"), TMP, ROOT_DIR),
                              "is owned by uid 1001, not by you (uid 1000)"),
    "writable by everyone": (_report(_mine(mode=0o777), TMP, ROOT_DIR), "can be written by its group and every user"),
    "writable by the group": (_report(_mine(mode=0o770), TMP, ROOT_DIR), "can be written by its group (mode 770)"),
    "a link someone else made": (_report(_mine("/home/x"), ROOT_DIR,
                                         named=DirStat(OTHER, 0o777, "symbolic link", "/tmp/toolkit-logs-1000")),
                                 "is a link made by uid 1001"),
    "a file": (_report(DirStat(ME, 0o600, "regular file", "/tmp/toolkit-logs-1000"), TMP, ROOT_DIR),
               "is a regular file, not a directory"),
    "in a folder anyone can write, not sticky": (
        _report(_mine("/scratch/logs"), DirStat(0, 0o777, "directory", "/scratch"), ROOT_DIR),
        "lies in /scratch, writable by its group and every user"),
    "in another user's folder": (_report(_mine("/home/x/logs"), DirStat(OTHER, 0o755, "directory", "/home/x"),
                                         ROOT_DIR), "lies in /home/x, owned by uid 1001"),
}


@pytest.mark.parametrize("name", SAFE)
def test_a_private_folder_is_accepted(name: str) -> None:
    log_dir.check(SAFE[name], "gpu-a")


@pytest.mark.parametrize("name", UNSAFE)
def test_a_folder_others_can_change_is_refused_saying_why_and_what_to_do(name: str) -> None:
    report, said = UNSAFE[name]
    with pytest.raises(UnsafeLogDir) as caught:
        log_dir.check(report, "gpu-a")
    assert said in caught.value.message and "on gpu-a" in caught.value.message
    assert caught.value.evidence and caught.value.hint and "log_dir=" in caught.value.hint


def test_the_stat_lines_of_the_script_parse() -> None:
    report = log_dir.parse("0\n/tmp/toolkit-logs-0\n0 700 directory|/tmp/toolkit-logs-0\n"
                           "0 700 directory|/tmp/toolkit-logs-0\n0 1777 directory|/tmp\n0 755 directory|/\n")
    assert report.uid == 0 and report.directory == "/tmp/toolkit-logs-0"
    assert report.chain[1] == DirStat(0, 0o1777, "directory", "/tmp") and len(report.chain) == 3


# -- on a real host: this machine, and the loopback sshd ------------------------------------------

def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def host(request: pytest.FixtureRequest) -> Host:
    if request.param == "local":
        return Host.local()
    ssh: Host = request.getfixturevalue("ssh_host")
    return ssh


def test_the_default_folder_is_per_user_and_private(host: Host) -> None:
    made = log_dir.prepare(host, None)
    assert made == f"/tmp/toolkit-logs-{os.getuid()}"  # the loopback sshd logs in as this user
    assert _mode(Path(made)) == 0o700 and Path(made).stat().st_uid == os.getuid()


def test_a_new_folder_is_made_0700_and_a_log_file_0600(host: Host, tmp_path: Path) -> None:
    folder = tmp_path / "a b" / "logs-{uid}"
    made = log_dir.prepare(host, str(folder))
    assert made == str(tmp_path / "a b" / f"logs-{os.getuid()}")
    assert _mode(Path(made)) == 0o700 and _mode(tmp_path / "a b") == 0o700  # parents made by umask 077 too
    log_dir.create_log_file(host, f"{made}/x.log")
    assert _mode(Path(made) / "x.log") == 0o600


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_folder_with_a_wrong_mode_is_refused(host: Host, tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    folder.chmod(mode)
    with pytest.raises(UnsafeLogDir, match=f"can be written by .* \\(mode {mode:o}\\)"):
        log_dir.prepare(host, str(folder))
    assert _mode(folder) == mode  # refused, never "fixed" behind the user's back


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder away needs root")
def test_a_folder_owned_by_someone_else_is_refused(host: Host, tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)  # nobody
    with pytest.raises(UnsafeLogDir, match="owned by uid 65534, not by you") as caught:
        log_dir.prepare(host, str(folder))
    assert "pass log_dir=" in (caught.value.hint or "")
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    os.lchown(link, 65534, 65534)
    with pytest.raises(UnsafeLogDir, match="is a link made by uid 65534"):
        log_dir.prepare(host, str(link))


def test_a_launch_refuses_an_unsafe_folder_and_writes_a_private_log(host: Host, tmp_path: Path) -> None:
    spec = ServerSpec.command([sys.executable, "-c", "print('hello', flush=True); import time; time.sleep(30)"],
                              port=free_port())
    unsafe = tmp_path / "open"
    unsafe.mkdir(mode=0o777)
    unsafe.chmod(0o777)
    with pytest.raises(UnsafeLogDir):
        launch(host, spec, log_dir=str(unsafe), validate=False)
    assert not list(unsafe.iterdir())  # nothing started, nothing written
    with launch(host, spec, log_dir=str(tmp_path / "private"), validate=False) as server:
        log = Path(server.log_path)
        assert _mode(log.parent) == 0o700 and _mode(log) == 0o600
        assert server.follow().wait_for_lines(1, timeout_s=30)
