"""Release detection through an interpreter wrapper, and the flag check kept on disk (issue 23).

The GPU machine runs vLLM 0.25.0 from a folder that ``/tmp/vv/bin/python`` and ``/tmp/vv/bin/vllm``
(bash scripts) put on ``PYTHONPATH``. Here the same shape is built from real parts: a distribution
folder with vLLM 0.25.0's metadata, two bash wrappers, and the simulator answering ``--help=all`` in
vLLM 0.25.0's mode. Each call of the wrapped ``vllm`` leaves a line in ``calls.txt``.
"""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from toolkit.errors import InvalidFlag
from toolkit.host.host import Host
from toolkit.server import help_cache as help_cache_module
from toolkit.server.flag_check import FlagTableCache
from toolkit.server.help_cache import HelpTextCache
from toolkit.server.preflight import validate_spec
from toolkit.server.release import ReleaseCache, detect_release
from toolkit.server.spec import ServerSpec
from toolkit.server.state import ServerState
from toolkit.testbeds.wrapped_engine import wrapped_vllm


def test_docstring_examples_run() -> None:
    assert doctest.testmod(help_cache_module).failed == 0


def test_the_release_is_read_through_an_interpreter_wrapper_without_importing_the_engine(
        local_host: Host, tmp_path: Path) -> None:
    python = wrapped_vllm(tmp_path)
    release = detect_release(local_host, ServerSpec.vllm("/tmp/m", python=str(python)), cache=ReleaseCache())
    assert (release.version, release.how) == ("0.25.0", "metadata")
    assert release.provenance() == {"vllm": "0.25.0", "vllm_release_read_by": "metadata"}
    assert release.problem() is None
    assert not (tmp_path / "calls.txt").exists()  # the engine's own program never ran


def test_an_unreadable_release_says_what_was_assumed_and_what_to_do(local_host: Host, tmp_path: Path) -> None:
    release = detect_release(local_host, ServerSpec.vllm("/tmp/m", python=str(tmp_path / "nowhere" / "python")),
                             cache=ReleaseCache())
    assert release.how == "assumed" and release.provenance()["vllm"] == "unknown"
    assert "python=" in str(release.problem())


def test_a_second_check_of_the_same_release_in_a_fresh_process_reads_no_help_from_the_host(
        local_host: Host, tmp_path: Path) -> None:
    python = wrapped_vllm(tmp_path)
    spec = ServerSpec.vllm("/tmp/m", python=str(python), **{"--max-model-len": 2048})
    kept = HelpTextCache(tmp_path / "cache")
    for _ in range(2):  # each round with empty in-memory caches, as a new kernel or script would have
        assert validate_spec(local_host, spec, cache=FlagTableCache(), releases=ReleaseCache(), help_texts=kept) == []
    assert (tmp_path / "calls.txt").read_text().splitlines() == ["serve --help=all"]
    [path] = (tmp_path / "cache").iterdir()
    assert path.name.startswith("vllm-0.25.0-") and path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(InvalidFlag, match="did you mean --max-model-len"):
        validate_spec(local_host, spec.with_flags({"--max-modle-len": 2048}), cache=FlagTableCache(),
                      releases=ReleaseCache(), help_texts=kept)
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 1


def test_an_unreadable_release_is_the_panels_note(local_host: Host, tmp_path: Path) -> None:
    """The ServerPanel draws the state's note: a release that could not be read is said there, not only in describe()."""
    release = detect_release(local_host, ServerSpec.vllm("/tmp/m", python=str(tmp_path / "nowhere" / "python")),
                             cache=ReleaseCache())
    state = ServerState(started_at=0.0)
    state.use_release(release.engine, release.version, release.problem())
    assert state.status().note == release.problem() and "could not be read" in str(state.status().note)
