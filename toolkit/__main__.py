"""`python -m toolkit SUBCOMMAND ...`: each subcommand lives with the module that owns it."""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module exposing `main(argv: list[str]) -> int`, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "logs": ("toolkit.logs_cli", "classify a server log, or follow one live: logs classify FILE | logs follow HOST:PATH"),
    "bench": ("toolkit.bench.cli", "benchmark an OpenAI-compatible server (TTFT, ITL, TPOT, tok/s)"),
    "report": ("toolkit.report", "write the post-mortem of a journal: report JOURNAL --out DIR"),
    "sim": ("toolkit.sim.cli", "run the simulated SGLang/vLLM server, or: sim make-repo DIR ..."),
    "demo": ("toolkit.demo", "run the onboarding walkthrough on the simulator and write out/"),
}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"} or args[0] not in SUBCOMMANDS:
        lines = ["usage: python -m toolkit SUBCOMMAND [...]", "", "subcommands:"]
        lines += [f"  {name:<8} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
        print("\n".join(lines), file=sys.stdout if args[:1] in (["-h"], ["--help"]) else sys.stderr)
        if args and args[0] not in {"-h", "--help"}:
            print(f"\nerror: unknown subcommand {args[0]!r}", file=sys.stderr)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    module = importlib.import_module(SUBCOMMANDS[args[0]][0])
    return int(module.main(args[1:]) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
