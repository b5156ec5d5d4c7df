"""`python -m toolkit.sim`: a simulated server; `make-repo DIR`: a history; `telemetry`: fake nvidia-smi."""

from __future__ import annotations

import asyncio
import os
import sys
import time

from toolkit.sim import faults
from toolkit.sim.args import parse_server_args
from toolkit.sim.logs import banner
from toolkit.sim.repo import main as make_repo_main
from toolkit.sim.server import SimServer
from toolkit.sim.source import find_source
from toolkit.sim.telemetry import main as telemetry_main

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["make-repo"]:
        return make_repo_main(args[1:])
    if args[:1] == ["telemetry"]:
        return telemetry_main(args[1:])
    config = parse_server_args(args)
    try:
        source = find_source(config.engine, config.source_dir)
    except ValueError as exc:
        print(f"toolkit.sim: error: {exc}", file=sys.stderr)
        return 2
    if source is not None and source.import_error is not None:
        details = f"source {source.root} ({source.version}): this build fails to import"
        print(banner(config.engine, time.time(), os.getpid(), details), flush=True)
        module, name = source.import_error
        print("\n".join(faults.import_error_traceback(config.engine, source.package_root, module, name)),
              file=sys.stderr)
        return 1
    return asyncio.run(SimServer(config, source).run())
