"""The tier list names tests that exist: a renamed file or test must not slip into `make check` unseen."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tiers import REAL_FILES, TIMING_FILES

TESTS = Path(__file__).parent


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test")}


@pytest.mark.parametrize("entry", sorted(REAL_FILES | TIMING_FILES))
def test_every_tier_entry_names_a_folder_a_file_or_a_test_that_exists(entry: str) -> None:
    path, _, test = entry.partition("::")
    where = TESTS / path
    if path.endswith("/"):
        assert where.is_dir(), f"{entry}: no folder tests/{path}"
        return
    assert where.is_file(), f"{entry}: no file tests/{path}"
    assert not test or test in _test_names(where), f"{entry}: no test {test} in tests/{path}"


def test_xdist_groups_hold_with_the_installed_pytest(tmp_path: Path) -> None:
    """`make test` relies on `--dist loadgroup`: a group's tests on one worker (pytest 9 with xdist 3.8 broke it)."""
    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_collection_modifyitems(config, items):\n"
        "    for item in items:\n"
        "        if item.name.startswith('test_grouped'):\n"
        "            item.add_marker(pytest.mark.xdist_group('together'))\n")
    (tmp_path / "test_toy.py").write_text(
        "import pytest, time\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "def test_grouped(i): time.sleep(0.05)\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "def test_free(i): time.sleep(0.05)\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p",
                           "no:cacheprovider", "-p", "no:randomly", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    workers = set(re.findall(r"\[(gw\d)\] .*PASSED .*test_grouped\[\d\]@together", done.stdout))
    assert len(workers) == 1, f"the group ran on {workers or 'no named group'}:\n{done.stdout[-2000:]}"
