"""`python -m toolkit logs ...`: classify a server log file, or follow one live (docs/log-rules.md).

``classify`` reads the file in chunks: memory does not grow with its length. Exit status: 0 ready or
starting, 1 failed, 2 when the file cannot be classified or the command line is wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TextIO

from toolkit.errors import ToolkitError
from toolkit.logs import ENGINES, LogEvent, LogSummary, Verdict, classify_chunks
from toolkit.logs.inert import inert_text
from toolkit.logs.summary import shorten
from toolkit.redaction import redact_obj, redact_text

__all__ = ["main", "render_summary", "render_event", "use_colour"]

_CHUNK_BYTES = 1 << 20

_COLOURS = {Verdict.FATAL: "\x1b[1;31m", Verdict.READY: "\x1b[1;32m", Verdict.BENIGN: "\x1b[2m",
            Verdict.WARNING: "\x1b[33m", Verdict.PROGRESS: "\x1b[36m", Verdict.METRIC: "\x1b[34m"}
_RESET = "\x1b[0m"


def _paint(text: str, code: str, colour: bool) -> str:
    return f"{code}{text}{_RESET}" if colour and code else text


def render_summary(summary: LogSummary, *, path: str, colour: bool) -> str:
    """The human-readable summary of one classified log."""
    state_code = {"ready": "\x1b[1;32m", "failed": "\x1b[1;31m"}.get(summary.state, "\x1b[1;33m")
    out = [f"{path}: {_paint(summary.state.upper(), state_code, colour)}"]
    if summary.ready_line is not None:
        proof = " (serving lines: the log was joined mid-run)" if summary.ready_evidence == "serving lines" else ""
        out.append(f"  ready at line {summary.ready_line}{proof}")
    if summary.fatal_line is not None:
        out.append(_paint(f"  fatal at line {summary.fatal_line} ({summary.fatal_rule}): {inert_text(summary.fatal_reason or '')}",
                          _COLOURS[Verdict.FATAL], colour))
        out += [f"      | {shorten(inert_text(line), 300)}" for line in summary.fatal_context[-8:]]
        if summary.hint:
            out.append(f"  what to try: {summary.hint}")
    if summary.phases:
        out.append("  phases: " + ", ".join(f"{name}@{n}" for name, n in summary.phases))
    if summary.benign_lines:
        shown = ", ".join(map(str, summary.benign_lines[:20])) + (" ..." if summary.benign_count > 20 else "")
        out.append(_paint(f"  benign error-looking lines ({summary.benign_count}): {shown}", _COLOURS[Verdict.BENIGN], colour))
    if summary.warning_lines:
        out.append(f"  warnings: {len(summary.warning_lines)}")
    if summary.metrics:
        kinds = Counter(m.kind for m in summary.metrics)
        last = f" (the last {len(summary.metrics)} of {summary.metric_count})" if summary.metric_count > len(summary.metrics) else ""
        out.append("  metric lines: " + ", ".join(f"{k} x{n}" for k, n in kinds.items()) + last)
    return "\n".join(out)


def render_event(event: LogEvent, *, colour: bool) -> str:
    """One classified line as `follow` prints it (a traceback with its context), its escapes made inert."""
    tag = f"{event.verdict.value:<8}"
    lines = [*event.context, event.raw] if event.context else [event.raw]
    body = "\n".join(shorten(inert_text(line)) for line in lines)
    return _paint(f"{event.line_no:>6} {tag} {body}", _COLOURS.get(event.verdict, ""), colour)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m toolkit logs", description="Classify or follow an LLM server log.")
    sub = parser.add_subparsers(dest="command", required=True)
    classify = sub.add_parser("classify", help="classify a log file and summarize it")
    classify.add_argument("file", help="the log file ('-' for standard input)")
    classify.add_argument("--engine", choices=ENGINES, default="auto")
    classify.add_argument("--json", action="store_true", help="print one JSON object")
    classify.add_argument("--max-metrics", type=int, default=1000, metavar="N",
                          help="metric rows to keep and print: the last N (default 1000); metric_count counts them all")
    classify.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    follow = sub.add_parser("follow", help="follow a live log on a host: [user@]HOST:PATH")
    follow.add_argument("target", help="[user@]HOST:PATH, or a local PATH")
    follow.add_argument("--engine", choices=ENGINES, default="auto")
    follow.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    follow.add_argument("--wait-s", type=float, default=60.0, metavar="S",
                        help="how long to wait for a log that does not exist yet (default 60)")
    return parser


def use_colour(choice: str, stream: TextIO) -> bool:
    return choice == "always" or (choice == "auto" and stream.isatty())


def _classify(args: argparse.Namespace) -> int:
    if args.max_metrics < 0:
        print(f"error: --max-metrics must be 0 or more, got {args.max_metrics}", file=sys.stderr)
        return 2
    name = "standard input" if args.file == "-" else args.file
    try:
        with nullcontext(sys.stdin.buffer) if args.file == "-" else Path(args.file).open("rb") as stream:
            chunks = iter(lambda: stream.read(_CHUNK_BYTES), b"")
            summary = classify_chunks(chunks, engine=args.engine, max_metrics=args.max_metrics, name=name)
    except OSError as exc:
        print(f"error: cannot read {args.file}: {exc.strerror or exc}; pass an existing, readable log file", file=sys.stderr)
        return 2
    except ToolkitError as exc:
        hint = f"; {exc.hint}" if exc.hint else ""
        print(f"error: {exc.message}{hint}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(redact_obj(summary.to_dict())))
    else:
        print(redact_text(render_summary(summary, path=args.file, colour=use_colour(args.color, sys.stdout))))
    return 1 if summary.state == "failed" else 0


def main(argv: Sequence[str] | None = None, *, follow: Callable[[argparse.Namespace], int] | None = None) -> int:
    """``python -m toolkit logs``; ``follow`` comes only with ``logs follow``: classify never imports SSH."""
    parser = _parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse printed the usage and the error
        return int(exc.code or 0)
    try:
        if args.command == "classify":
            return _classify(args)
        if follow is None:
            raise ValueError("logs follow needs toolkit.cli.follow.follow: run it as python -m toolkit logs follow")
        return follow(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
