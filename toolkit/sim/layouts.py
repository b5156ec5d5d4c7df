"""The files of one simulated commit, laid out like the real repository: pure.

SGLang in ``python/sglang`` (``python/pyproject.toml`` pins the kernel), vLLM in ``vllm/``, so
``with_source`` is tested on a real layout (``PYTHONPATH=<repo>/python`` finds an SGLang commit).
"""

from __future__ import annotations

import json

from toolkit.sim.source import PACKAGE_DIRS, PERF_FILE

__all__ = ["LAYOUTS", "KERNEL", "commit_files", "source_files"]

LAYOUTS = tuple(PACKAGE_DIRS)
# The kernel wheel the simulated install of the default release has (sglang 0.5.23 requires sglang-kernel
# >= 0.4.9, python/sglang/srt/entrypoints/engine.py:1962-1966); a "mismatch" commit needs a newer one.
KERNEL = ("sglang-kernel", "0.4.9")
KERNEL_TOO_NEW = "0.5.0"


def source_files(layout: str) -> tuple[str, ...]:
    """The source files a history touches, one per commit in turn."""
    root = PACKAGE_DIRS[layout]
    if layout == "vllm":
        return (f"{root}/v1/core/sched/scheduler.py", f"{root}/v1/worker/gpu_model_runner.py",
                f"{root}/v1/spec_decode/eagle.py", f"{root}/distributed/parallel_state.py")
    return (f"{root}/srt/managers/scheduler.py", f"{root}/srt/model_executor/model_runner.py",
            f"{root}/srt/speculative/eagle_worker.py", f"{root}/srt/layers/dp_attention.py")


def _engine_py(kernel: str) -> str:
    return ("# simulated: the launcher's kernel check, as sglang 0.5.23 python/sglang/srt/entrypoints/engine.py:1962\n"
            "def _set_envs_and_config():\n"
            f'    assert_pkg_version(\n        "{KERNEL[0]}",\n        "{kernel}",\n'
            f'        "Please reinstall the latest version with `pip install {KERNEL[0]} --force-reinstall`",\n    )\n')


def commit_files(layout: str, version: str, perf: dict[str, object], kernel: str | None = None) -> dict[str, str]:
    """Path -> text of the files that describe one commit's build (version, perf, kernel pin)."""
    root = PACKAGE_DIRS[layout]
    files = {
        "README.md": f"# {layout} (simulated source tree)\n\nWritten by `python -m toolkit.sim make-repo --layout "
                     f"{layout}`; the package is in `{root}/` as in the real repository, and `{root}/{PERF_FILE}` "
                     "says how fast this commit's simulated build runs.\n",
        f"{root}/__init__.py": "",
        f"{root}/version.py": f'__version__ = "{version}"\n',
        f"{root}/{PERF_FILE}": json.dumps({**perf, "version": version}, indent=2) + "\n",
    }
    if layout == "sglang":
        pinned = kernel or KERNEL[1]
        files["python/pyproject.toml"] = (f'[project]\nname = "sglang"\nversion = "{version}"\n'
                                          f'dependencies = ["{KERNEL[0]}=={pinned}"]\n')
        files[f"{root}/srt/entrypoints/engine.py"] = _engine_py(pinned)
    else:
        files["pyproject.toml"] = f'[project]\nname = "vllm"\nversion = "{version}"\n'
    return files
