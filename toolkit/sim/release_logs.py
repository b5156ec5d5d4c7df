"""The log lines whose text changed between SGLang releases, as the imitated release prints them: pure.

Read in the released wheels (file:line relative to ``python/sglang/srt``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolkit.sim.release import SimRelease

__all__ = ["server_args_line", "capture_lines", "launch_sigquit_line", "running_sigquit_line",
           "scheduler_died_lines", "child_crashed_line", "watchdog_lines", "graph_capture_advice",
           "server_args_fields"]


def server_args_fields(release: SimRelease, fields: Mapping[str, object]) -> dict[str, object]:
    """Field names: ``cuda_graph_max_bs_decode`` from 0.5.14 (server_args.py:1939; 0.5.13 :735)."""
    out = dict(fields)
    if release.at_least("0.5.14") and "cuda_graph_max_bs" in out:
        out["cuda_graph_max_bs_decode"] = out.pop("cuda_graph_max_bs")
    return out


def server_args_line(release: SimRelease, fields: Mapping[str, object]) -> str:
    """``server_args=ServerArgs(...)`` up to 0.5.18 (entrypoints/engine.py:253 in 0.5.18),
    ``server_args={...}`` from 0.5.19 (engine.py:265; 0.5.23 :311). Every release prints the API key:
    ``_server_args_for_logging`` (0.5.22 engine.py:170-171, 0.5.23 :173-174) hides only watermark secrets."""
    shown = server_args_fields(release, fields)
    if release.at_least("0.5.19"):
        return f"server_args={shown!r}"
    return "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


def capture_lines(release: SimRelease, role: str, bs: Sequence[int], avail_gb: float, elapsed_s: float,
                  used_gb: float) -> tuple[str, str]:
    """(begin, end) of a CUDA-graph capture of ``role`` ("target" or "draft").

    0.4.6-0.5.13: ``Capture [draft ]cuda graph begin. ...`` (model_runner.py:1619 in 0.5.1); 0.5.14-0.5.22:
    ``Capture {role} decode CUDA graph begin. backend=full, ..., bs=[...]`` (cuda_graph_setup.py:496/507 in
    0.5.20); 0.5.23: ``bs`` moves to the end line (cuda_graph_setup.py:759/788).
    """
    after = avail_gb - used_gb
    if not release.at_least("0.5.14"):
        what = "cuda graph" if role == "target" else "draft cuda graph"
        return (f"Capture {what} begin. This can take up to several minutes. avail mem={avail_gb:.2f} GB",
                f"Capture {what} end. Time elapsed: {elapsed_s:.2f} s. mem usage={used_gb:.2f} GB. "
                f"avail mem={after:.2f} GB.")
    sizes, at_end = f"bs={list(bs)}, ", release.at_least("0.5.23")
    return (f"Capture {role} decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
            f"{'' if at_end else sizes}avail mem={avail_gb:.2f} GB",
            f"Capture {role} decode CUDA graph end. {sizes if at_end else ''}elapsed={elapsed_s:.2f} s, "
            f"mem usage={used_gb:.2f} GB, avail mem={after:.2f} GB.")


def launch_sigquit_line(release: SimRelease) -> str | None:
    """The launcher's SIGQUIT handler (entrypoints/engine.py): none in 0.4.0 (server.py:600-603), "proces."
    in 0.4.3 (:331), "process." from 0.4.6 (0.5.23 :1978)."""
    if not release.at_least("0.4.3"):
        return None
    word = "process" if release.at_least("0.4.6") else "proces"
    return f"Received sigquit from a child {word}. It usually means the child failed."


def running_sigquit_line(release: SimRelease) -> str | None:
    """The tokenizer manager's handler, once its loop runs, from 0.5.4 (managers/tokenizer_manager.py:2158;
    0.5.23 :4072-4074); asyncio calls it without arguments, hence ``signum=None``."""
    if release.at_least("0.5.4"):
        return "SIGQUIT received. signum=None, frame=None. It usually means one child failed."
    return launch_sigquit_line(release)


def scheduler_died_lines(release: SimRelease, rank: int, exit_code: int) -> tuple[list[str], bool]:
    """(lines, as a traceback) the launcher says of a scheduler dead during start-up: two lines up to 0.5.9
    (entrypoints/engine.py:804 in 0.4.10), a RuntimeError from 0.5.10 (engine.py:2002-2010 in 0.5.23)."""
    if release.at_least("0.5.10"):
        return ([f"RuntimeError: Rank {rank} scheduler died during initialization (exit code: {exit_code}). If exit "
                 "code is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check."],
                True)
    return ([f"Rank {rank} scheduler is dead. Please check if there are relevant logs.", f"Exit code: {exit_code}"],
            False)


def child_crashed_line(release: SimRelease, rank: int, pid: int, exit_code: int) -> tuple[str | None, bool]:
    """(line, whether the server dies) when a scheduler dies after start-up: 0.4.6-0.4.9 a SIGCHLD handler
    warns (entrypoints/engine.py:517 in 0.4.6.post5, :625 in 0.4.8); 0.4.10-0.5.9 nothing (requests hang);
    from 0.5.10 the SubprocessWatchdog logs and sends SIGQUIT (utils/watchdog.py:214-220 in 0.5.23)."""
    status = -exit_code if exit_code < 0 else exit_code << 8  # what os.waitpid reports
    if release.at_least("0.5.10"):
        return (f"Subprocess scheduler_{rank} (pid={pid}) crashed with exit code {exit_code}. Triggering SIGQUIT "
                "for cleanup...", True)
    if release.at_least("0.4.10") or not release.at_least("0.4.6"):
        return None, False
    if release.at_least("0.4.8"):
        return f"Child process unexpectedly failed with exitcode={status}. pid={pid}", False
    return f"Child process unexpectedly failed with an exit code {status}. pid={pid}", False


def watchdog_lines(release: SimRelease, timeout_s: float) -> list[str]:
    """The scheduler's watchdog line: up to 0.5.6 managers/scheduler.py:2283 (0.5.4), from 0.5.9
    utils/watchdog.py:150-155 (0.5.23)."""
    if release.at_least("0.5.9"):
        return [f"Scheduler watchdog timeout (self.watchdog_timeout={timeout_s!r}, self.soft=False)"]
    return [f"Watchdog timeout (self.watchdog_timeout={timeout_s!r})"]


def graph_capture_advice(release: SimRelease) -> list[str]:
    """SGLang's "Possible solutions" after a failed capture: up to 0.5.13
    model_executor/cuda_graph_runner.py:795-802 (0.4.10); from 0.5.14
    model_executor/runner_backend_utils/__init__.py:14-20 (0.5.23)."""
    head = ["Possible solutions:", "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)"]
    tail = ["Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose "]
    if release.at_least("0.5.14"):
        return [*head, "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)",
                "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. (Not recommended. Huge "
                "performance loss)", *tail]
    return [*head, "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
            "3. disable torch compile by not using --enable-torch-compile",
            "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)", *tail]
