"""`python -m toolkit logs follow [user@]HOST:PATH`: classify a live log, on this machine or a host.

Apart from :mod:`toolkit.cli.logs` (which parses its command line): ``logs classify`` must not import SSH.
"""

from __future__ import annotations

import argparse
import difflib
import shlex
import sys
import time

from toolkit.cli.logs import render_event, use_colour
from toolkit.errors import ToolkitError
from toolkit.host.host import Host
from toolkit.logs import LogClassifier
from toolkit.logs.stream import iter_line_batches
from toolkit.redaction import redact_text

__all__ = ["follow"]


def _split_target(target: str) -> tuple[str | None, str | None, str]:
    """``user@host:path`` -> (user, host, path); a plain path -> (None, None, path)."""
    head, sep, path = target.partition(":")
    if not sep or "/" in head or not path:
        return None, None, target
    user, at, host = head.rpartition("@")
    return (user if at else None), host, path


_QUIET_WAIT_S = 2.0  # a log about to be created (a launch starting) appears within this, unannounced


def _appeared(host: Host, path: str, wait_s: float) -> bool:
    """Whether ``path`` appears on ``host`` within ``wait_s``, saying so when it waits.

    ``tail -F`` on a misspelt path waits forever in silence (issue 20).
    """
    deadline = time.monotonic() + wait_s
    announce_at = time.monotonic() + min(_QUIET_WAIT_S, wait_s)
    announced = False
    while host.run(f"test -e {shlex.quote(path)}", check=False).exit_code != 0:
        now = time.monotonic()
        if now >= deadline:
            return False
        if not announced and now >= announce_at:
            print(f"waiting: {path} does not exist on {host.name} (yet); following it if it appears within "
                  f"{wait_s:g} s (Ctrl-C to stop)", file=sys.stderr, flush=True)
            announced = True
        time.sleep(0.25)
    return True


def _missing(host: Host, path: str, wait_s: float) -> str:
    folder, _, name = path.rstrip("/").rpartition("/")
    listing = host.run(f"ls -1 -- {shlex.quote(folder or '/')}", check=False)
    close = difflib.get_close_matches(name, listing.stdout.splitlines(), n=3) if listing.exit_code == 0 else []
    where = f"; did you mean {', '.join(f'{folder}/{c}' for c in close)}?" if close else (
        f"; {folder or '/'} does not exist there either" if listing.exit_code else "")
    return (f"error: {path} did not appear on {host.name} within {wait_s:g} s{where} "
            "(check the path, or pass --wait-s for a log that starts later)")


def follow(args: argparse.Namespace) -> int:
    """``logs follow TARGET``: print each classified line of a live log; exit 1 when it ends failed."""
    user, hostname, path = _split_target(args.target)
    classifier = LogClassifier(engine=args.engine)
    colour = use_colour(args.color, sys.stdout)
    try:
        host = Host.local() if hostname in (None, "localhost", "127.0.0.1") else Host(hostname, user=user)
        if not _appeared(host, path, args.wait_s):
            print(_missing(host, path, args.wait_s), file=sys.stderr)
            return 2
        # tail's own notes ("file truncated", "has become inaccessible") are not log lines: the API follower drops
        # them the same way (toolkit/server/follow.py)
        stream = host.open_stream(f"tail -n +1 -F {shlex.quote(path)} 2>/dev/null")
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    chunks = (chunk for chunk in iter(lambda: stream.read(0.5), b"") if chunk is not None)
    try:  # split as `logs classify` splits: linear in a line's length, a long line kept by its ends
        for lines in iter_line_batches(chunks, live=True):
            for raw in lines:
                for event in classifier.feed(redact_text(raw)):
                    print(render_event(event, colour=colour), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        stream.close()
    for event in classifier.finish():
        print(render_event(event, colour=colour))
    return 1 if classifier.state == "failed" else 0
