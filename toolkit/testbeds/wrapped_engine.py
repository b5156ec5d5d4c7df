"""An engine installed the way the GPU machine has vLLM 0.25.0: bash wrappers that put a folder on PYTHONPATH.

``../shared/gpu/vllm_setup.sh`` makes ``/tmp/vv/bin/{python,vllm}`` bash scripts that export
``PYTHONPATH=/tmp/site`` (``pip --target``); the first field run (issue 23) read the release through the
``#!`` line of ``vllm`` (bash) and found none. :func:`wrapped_vllm` builds that shape: vLLM's metadata, the
two wrappers, ``vllm`` answering ``--help`` as the simulator of that release and logging to ``calls.txt``.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

__all__ = ["wrapped_vllm"]


def wrapped_vllm(root: Path, version: str = "0.25.0") -> Path:
    """Build the install under ``root``; returns ``root/bin/python`` (pass it as ``python=``)."""
    dist = root / "site" / f"vllm-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    (root / "bin").mkdir()
    head = f"#!/bin/bash\nexport PYTHONPATH={shlex.quote(str(root / 'site'))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
    (root / "bin" / "python").write_text(head + f'exec {shlex.quote(sys.executable)} "$@"\n')
    (root / "bin" / "vllm").write_text(
        head + f'echo "$*" >> {shlex.quote(str(root / "calls.txt"))}\n'
        f"exec {shlex.quote(sys.executable)} -m toolkit.sim --engine vllm --sim-engine-version {shlex.quote(version)} "
        "--help\n")
    for name in ("python", "vllm"):
        (root / "bin" / name).chmod(0o755)
    return root / "bin" / "python"
