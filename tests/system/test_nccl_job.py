"""The env check against a real torch.distributed job, on CPUs (gloo): the path the GPU run takes.

The same `benchmarks/nccl_env_check.py` runs on a GPU host with `--backend nccl`, where NCCL's
own `set by environment to` echoes are compared too (docs/nccl-env-check.md has that run).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CPU_PYTHON = REPO / ".venv-cpu" / "bin" / "python"


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("nccl_env_check", REPO / "benchmarks" / "nccl_env_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_two_gloo_ranks_carry_the_env_and_the_override_is_flagged(tmp_path: Path) -> None:
    if not CPU_PYTHON.exists():
        pytest.fail(f"{CPU_PYTHON} is missing: `make cpu-server` builds it (make test does)")
    summary = _script().run(str(CPU_PYTHON), 2, "gloo", tmp_path, duration_s=15, port=29611)
    assert summary["workers"] == 2
    statuses = summary["statuses"]
    for variable in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS"):
        assert statuses[variable] == ["ok"], summary
    assert statuses["NCCL_CUMEM_ENABLE"] == ["overridden"], summary  # the job's own override, as SGLang's
    assert summary["classified"]["ready"] == 1 and summary["classified"]["fatal"] == 0
    assert (tmp_path / "env_report_gloo_2_sglang-0.4.csv").exists()
    assert (tmp_path / "logs").exists()


@pytest.mark.slow
def test_a_newer_release_keeps_the_users_value_and_a_dropped_variable_is_missing_on_every_rank(tmp_path: Path) -> None:
    """SGLang 0.5.4.post2+ keeps an exported NCCL_CUMEM_ENABLE; a variable lost before the ranks is caught."""
    if not CPU_PYTHON.exists():
        pytest.fail(f"{CPU_PYTHON} is missing: `make cpu-server` builds it (make test does)")
    summary = _script().run(str(CPU_PYTHON), 2, "gloo", tmp_path, duration_s=15, port=29613, imitate="sglang-0.5",
                            drop=("NCCL_ALGO",))
    statuses = summary["statuses"]
    assert statuses["NCCL_CUMEM_ENABLE"] == ["ok"], summary  # the user's 1 reaches every rank
    assert statuses["NCCL_ALGO"] == ["missing"], summary  # on both workers; the launcher still has it
    assert statuses["NCCL_PROTO"] == ["ok"], summary
    assert "NCCL_ALGO missing in 2 of 3" in str(summary["summary"])
