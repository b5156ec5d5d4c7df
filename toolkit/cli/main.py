"""`python -m toolkit SUBCOMMAND ...`: one dispatcher, each subcommand a module imported only when asked for.

`python -m toolkit logs classify` must not pay for pandas, seaborn or aiohttp.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

Entry = Callable[[list[str]], int]


def _logs(argv: list[str]) -> int:
    from toolkit.cli.logs import main

    if argv[:1] == ["follow"]:  # only following reaches hosts: `logs classify` does not import SSH
        from toolkit.cli.follow import follow

        return main(argv, follow=follow)
    return main(argv)


def _bench(argv: list[str]) -> int:
    from toolkit.cli.bench import main

    return main(argv)


def _report(argv: list[str]) -> int:
    from toolkit.cli.report import main

    return main(argv)


def _sim(argv: list[str]) -> int:
    from toolkit.sim.cli import main

    return main(argv)


def _ps(argv: list[str]) -> int:
    from toolkit.cli.servers import ps_main

    return ps_main(argv)


def _stop(argv: list[str]) -> int:
    from toolkit.cli.servers import stop_main

    return stop_main(argv)


def _demo(argv: list[str]) -> int:
    from toolkit.cli.demo import main

    return main(argv)


SUBCOMMANDS: dict[str, tuple[Entry, str]] = {
    "logs": (_logs, "classify a server log, or follow one live: logs classify FILE | logs follow HOST:PATH"),
    "bench": (_bench, "benchmark an OpenAI-compatible server (TTFT, ITL, TPOT, tok/s)"),
    "report": (_report, "write the post-mortem of a journal: report JOURNAL --out DIR"),
    "sim": (_sim, "run the simulated SGLang/vLLM server, or: sim make-repo DIR ..."),
    "ps": (_ps, "list the servers this user launched on a host, and which outlived their driver"),
    "stop": (_stop, "stop servers whose driver is gone: stop --all-mine [--host user@h:port] | stop PID"),
    "demo": (_demo, "run the onboarding walkthrough on the simulator and write out/"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"} or args[0] not in SUBCOMMANDS:
        lines = ["usage: python -m toolkit SUBCOMMAND [...]", "", "subcommands:"]
        lines += [f"  {name:<8} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
        print("\n".join(lines), file=sys.stdout if args[:1] in (["-h"], ["--help"]) else sys.stderr)
        if args and args[0] not in {"-h", "--help"}:
            print(f"\nerror: unknown subcommand {args[0]!r}", file=sys.stderr)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    entry, _ = SUBCOMMANDS[args[0]]
    try:
        return int(entry(args[1:]) or 0)
    except BrokenPipeError:  # `... | head`: the reader has what it wanted; no traceback, and none at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
