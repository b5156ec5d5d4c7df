"""The launch registry as data (pure) and its scripts run by a real bash into a temporary cache dir."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from toolkit.host import launches
from toolkit.host.launches import LaunchRecord, Owner

OWNER = Owner("box", 4000, 17)
REC = LaunchRecord(pid=4242, start_ticks=900, description="sim EAGLE3", port=30000, log_path="/logs/a b.log",
                   host="localhost", owner=OWNER, started_at=1.5)


def test_a_record_survives_its_json() -> None:
    assert launches.decode_record(launches.encode_record(REC)) == REC
    kept = replace(REC, outlive=True, start_ticks=None)
    assert launches.decode_record(launches.encode_record(kept)) == kept


@pytest.mark.parametrize("text", ["", "{", "[]", '{"format": 2, "pid": 1}', '{"format": 1, "pid": "x"}', "null"])
def test_anything_else_is_no_record(text: str) -> None:
    assert launches.decode_record(text) is None


@pytest.mark.parametrize(
    ("record", "server_ticks", "owner_ticks", "machine", "status"),
    [
        (REC, None, 17, "box", "gone"),                       # the server exited
        (REC, 901, 17, "box", "gone"),                        # its pid now names another process
        (REC, 900, 17, "box", "running"),                     # driver alive
        (REC, 900, None, "box", "orphan"),                    # driver gone
        (REC, 900, 18, "box", "orphan"),                      # driver's pid reused by another process
        (REC, 900, None, "laptop", "elsewhere"),              # cannot ask the driver's machine
        (replace(REC, outlive=True), 900, None, "box", "kept"),
        (replace(REC, start_ticks=None), 5, None, "box", "unverified"),  # no token: never signalled (issue 25)
    ],
)
def test_verdicts(record: LaunchRecord, server_ticks: int | None, owner_ticks: int | None, machine: str,
                  status: str) -> None:
    seen = launches.verdict(record, server_ticks=server_ticks, owner_ticks=owner_ticks, this_machine=machine)
    assert seen.status == status
    assert seen.why


def test_start_token_is_field_22_even_when_comm_has_parentheses() -> None:
    fields = " ".join(str(n) for n in range(3, 30))  # field 3 .. 29
    assert launches.self_ticks(f"77 (a) b) {fields}") == 22
    assert launches.self_ticks(Path("/proc/self/stat").read_text()) is not None
    assert launches.self_ticks("garbage") is None


def _bash(script: str, cache: Path) -> str:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=True).stdout


def test_scripts_write_list_and_remove_records_privately(tmp_path: Path) -> None:
    hostile = replace(REC, description="it's $(id) `x` \"q\"\nnext", log_path="/l/'; rm -rf ~")
    assert _bash(launches.list_script(), tmp_path) == ""  # no registry yet
    _bash(launches.write_script(REC), tmp_path)
    _bash(launches.write_script(replace(hostile, pid=7)), tmp_path)
    (tmp_path / "toolkit" / "servers" / "junk.json").write_text("not json\n")
    listed = dict(launches.parse_listing(_bash(launches.list_script(), tmp_path)))
    assert listed == {"4242-900.json": REC, "7-900.json": replace(hostile, pid=7), "junk.json": None}
    directory = tmp_path / "toolkit" / "servers"
    assert directory.stat().st_mode & 0o777 == 0o700
    assert (directory / "4242-900.json").stat().st_mode & 0o777 == 0o600
    _bash(launches.remove_script(["4242-900.json", "../../escape.json", "missing.json"]), tmp_path)
    assert sorted(p.name for p in directory.iterdir()) == ["7-900.json", "junk.json"]
