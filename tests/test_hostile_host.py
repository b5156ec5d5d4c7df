"""Issue 25: every read from a host is bounded in bytes and time, and a listing cannot be forged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkit.errors import CommandFailed, HostError
from toolkit.host.host import Host
from toolkit.moves.profile import parse_trace_listing, trace_listing_script


def test_a_file_name_with_a_newline_cannot_forge_a_trace_listing(tmp_path: Path) -> None:
    (tmp_path / "ok.json").write_bytes(b"12345")
    (tmp_path / "evil\n999\tfake.json").write_bytes(b"x")
    os.mkfifo(tmp_path / "pipe.json")
    listing = parse_trace_listing(Host.local().run(trace_listing_script(str(tmp_path))).stdout)
    assert listing == {"ok.json": 5, "evil\n999\tfake.json": 1}


def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "trace.json")
    with pytest.raises(CommandFailed, match="exited with status 3") as caught:
        Host.local().read_file(str(tmp_path / "trace.json"), max_bytes=1 << 20, timeout_s=5)
    assert "not a regular file" in caught.value.stderr


def test_max_bytes_is_enforced_on_the_host(tmp_path: Path) -> None:
    (tmp_path / "big.json").write_bytes(b"x" * (2 << 20))
    with pytest.raises(HostError, match="more than max_bytes=1,048,576 bytes"):
        Host.local().read_file(str(tmp_path / "big.json"), max_bytes=1 << 20, timeout_s=30)
    assert Host.local().read_file(str(tmp_path / "big.json"), max_bytes=2 << 20) == b"x" * (2 << 20)
