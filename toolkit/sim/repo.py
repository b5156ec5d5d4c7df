"""`python -m toolkit.sim make-repo DIR`: a git history whose commits change the simulated build's speed.

Laid out like the real repository (toolkit/sim/layouts.py). Every commit nudges `sim_perf.json` harmlessly
(+-0.2%); from commit K (`--regression-at`) decode steps are ~20% slower; `--no-change` keeps them equal
(the incident's "the git pull was not the culprit"). `--broken-at J` fails to import at J (a bisect's
`skip`), `--kernel-mismatch-at J` needs a newer kernel wheel at J; J+1 fixes either. Authors and dates are
fixed, so the same arguments give the same SHAs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from toolkit.sim.latency import PerfParams
from toolkit.sim.layouts import KERNEL_TOO_NEW, LAYOUTS, commit_files, source_files

__all__ = ["CommitInfo", "main", "make_repo"]

MESSAGES = (
    "[Fix] Handle empty stop strings in sampling params",
    "[Refactor] Move attention backend selection into a registry",
    "[Doc] Clarify --speculative-attention-mode in the server arguments",
    "[CI] Bump flashinfer in the nightly image",
    "[Feature] Report avg_spec_accept_length in /get_server_info",
    "[Fix] Tokenizer manager leaks rids on client abort",
    "[Minor] Remove unused imports in model_runner.py",
    "[Perf] Cache rope cos/sin tables per device",
    "[Test] Add an EAGLE3 TP8 accuracy test",
    "[Fix] Correct token usage in the Decode batch log line",
    "[Refactor] Split scheduler metrics into a mixin",
    "[Bugfix] Avoid a double free in radix cache eviction",
    "[Feature] Accept --decode-log-interval 0 to silence decode logs",
    "[Fix] Respect --served-model-name in /v1/models",
)
REGRESSION_MESSAGE = "[Perf] Use NCCL all-reduce for small batches instead of the custom all-reduce kernel"
BROKEN_MESSAGE = "[Refactor] Rename compute_dp_attention_world_info to compute_dp_attention_info"
FIX_MESSAGE = "[Fix] Restore compute_dp_attention_world_info import in the scheduler"
KERNEL_MESSAGE = "[Kernel] Require the new sglang-kernel for the fused MoE path"


@dataclass(frozen=True)
class CommitInfo:
    index: int  # 1 = oldest
    sha: str
    message: str
    decode_step_ms: float
    broken: bool
    kernel_mismatch: bool = False


_STAMP0 = 1767603600  # 2026-01-05 09:00 UTC; commit i is stamped i hours later


def _git(directory: Path, *args: str, stdin: bytes | None = None) -> str:
    stamp = f"{_STAMP0} +0000"
    env = {**os.environ, "GIT_AUTHOR_NAME": "Sim Developer", "GIT_AUTHOR_EMAIL": "sim@example.com",
           "GIT_COMMITTER_NAME": "Sim Developer", "GIT_COMMITTER_EMAIL": "sim@example.com",
           "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(directory), *args], input=stdin, env=env, check=True,
                          capture_output=True).stdout.decode().strip()


def make_repo(directory: str | Path, commits: int, regression_at: int | None, no_change: bool = False,
              broken_at: int | None = None, regression_pct: float = 20.0, layout: str = "sglang",
              kernel_mismatch_at: int | None = None) -> list[CommitInfo]:
    """Write the history; returns one CommitInfo per commit, oldest first."""
    root = Path(directory)
    if layout not in LAYOUTS:
        raise ValueError(f"--layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    if kernel_mismatch_at is not None and (layout != "sglang" or not 2 <= kernel_mismatch_at <= commits
                                           or kernel_mismatch_at in (regression_at, broken_at)):
        raise ValueError(f"--kernel-mismatch-at needs --layout sglang, a commit between 2 and {commits}, and one "
                         "that is neither --regression-at nor --broken-at")
    if commits < 2:
        raise ValueError("--commits must be at least 2 (a good and a bad end)")
    if not no_change and (regression_at is None or not 2 <= regression_at <= commits):
        raise ValueError(f"--regression-at must be between 2 and --commits ({commits}), or pass --no-change")
    if broken_at is not None and (not 2 <= broken_at <= commits or broken_at == regression_at):
        raise ValueError(f"--broken-at must be between 2 and {commits} and differ from --regression-at")
    if root.exists() and any(root.iterdir()):
        raise ValueError(f"{root} exists and is not empty; make-repo writes a fresh repository")
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", "-b", "main")
    base = PerfParams()
    out: list[CommitInfo] = []
    files: dict[str, str] = {}
    stream: list[bytes] = []
    for i in range(1, commits + 1):
        slow = not no_change and regression_at is not None and i >= regression_at
        step = base.decode_step_ms * (1 + regression_pct / 100 if slow else 1.0)
        if not no_change:
            step *= 1 + ((i * 7919) % 9 - 4) * 0.0005  # a deterministic harmless change of at most +-0.2%
        broken, mismatch = broken_at == i, kernel_mismatch_at == i
        message = (REGRESSION_MESSAGE if i == regression_at and not no_change else BROKEN_MESSAGE if broken
                   else KERNEL_MESSAGE if mismatch
                   else FIX_MESSAGE if broken_at is not None and i == broken_at + 1
                   else "Initial import of the simulated source tree" if i == 1 else MESSAGES[(i - 2) % len(MESSAGES)])
        perf: dict[str, object] = {"schema": 1, "perf": {**base.to_mapping(), "decode_step_ms": round(step, 4)}}
        if broken:
            perf["import_error"] = {"module": f"{layout}.srt.layers.dp_attention" if layout == "sglang" else
                                    "vllm.v1.attention.backends.utils", "name": "compute_dp_attention_world_info"}
        version = f"0.5.23.dev{i}" if layout == "sglang" else f"0.33.1.dev{i}"
        changed = commit_files(layout, version, perf, KERNEL_TOO_NEW if mismatch else None)
        sources = source_files(layout)
        touched = sources[i % len(sources)]
        changed[touched] = files.get(touched, "") + f"# {message}\n"
        stream.append(_commit_record(i, message, {k: v for k, v in changed.items() if files.get(k) != v}))
        files.update(changed)
        out.append(CommitInfo(i, "", message, round(step, 4), broken, mismatch))
    # One `git fast-import` writes every commit (a 1,024-commit history in about a second, where a
    # `git commit` per commit took minutes); the commits are byte for byte those `git commit` made.
    _git(root, "fast-import", "--quiet", "--done", stdin=b"".join(stream) + b"done\n")
    _git(root, "reset", "-q", "--hard", "main")
    shas = _git(root, "rev-list", "--reverse", "main").split()
    return [dataclasses.replace(info, sha=sha) for info, sha in zip(out, shas, strict=True)]


def _commit_record(index: int, message: str, files: dict[str, str]) -> bytes:
    """One commit of a fast-import stream: the identity of ``_git``, stamped ``index`` hours after it."""
    who = f"Sim Developer <sim@example.com> {_STAMP0 + 3600 * index} +0000"
    text = message.encode() + b"\n"
    lines = [f"commit refs/heads/main\nmark :{index}\nauthor {who}\ncommitter {who}\n".encode(),
             f"data {len(text)}\n".encode() + text]
    if index > 1:
        lines.append(f"from :{index - 1}\n".encode())
    for path, content in files.items():
        data = content.encode()
        lines.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
    return b"".join(lines) + b"\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolkit.sim make-repo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", metavar="DIR", help="where to create the repository (must be empty or absent)")
    parser.add_argument("--commits", type=int, default=8, help="number of commits (default 8)")
    parser.add_argument("--regression-at", type=int, default=None, metavar="K",
                        help="1-based commit that makes decode ~20%% slower (kept afterwards)")
    parser.add_argument("--regression-pct", type=float, default=20.0, help="size of the regression in percent")
    parser.add_argument("--no-change", action="store_true", help="identical performance on every commit")
    parser.add_argument("--broken-at", type=int, default=None, metavar="J",
                        help="commit J fails at start-up with an ImportError; J+1 fixes it")
    parser.add_argument("--layout", choices=LAYOUTS, default="sglang",
                        help="sglang: the package in python/sglang (default); vllm: vllm/ at the top")
    parser.add_argument("--kernel-mismatch-at", type=int, default=None, metavar="J",
                        help="commit J needs a newer kernel wheel than the simulated install (SGLang's launcher "
                             "refuses to start); J+1 reverts it")
    parser.add_argument("--json", action="store_true", help="print the commits as JSON")
    ns = parser.parse_args(argv)
    try:
        infos = make_repo(ns.directory, ns.commits, ns.regression_at, ns.no_change, ns.broken_at, ns.regression_pct,
                          ns.layout, ns.kernel_mismatch_at)
    except ValueError as exc:
        parser.error(str(exc))
    if ns.json:
        print(json.dumps([info.__dict__ for info in infos], indent=2))
    else:
        for info in infos:
            print(f"{info.index:3d} {info.sha[:12]} {info.decode_step_ms:8.4f} ms  {info.message}")
    return 0
