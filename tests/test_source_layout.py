"""Running an engine from a commit's code, on repositories laid out like the real ones (make-repo).

SGLang keeps its package in ``python/sglang``: ``PYTHONPATH=<repo>`` silently runs the installed
release, ``PYTHONPATH=<repo>/python`` runs the commit. ``ServerSpec.with_source`` does the
latter; ``compare_commits`` builds each side's spec from it; a commit whose compiled kernel does
not fit the installed one is reported as such (``ExtensionMismatch``), never judged benign.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sim_process import free_port

from toolkit.benchmark import Load
from toolkit.errors import ExtensionMismatch
from toolkit.host.host import Host
from toolkit.moves.bisect import compare_commits
from toolkit.moves.bisect.prober import FATAL_ERRORS as _FATAL_ERRORS
from toolkit.moves.plan import Plan
from toolkit.server import source as sources
from toolkit.server.launch import launch
from toolkit.server.preflight import check_source
from toolkit.server.spec import ServerSpec
from toolkit.sim import make_repo

pytestmark = pytest.mark.timeout(300)
BENCH = Load(num_prompts=4, max_concurrency=1, input_len=16, output_len=48)


def sim(**flags: object) -> ServerSpec:
    return ServerSpec.simulator(tp=1, port=free_port(), host="127.0.0.1", sim_startup_s=0.3, **flags)


def banner(log: str) -> str:
    return log.splitlines()[0]


def test_with_source_renders_each_engines_layout() -> None:
    sglang = ServerSpec.sglang("m").with_source("/src/sglang", commit="1a2b3c4d")
    assert dict(sglang.env)["PYTHONPATH"] == "/src/sglang/python" and sglang.source_build() is None
    editable = ServerSpec.sglang("m").with_source("/src/sglang", install="editable")
    assert editable.launcher[0] == "/src/sglang/.venv-toolkit/bin/python"
    assert "pip install --no-deps --no-build-isolation -e python" in (editable.source_build() or "")
    moved = editable.at_checkout("/tmp/wt1", "5e6f7a8b")
    assert moved.launcher[0] == "/tmp/wt1/.venv-toolkit/bin/python" and dict(moved.env)["PYTHONPATH"] == "/tmp/wt1/python"
    vllm = ServerSpec.vllm("m").with_source("/src/vllm")
    assert vllm.launcher[:2] == ("/src/vllm/.venv-toolkit/bin/vllm", "serve")
    assert "VLLM_USE_PRECOMPILED=1" in (vllm.source_build() or "")
    assert dict(ServerSpec.sglang("m").with_env(PYTHONPATH="/opt/x").with_source("/r").env)["PYTHONPATH"] == \
        "/r/python:/opt/x"


def test_the_simulator_runs_the_commit_found_on_pythonpath_as_python_would(local_host: Host, tmp_path: Path) -> None:
    repo = tmp_path / "sglang"
    commits = make_repo(repo, commits=3, regression_at=3)
    right = sim().with_source(str(repo), commit=commits[-1].sha)
    wrong = sim().with_env(PYTHONPATH=str(repo))  # the repository's root: no sglang package there
    with launch(local_host, right, log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=120)
        first = Path(server.log_path).read_text()
    with launch(local_host, wrong, log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=120)
        second = Path(server.log_path).read_text()
    assert f"source {repo} (0.5.23.dev3)" in banner(first)
    assert "source" not in banner(second)  # the installed build, not the commit


def test_compare_commits_runs_each_commits_code_on_sglangs_layout(local_host: Host, tmp_path: Path) -> None:
    repo = tmp_path / "sglang"
    commits = make_repo(repo, commits=4, regression_at=3, regression_pct=40.0)
    spec = sim().with_source(str(repo))
    ab = compare_commits(local_host, str(repo), commits[0].sha, commits[-1].sha, spec=spec,
                         plan=Plan(repeats=2, bench=BENCH, progress=False, log_dir=str(tmp_path)))
    assert ab.spec_a.commit == commits[0].sha and ab.spec_b.commit == commits[-1].sha
    assert dict(ab.spec_a.env)["PYTHONPATH"].endswith("/python") and ab.spec_a.source != str(repo)
    assert ab.ratio < 0.85, ab.summary_text  # the later commit's code is ~30% slower per token
    assert subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True,
                          check=True).stdout.count("\n") == 1  # the worktrees are gone; the checkout never moved


def test_a_commit_that_needs_another_kernel_is_reported_as_such(local_host: Host, tmp_path: Path) -> None:
    repo = tmp_path / "sglang"
    commits = make_repo(repo, commits=3, regression_at=3, kernel_mismatch_at=2)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", commits[1].sha], check=True)
    spec = sim().with_source(str(repo), commit=commits[1].sha)
    with launch(local_host, spec, log_dir=str(tmp_path)) as server, pytest.raises(ExtensionMismatch) as info:
        server.wait_ready(timeout_s=120)
    assert "sglang-kernel is installed with version 0.4.9, which is less than the minimum required version 0.5.0" \
        in str(info.value)
    assert ExtensionMismatch not in _FATAL_ERRORS and not issubclass(ExtensionMismatch, _FATAL_ERRORS)  # skipped


def test_vllm_layout_and_source_dir(local_host: Host, tmp_path: Path) -> None:
    repo = tmp_path / "vllm"
    done = subprocess.run([sys.executable, "-m", "toolkit.sim", "make-repo", str(repo), "--layout", "vllm",
                           "--commits", "2", "--no-change", "--json"], capture_output=True, text=True, check=True)
    assert len(json.loads(done.stdout)) == 2 and (repo / "vllm" / "sim_perf.json").is_file()
    spec = ServerSpec.simulator("vllm", tp=1, port=free_port(), host="127.0.0.1", sim_startup_s=0.3)
    with launch(local_host, spec.with_source(str(repo)), log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=120)
        assert f"source {repo} (0.33.1.dev2)" in Path(server.log_path).read_text()


def test_the_source_check_reads_the_checkouts_own_kernel_requirement(local_host: Host, tmp_path: Path) -> None:
    """Before a launch: the checkout's launcher demands sglang-kernel >= 0.4.9; this venv has none."""
    repo = tmp_path / "sglang"
    make_repo(repo, commits=2, no_change=True, regression_at=None)
    spec = ServerSpec.sglang("m", python=sys.executable).with_source(str(repo), commit="abc")
    with pytest.raises(ExtensionMismatch) as info:
        check_source(local_host, spec)
    assert "needs sglang-kernel >= 0.4.9, which is not installed" in str(info.value)


@pytest.mark.parametrize(
    "engine, answer, fits, problem",
    [
        ("sglang", {"package": "sglang-kernel", "required": "0.4.9", "pinned": "0.4.9", "installed": "0.4.9"},
         True, None),
        ("sglang", {"package": "sglang-kernel", "required": "0.5.0", "pinned": "0.5.0", "installed": "0.4.9"},
         False, "needs sglang-kernel >= 0.5.0; 0.4.9 is installed"),
        ("sglang", {"package": "sgl-kernel", "required": "0.3.21", "pinned": "0.3.21", "installed": "0.3.21.post1"},
         False, "was built against sgl-kernel==0.3.21; 0.3.21.post1 is installed"),  # never assumed benign
        ("sglang", {"package": None, "required": None, "pinned": None, "installed": None}, True, None),
        ("vllm", {"compiled": ["vllm/_C.abi3.so"], "error": None}, True, None),
        ("vllm", {"compiled": ["vllm/_C.abi3.so"], "error": "ImportError: vllm/_C.abi3.so: undefined symbol: _ZN3c10"},
         False, "undefined symbol"),
        ("vllm", {"compiled": [], "error": None}, False, "it was not built"),
    ],
)
def test_parse_check(engine: str, answer: dict[str, object], fits: bool, problem: str | None) -> None:
    verdict = sources.parse_check(engine, "noise\nTOOLKIT_SOURCE_CHECK " + json.dumps(answer), "/src at abc")
    assert verdict.fits is fits
    assert (problem is None) == (verdict.problem is None) and (problem is None or problem in (verdict.problem or ""))


def test_an_unreadable_check_does_not_fit() -> None:
    assert not sources.parse_check("sglang", "Traceback ...\nSyntaxError", "/src").fits
    assert sources.mismatch_in_log(("x", "Exception: sglang-kernel is installed with version 0.4.9, which is less "
                                         "than the minimum required version 0.5.0.")) is not None
    warning = "Failed to import from vllm._C with ModuleNotFoundError(\"No module named 'vllm._C'\")"
    assert sources.mismatch_in_log((warning,)) is None  # a CPU client's noise
    assert sources.mismatch_in_log((warning,), from_source=True) == warning  # running a checkout: the mismatch
