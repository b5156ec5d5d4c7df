"""Run a Python server under torch.profiler, started and stopped by signals: for engines with no profile endpoint.

    python -m toolkit.observe.profiled --trace-dir DIR -- transformers serve MODEL --port 8000

runs ``transformers`` *in this process*, so that the profiler sees its CUDA kernels and Python frames.
``kill -USR1 PID`` starts a profile; ``kill -USR2 PID`` writes ``DIR/profile-<n>-<pid>.trace.json.gz`` (under
a dot-name, then renamed: a reader never sees half a file). CPU operators are recorded only on the main
thread, which serves HTTP. Imports nothing of the toolkit: it runs in the engine's environment.
"""

from __future__ import annotations

import argparse
import os
import runpy
import signal
import sys
import time
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

__all__ = ["main", "program_runner"]


def program_runner(argv: list[str]) -> Callable[[], Any]:
    """How to run ``argv`` in this process: a console script, ``python -m MOD``, or a script path."""
    head = os.path.basename(argv[0])
    if head.startswith("python") and len(argv) > 2 and argv[1] == "-m":
        module = argv[2]
        sys.argv = [module, *argv[3:]]
        return lambda: runpy.run_module(module, run_name="__main__", alter_sys=True)
    if argv[0].endswith(".py"):
        sys.argv = list(argv)
        return lambda: runpy.run_path(argv[0], run_name="__main__")
    for point in entry_points(group="console_scripts"):
        if point.name == head:
            sys.argv = [argv[0], *argv[1:]]
            return point.load()
    raise SystemExit(f"toolkit.observe.profiled: {argv[0]!r} is no console script, `python -m MODULE` or .py file")


class SignalProfiler:
    """SIGUSR1 starts a torch profile, SIGUSR2 stops it and writes the trace; one at a time."""

    def __init__(self, trace_dir: str, with_stack: bool) -> None:
        self.trace_dir = trace_dir
        self.with_stack = with_stack
        self.count = 0
        self.active: Any = None
        self.started = 0.0

    def say(self, text: str) -> None:
        print(f"toolkit.observe.profiled[{os.getpid()}]: {text}", file=sys.stderr, flush=True)

    def start(self, *_: object) -> None:
        if self.active is not None:
            self.say("a profile is already running; SIGUSR2 stops it")
            return
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.active = torch.profiler.profile(activities=activities, with_stack=self.with_stack, record_shapes=False)
        self.active.start()
        self.started = time.time()
        names = ", ".join(a.name for a in activities)
        self.say(f"profiling started (torch {torch.__version__}, activities {names})")

    def stop(self, *_: object) -> None:
        if self.active is None:
            self.say("no profile is running; SIGUSR1 starts one")
            return
        profiler, self.active = self.active, None
        stopped = time.time()
        profiler.stop()
        self.count += 1
        os.makedirs(self.trace_dir, exist_ok=True)
        name = f"profile-{self.count}-{os.getpid()}.trace.json.gz"
        partial = os.path.join(self.trace_dir, f".{name}.partial.json.gz")
        profiler.export_chrome_trace(partial)
        final = os.path.join(self.trace_dir, name)
        os.replace(partial, final)
        self.say(f"profile of {stopped - self.started:.1f} s written to {final} ({os.path.getsize(final)} bytes) "
                 f"in {time.time() - stopped:.1f} s")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        raise SystemExit("usage: python -m toolkit.observe.profiled --trace-dir DIR [--no-stack] -- PROGRAM ARGS...")
    cut = args.index("--")
    parser = argparse.ArgumentParser(prog="python -m toolkit.observe.profiled", description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", required=True, help="where traces are written")
    parser.add_argument("--no-stack", action="store_true", help="do not record Python frames (smaller traces)")
    options = parser.parse_args(args[:cut])
    program = args[cut + 1:]
    if not program:
        parser.error("no program after --")
    profiler = SignalProfiler(os.path.expanduser(options.trace_dir), with_stack=not options.no_stack)
    signal.signal(signal.SIGUSR1, profiler.start)
    signal.signal(signal.SIGUSR2, profiler.stop)
    profiler.say(f"running {' '.join(program[:3])} ...; SIGUSR1 starts a profile, SIGUSR2 writes it to "
                 f"{profiler.trace_dir}")
    result = program_runner(program)()
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
