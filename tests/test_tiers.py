"""The tier list names tests that exist: a renamed file or test must not slip into `make check` unseen."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tiers import HEAVY_FILES, REAL_FILES, TIMING_FILES

TESTS = Path(__file__).parent


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test")}


@pytest.mark.parametrize("entry", sorted(REAL_FILES))
def test_every_real_tier_entry_names_a_folder_a_file_or_a_test_that_exists(entry: str) -> None:
    path, _, test = entry.partition("::")
    where = TESTS / path
    if path.endswith("/"):
        assert where.is_dir(), f"{entry}: no folder tests/{path}"
        return
    assert where.is_file(), f"{entry}: no file tests/{path}"
    assert not test or test in _test_names(where), f"{entry}: no test {test} in tests/{path}"


@pytest.mark.parametrize("path", sorted(TIMING_FILES | HEAVY_FILES))
def test_every_timing_or_heavy_file_exists(path: str) -> None:
    assert (TESTS / path).is_file(), f"tests/tiers.py names tests/{path}, which does not exist"
    assert not TIMING_FILES & HEAVY_FILES
