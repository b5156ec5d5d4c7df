"""Launching through a real sshd: exact argv/env delivery, held ports, multi-node launch and stop."""

from __future__ import annotations

import itertools
import json
import socket
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_process import free_port as _free_port
from sim_process import listening_process

from toolkit.errors import PortInUse
from toolkit.host.host import Host
from toolkit.host.shell import quote
from toolkit.server.launch import launch, launch_multinode
from toolkit.server.spec import ServerSpec

# Dumps what the process received; written to a temp name and renamed, so a reader never sees half.
DUMP = (
    "import json, os, sys; out = sys.argv[1]; "
    "data = {'argv': sys.argv[2:], 'env': {k: v for k, v in os.environ.items() if k.startswith('TK_P_')}}; "
    "open(out + '.tmp', 'w', encoding='utf-8').write(json.dumps(data)); os.replace(out + '.tmp', out)"
)
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=24)
FLAG_VALUES = st.one_of(
    TEXT,
    st.sampled_from(["a b", "'", '"', "$HOME", "\\", "\n", "ü€😀", "--x", "`id`", "*", ""]),
    st.integers(),
)
_counter = itertools.count()


@pytest.fixture(scope="module")
def dump_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dumps")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(FLAG_VALUES, max_size=4),
    env=st.dictionaries(st.from_regex(r"TK_P_[A-Z0-9_]{1,6}", fullmatch=True), TEXT, max_size=3),
    dict_value=st.none() | st.dictionaries(TEXT, TEXT, max_size=2),
)
def test_any_flag_and_env_value_reaches_the_process_exactly(
    any_host: Host,
    dump_dir: Path,
    values: list[object],
    env: dict[str, str],
    dict_value: dict[str, str] | None,
) -> None:
    out = f"{dump_dir}/dump-{next(_counter)}.json"
    flags: dict[str, object] = {f"--f{i}": v for i, v in enumerate(values)}
    if dict_value is not None:
        flags["--config"] = dict_value
    spec = ServerSpec.command([sys.executable, "-c", DUMP, out], port=1, env=env).with_flags(flags)

    any_host.start_detached(spec.command(), log_path=f"{out}.log")
    waited = any_host.run(f"for i in $(seq 500); do [ -e {quote(out)} ] && exec cat {quote(out)}; sleep 0.02; done; "
                          f"cat {quote(out + '.log')} >&2; exit 1")  # fmt: skip

    seen = json.loads(waited.stdout)
    assert seen["argv"] == spec.argv()[4:]
    assert seen["env"] == env
    if dict_value is not None:
        assert json.loads(seen["argv"][-1]) == dict_value


@pytest.mark.ssh
def test_port_in_use_over_ssh_names_the_holder_within_bounds(ssh_host: Host, tmp_path: Path) -> None:
    spec = ServerSpec.sglang("m", port=1, python=sys.executable)
    with listening_process() as (pid, port):  # a separate python: the xdist worker renames itself
        spec = spec.with_flags({"--port": port})
        started = time.monotonic()
        with pytest.raises(PortInUse) as info:
            launch(ssh_host, spec, log_dir=str(tmp_path))
        assert time.monotonic() - started < 5.0
    assert info.value.pid == pid and "python" in (info.value.holder or "")
    assert f"port {spec.port} on {ssh_host.name} is held by pid {info.value.pid} (" in str(info.value)


@pytest.mark.ssh
def test_launch_over_ssh_and_stop_on_exit(ssh_host: Host, tmp_path: Path) -> None:
    spec = ServerSpec.command([sys.executable, "-c", "import time; time.sleep(120)"], port=_free_port())
    with launch(ssh_host, spec, log_dir=str(tmp_path)) as server:
        assert server.url == f"http://127.0.0.1:{spec.port}" and server.is_alive()
        [info] = ssh_host.process_tree(server.pid)
        assert list(info.cmdline) == spec.argv()
    assert not ssh_host.is_alive(server.process)


@pytest.mark.ssh
def test_multinode_launch_on_three_hosts_and_stop_stops_all(ssh_hosts: list[Host], tmp_path: Path) -> None:
    port, init_port = _free_port(), _free_port()
    spec = ServerSpec.command([sys.executable, "-c", "import time; time.sleep(120)"], port=port)
    with launch_multinode(ssh_hosts, spec, dist_init_port=init_port, log_dir=str(tmp_path)) as cluster:
        assert cluster.url == f"http://127.0.0.1:{port}" and len(cluster.nodes) == 3
        assert [node.host.address for node in cluster.nodes] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
        for rank, node in enumerate(cluster.nodes):
            [info] = node.host.process_tree(node.pid)
            assert list(info.cmdline[-6:]) == [
                "--nnodes", "3", "--node-rank", str(rank), "--dist-init-addr", f"127.0.0.1:{init_port}"
            ]  # fmt: skip
            assert node.log_path.endswith(".log") and f"-node{rank}-" in node.log_path
        assert cluster.is_alive()
        reports = cluster.stop(grace_s=5)
    assert [r.already_stopped for r in reports] == [False, False, False]
    assert not any(node.is_alive() for node in cluster.nodes)
    assert all(r.already_stopped for r in cluster.stop())  # the with-exit stop again: idempotent


@pytest.mark.ssh
def test_multinode_checks_every_port_before_starting_anything(ssh_hosts: list[Host], tmp_path: Path) -> None:
    spec = ServerSpec.command([sys.executable, "-c", "import time; time.sleep(120)"], port=_free_port())
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        with pytest.raises(PortInUse, match="is held by pid"):
            launch_multinode(ssh_hosts, spec, dist_init_port=held.getsockname()[1], log_dir=str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_a_log_dir_under_home_is_the_file_every_reader_sees(any_host: Host) -> None:
    """``log_dir="~/..."``: launch wrote the file under $HOME, and the follower, wait_ready and
    log_tail read that same file (they once quoted the ``~`` literally and tailed nothing, silently)."""
    folder = f"~/toolkit-home-logs-{time.time_ns()}"
    spec = ServerSpec.simulator(tp=1, port=_free_port(), host="127.0.0.1", sim_startup_s=0.5, sim_warmup_s=0.2)
    home = any_host.run('printf %s "$HOME"').stdout
    try:
        with launch(any_host, spec, log_dir=folder) as server:
            assert server.log_path.startswith(home + "/toolkit-home-logs-"), server.log_path
            report = server.wait_ready(timeout_s=60)
            assert report.ready and report.ready_reason is not None
            ready_lines = [e for e in server.follow().events() if e.verdict.value == "ready"]
            assert ready_lines, "the follower did not read the log that launch wrote"
            assert any("ready to roll" in line for line in server.log_tail(20))
    finally:
        any_host.run(f'rm -rf -- "$HOME"/{quote(folder[2:])}', check=False)
