"""`python -m toolkit.sim [FLAGS]` runs a simulated server; `make-repo DIR` writes a history; `telemetry` fakes nvidia-smi.

The serve path parses flags like the engine (argparse: unknown flag -> exit 2), reads
`--source-dir` if given (a broken checkout dies with the engine's ImportError traceback, exit 1),
then runs the server until SIGTERM or a fault ends it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from toolkit.sim.telemetry import main as telemetry_main

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["make-repo"]:
        from toolkit.sim.repo import main as make_repo_main

        return make_repo_main(args[1:])
    if args[:1] == ["telemetry"]:
        return telemetry_main(args[1:])
    from toolkit.sim import faults
    from toolkit.sim.args import parse_server_args
    from toolkit.sim.logs import banner
    from toolkit.sim.source import load_source_perf

    config = parse_server_args(args)
    source = None
    if config.source_dir is not None:
        try:
            source = load_source_perf(config.source_dir)
        except ValueError as exc:
            print(f"toolkit.sim: error: {exc}", file=sys.stderr)
            return 2
        if source.import_error is not None:
            details = f"source {config.source_dir} ({source.version}): this build fails to import"
            print(banner(config.engine, time.time(), os.getpid(), details), flush=True)
            module, name = source.import_error
            root = os.path.join(os.path.abspath(config.source_dir), "python")
            print("\n".join(faults.import_error_traceback(config.engine, root, module, name)), file=sys.stderr)
            return 1
    from toolkit.sim.server import SimServer  # aiohttp is imported only when a server really starts

    return asyncio.run(SimServer(config, source).run())
