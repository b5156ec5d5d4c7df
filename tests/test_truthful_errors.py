"""Errors that tell the truth (issue 20, item 6): whose port it is, an HTML page where JSON was due, and
``python -m toolkit report`` on a journal it cannot read or a folder it cannot write."""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sim_process import free_port, terminal_signals

from toolkit.benchmark import Load, bench
from toolkit.errors import PortInUse, ServerDied
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.server import port_owner
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec


def _listener(port: int) -> list[str]:
    return ["-c", f"import socket, time; s = socket.socket(); s.bind(('0.0.0.0', {port})); s.listen(); "
                  "print('listening', flush=True); time.sleep(120)"]


def _wait_listening(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port} after {timeout_s} s")


# -- PortInUse: yours, the toolkit's, or someone else's ------------------------------------------

def test_a_port_held_by_your_own_toolkit_server_says_it_is_yours_with_its_log(tmp_path: Path) -> None:
    host, port = Host.local(), free_port()
    spec = ServerSpec.command([sys.executable, *_listener(port)], port=port)
    with launch(host, spec, log_dir=str(tmp_path), validate=False) as first:
        _wait_listening(port)
        with pytest.raises(PortInUse) as caught:
            launch(host, spec, log_dir=str(tmp_path), validate=False)
    hint = caught.value.hint or ""
    assert f"it is yours (pid {caught.value.pid}, launched by the toolkit, log {first.log_path})" in hint
    assert f"python -m toolkit stop {caught.value.pid}" in hint and "someone" not in hint  # recorded: stop it by pid


def test_a_port_held_by_your_own_other_process_says_it_is_yours(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(PortInUse) as caught:
            launch(Host.local(), ServerSpec.command([sys.executable, "-V"], port=port), log_dir=str(tmp_path))
    hint = caught.value.hint or ""
    assert hint.startswith(f"it is yours (pid {caught.value.pid}):") and "launched by the toolkit" not in hint


@pytest.mark.skipif(shutil.which("runuser") is None or not Path("/usr/bin/python3").exists(),
                    reason="needs root's runuser and a system python")
def test_a_port_held_by_another_user_says_whose(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("running a process as nobody needs root")
    port = free_port()
    other = subprocess.Popen(["runuser", "-u", "nobody", "--", "/usr/bin/python3", *_listener(port)],
                             stdout=subprocess.DEVNULL)
    try:
        _wait_listening(port)
        with pytest.raises(PortInUse) as caught:
            launch(Host.local(), ServerSpec.command([sys.executable, "-V"], port=port), log_dir=str(tmp_path))
    finally:
        other.kill()
        other.wait()
    assert (caught.value.hint or "").startswith("it belongs to another user (uid 65534)")


def test_the_owner_is_read_from_what_the_host_says() -> None:
    owner = port_owner.parse("0\n0\n/tmp/toolkit-logs-0/sglang-EAGLE3-20261201-101500-123.log\n")
    assert owner is not None and owner.mine and owner.toolkit_log
    assert port_owner.parse("0\n0\n/dev/pts/3\n") == port_owner.HolderOwner(0, 0, "/dev/pts/3")
    assert port_owner.parse("stat: cannot statx\n") is None
    assert "stop the holder" in port_owner.hint(8000, 42, None)


# -- an HTML page where an event stream was due ---------------------------------------------------

LOGIN_PAGE = b"<!DOCTYPE html><html><head><title>Sign in - Cluster SSO</title></head><body>login</body></html>"


class _LoginProxy(http.server.BaseHTTPRequestHandler):
    """What answers on the port when a proxy or SSO sits in front of the server: 200 and a page."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(LOGIN_PAGE)))
        self.end_headers()
        self.wfile.write(LOGIN_PAGE)

    def do_GET(self) -> None:  # noqa: N802
        self.do_POST()

    def log_message(self, *args: object) -> None:
        pass


def test_an_html_answer_is_reported_as_html_not_as_a_cut_stream() -> None:
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LoginProxy)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        result = bench(f"http://127.0.0.1:{proxy.server_address[1]}",
                       Load(num_prompts=2, max_concurrency=1, input_len=5, output_len=4, warmup=0), model="m",
                       progress=False, timeout_s=10.0, stop_after_failures=0)
    finally:
        proxy.shutdown()
        thread.join(10)
        proxy.server_close()
    error = result.first_error or ""
    assert error.startswith("the server answered HTML (a proxy or a login page?)")
    assert "'Sign in - Cluster SSO'" in error and "cut mid-response" not in error


# -- python -m toolkit report: one line, never a traceback -----------------------------------------

def _report(journal: Path, out: Path | str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkit", "report", str(journal), "--out", str(out)],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def journal_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("journal") / "j.sqlite"
    with Journal(path) as journal, journal.step("baseline", "one step") as step:
        step.note("a note")
    return path


def _one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: ") and all(n in done.stderr for n in needles), done.stderr


def test_report_on_a_corrupt_journal_prints_one_line(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    _one_line_error(_report(corrupt, tmp_path / "out", tmp_path), "corrupt.sqlite", "what to do")


@pytest.mark.parametrize("out", ["a-file/sub", "/proc/toolkit-report"])
def test_report_into_a_folder_that_cannot_be_made_prints_one_line(journal_file: Path, tmp_path: Path,
                                                                  out: str) -> None:
    (tmp_path / "a-file").write_text("a file, not a folder\n")
    _one_line_error(_report(journal_file, out, tmp_path), out, "--out a folder you can create and write")


def test_report_on_a_journal_on_a_read_only_mount_reads_it_or_says_why(journal_file: Path, tmp_path: Path) -> None:
    source, mount = tmp_path / "ro-source", tmp_path / "ro"
    source.mkdir()
    mount.mkdir()
    shutil.copy(journal_file, source / "j.sqlite")
    if subprocess.run(["mount", "--bind", "-o", "ro", str(source), str(mount)], capture_output=True).returncode:
        pytest.skip("a read-only bind mount needs CAP_SYS_ADMIN")
    try:
        done = _report(mount / "j.sqlite", tmp_path / "out", tmp_path)
    finally:
        subprocess.run(["umount", str(mount)], check=True)
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode:
        _one_line_error(done, "j.sqlite")
    else:
        assert (tmp_path / "out" / "postmortem.md").is_file()


# -- logs follow on a path that is not there -------------------------------------------------------

def test_logs_follow_on_a_misspelt_path_says_so_and_gives_up_after_its_bound(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text("hello\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "toolkit", "logs", "follow", str(tmp_path / "sevrer.log"),
                           "--wait-s", "3"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"waiting: {tmp_path / 'sevrer.log'} does not exist on localhost (yet)" in done.stderr
    assert f"did you mean {tmp_path / 'server.log'}?" in done.stderr
    assert time.monotonic() - started < 60  # 3 s of waiting, plus the start of a Python process on a busy machine


def test_logs_follow_follows_a_log_that_appears_while_it_waits(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    follower = subprocess.Popen([sys.executable, "-m", "toolkit", "logs", "follow", str(log), "--color", "never",
                                 "--wait-s", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=terminal_signals)  # as a terminal
    try:
        assert follower.stderr is not None and follower.stdout is not None
        assert "does not exist on localhost (yet)" in follower.stderr.readline()  # it said so, and waits
        log.write_text("RuntimeError: CUDA error: an illegal memory access was encountered HF_TOKEN=hf_x\n")
        line = follower.stdout.readline()
        assert "illegal memory access" in line and "HF_TOKEN=[REDACTED]" in line
    finally:
        follower.send_signal(2)  # Ctrl-C: what a person does to stop following
        try:
            follower.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            follower.kill()
            follower.communicate(timeout=30)
            raise
    assert follower.returncode in (0, 1)


# -- a memory fraction too small fails the way SGLang does, and the hint points up --------------------


def test_a_too_small_mem_fraction_static_says_raise_it(tmp_path: Path) -> None:
    """Notebook 02's risky step with SGLang parameters (issue 28): the simulated 0.5.23 fails as SGLang does."""
    spec = ServerSpec.simulator(tp=1, model="qwen3-32b", port=free_port(), host="127.0.0.1", sim_startup_s=0.5,
                                mem_fraction_static=0.3)
    with pytest.raises(ServerDied) as caught, launch(Host.local(), spec, log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=60)
    error = caught.value
    assert "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.3" in str(error)
    assert "raise --mem-fraction-static" in (error.hint or "") and "lower --mem-fraction-static" not in (error.hint or "")
