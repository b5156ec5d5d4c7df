"""The notebook vocabulary is small and deliberate: this pins it."""

from __future__ import annotations

import subprocess
import sys

import toolkit

EXPECTED = {
    "Host", "HostGroup", "SlurmTarget", "ContainerTarget", "ServerSpec", "Server", "launch", "launch_multinode", "leftovers", "Journal", "Load", "bench", "Plan", "sweep",
    "compare", "compare_flag", "perf_bisect", "compare_commits", "env_report", "profile", "observed", "agreement", "greedy_outputs",
    "compare_outputs", "compare_profiles", "diagnose", "diagnose_commits", "validate_spec", "LogView", "ServerPanel", "measure",
    "ToolkitError", "errors", "logs", "plots", "report",
}


def test_all_is_pinned() -> None:
    assert set(toolkit.__all__) == EXPECTED


def test_every_public_name_resolves() -> None:
    for name in toolkit.__all__:
        assert getattr(toolkit, name) is not None, name


def test_import_is_cheap_and_has_no_side_effects() -> None:
    """Every simulated TP rank imports the package: it must not pull pandas, fabric or widgets."""
    code = "import sys, toolkit; heavy = {'pandas', 'fabric', 'ipywidgets', 'matplotlib', 'aiohttp'}; print(sorted(heavy & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_unknown_name_is_a_clear_attribute_error() -> None:
    try:
        toolkit.Lunch  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "Lunch" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_bench_is_the_function_in_any_import_order() -> None:
    """`tk.bench` is the function `toolkit.benchmark.bench`, whichever module was imported first."""
    code = (
        "import toolkit.benchmark.client, toolkit as tk, toolkit.benchmark.metrics as m; "
        "from toolkit.benchmark.runner import bench; "
        "print(tk.bench is bench, type(tk.bench).__name__, m.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "function", "toolkit.benchmark.metrics"]


def test_the_demo_finds_the_onboarding_notebook_of_this_checkout() -> None:
    """`make demo` runs `python -m toolkit demo`, which reads the notebook beside the package."""
    from toolkit.cli.demo import NOTEBOOK

    assert NOTEBOOK.is_file() and NOTEBOOK.parent.name == "notebooks", NOTEBOOK


def test_every_subcommand_answers_help_with_its_own_name() -> None:
    for sub in ("logs", "bench", "report", "sim", "demo"):
        out = subprocess.run([sys.executable, "-m", "toolkit", sub, "--help"], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, (sub, out.stderr[-500:])
        assert f"python -m toolkit {sub}" in out.stdout.splitlines()[0], (sub, out.stdout[:200])
